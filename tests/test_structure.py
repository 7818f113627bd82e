"""The house: no import circle inside planner/, nor among bench/'s scripts (issue 24)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _modules(root: Path, package: str | None) -> dict[str, Path]:
    """Module name → file, for the package under `root` (or the scripts in `root`)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts] if package else parts) or package] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules `name` imports anywhere in its file: at the top, inside functions
    (deferred imports) and under `if TYPE_CHECKING:` alike. A deferred or type-only import is
    still a dependency; counting it is what keeps a circle from hiding behind one (the four
    issue 24 found all did)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package
                anchor = name.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from package import module` names the module; `from module import name` the module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _circles(modules: dict[str, Path]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def test_no_import_circle_in_planner():
    assert _circles(_modules(REPO / "planner", "planner")) == []


def test_no_import_circle_among_the_bench_scripts():
    bench = {name: path for name, path in _modules(REPO / "bench", None).items()}
    assert _circles(bench) == []


def test_the_circle_finder_finds_a_circle(tmp_path):
    for name, body in (("a", "from pkg import b\n"), ("b", "def f():\n    from pkg.c import x\n"),
                       ("c", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             "    from .a import y\n"), ("d", "import pkg.a\n")):
        (tmp_path / f"{name}.py").write_text(body)
    (tmp_path / "__init__.py").write_text("")
    assert _circles(_modules(tmp_path, "pkg")) == [["pkg.a", "pkg.b", "pkg.c"]]
