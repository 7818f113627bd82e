"""A safe reader of launch scripts: what a bash script would run, worked out without running
anything (no execution, no subprocess, no file read).

It follows the script's variables (`X=...`, `export X=...`, `${X:-default}`, `$((a * b))`,
arrays `A=( ... )`, `A+=( ... )`, `"${A[@]}"`), here-documents read into a variable
(`read -r -d '' X <<EOF`), `if` tests it can decide (`[[ "$A" == b ]]`, `-z`, `-n`, numbers)
and the command strings of `bash -c "..."` (as `srun ... bash -c` wraps them), and collects the
commands the script runs with their words expanded as bash would split them. What it cannot
know stays visible: a variable the script never sets (an environment variable such as
`$NNODES`) or a command's output (`$(hostname)`) is kept as text and named in `Text.unset`, so
the reader of a value can say which `--set NAME=VALUE` gives it. Loops, `case` and function
bodies are not run (launch scripts use them to start Ray workers, not to configure training).
Tokens: shell_syntax.py; the tree of commands: shell_tree.py; tests and arithmetic:
shell_expr.py.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from planner.errors import InputError
from planner.importers.shell_expr import Arith as Arithmetic
from planner.importers.shell_expr import Test
from planner.importers.shell_syntax import (
    Arith,
    ArrayAssign,
    Cmd,
    Lit,
    Part,
    Redirect,
    Var,
    Word,
    tokens,
    word_parts,
)
from planner.importers.shell_tree import DECLARE, If, List, Parser, Simple, Skipped, describe

# Builtins and tools whose running changes nothing rlplan reads.
_IGNORED = {"set", "echo", "printf", "mkdir", "cd", "pushd", "popd", "exit", "return", "sleep",
            "shift", "trap", "wait", "unset", "ulimit", "umask", "cp", "mv", "rm", "ln", "touch",
            "pip", "pip3", "git", "wget", "curl", "cat", "tee", "chmod", "nvidia-smi", "date",
            "hostname", "sed", "awk", "grep", "ls", "true", ":", "false", "break", "continue",
            "shopt", "alias", "eval", "wandb", "huggingface-cli", "kill", "pkill"}
_MAX_DEPTH = 8  # bash -c inside bash -c ...


@dataclass(frozen=True)
class Text:
    """One expanded word. `unset` names what the value depends on that the script leaves
    open: variables it never sets (give them with --set NAME=VALUE) and `$(commands)`."""

    text: str
    unset: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.text


@dataclass
class Command:
    words: list[Text]
    env: dict[str, Text]  # `NAME=value command ...`


@dataclass
class Script:
    commands: list[Command]
    variables: dict[str, list[Text]]
    notes: list[str] = field(default_factory=list)
    sbatch: dict[str, str] = field(default_factory=dict)  # #SBATCH option → value
    overridden: list[str] = field(default_factory=list)  # --set names the script assigns


def read_script(text: str, settings: dict[str, str] | None = None) -> Script:
    """What `text` runs, with `settings` (--set NAME=VALUE) fixed: a setting wins over the
    script's own assignment of that name (as an edit of that line would)."""
    shell = _Shell({k: [Text(v)] for k, v in (settings or {}).items()})
    try:
        shell.run(text, 0)
    except RecursionError:  # ( ( ( ..., ${A:-${B:-...}} nested thousands deep
        raise InputError("import: the script nests parentheses, braces or ${...} too deeply "
                         "to read; give the launch command plainly") from None
    unused = sorted(set(shell.forced) - shell.referenced)
    if unused:
        shell.notes.append(f"--set {', '.join(unused)}: the script does not use "
                           f"{'it' if len(unused) == 1 else 'them'}")
    return Script(shell.commands, shell.vars, shell.notes, _sbatch(text),
                  sorted(shell.overridden))


def _sbatch(text: str) -> dict[str, str]:
    """`#SBATCH` directives (Slurm reads them from the comments): option → value."""
    out = {}
    for m in re.finditer(r"^#SBATCH\s+(--?[\w-]+)(?:[= ]\s*([^#\s]\S*))?", text, re.M):
        out[m.group(1)] = m.group(2) or ""
    return out

# --- evaluation ----------------------------------------------------------------------------------

class _Shell:
    def __init__(self, forced: dict[str, list[Text]]):
        self.vars: dict[str, list[Text]] = dict(forced)
        self.forced = set(forced)
        self.referenced: set[str] = set()
        self.overridden: set[str] = set()
        self.commands: list[Command] = []
        self.notes: list[str] = []

    def run(self, text: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise InputError(f"import: the script nests `bash -c` more than {_MAX_DEPTH} deep; "
                             "give the launch command directly")
        parser = Parser(tokens(text))
        tree = parser.sequence()
        if parser.peek() is not None:
            raise InputError("import: the script's shell syntax: an unmatched ')' or ';;'; fix "
                             "the script")
        self.exec(tree, depth)

    # statements

    def exec(self, node: object, depth: int) -> bool | None:
        """Run a node; its status: True (success), False, or None (cannot be decided)."""
        if isinstance(node, List):
            status: bool | None = True
            for op, item in node.items:
                if op == "&&" and status is not True:
                    continue
                if op == "||" and status is not False:
                    continue
                status = self.exec(item, depth)
            return status
        if isinstance(node, If):
            for cond, body in node.branches:
                decided = self.exec(cond, depth)
                if decided is None:
                    self.notes.append(f"if {describe(cond)}: rlplan cannot decide it (a file "
                                      "test, or a value the script leaves open); read as false")
                if decided:
                    return self.exec(body, depth)
            return self.exec(node.otherwise, depth) if node.otherwise else True
        if isinstance(node, Skipped):
            if _mentions_launch(node.raw):
                self.notes.append(f"{node.what} not read: rlplan does not run loops or "
                                  "functions; put the launch command outside it")
            return True
        assert isinstance(node, Simple)
        return self.simple(node, depth)

    def simple(self, cmd: Simple, depth: int) -> bool | None:
        if not cmd.words:
            for a in cmd.assigns:
                self.assign(a)
            return True
        env = {}
        for a in cmd.assigns:  # NAME=value command: for that command only
            if isinstance(a, Word):
                name, _, _ = a.raw.partition("=")
                env[name.rstrip("+")] = self.assigned_value(a)
        if cmd.words[0].raw == "[[":  # no word splitting between [[ and ]]
            return self.test([self.join(w.parts) for w in cmd.words])
        words = [w for word in cmd.words for w in self.expand(word)]
        if not words:
            return True
        name = words[0].text.rsplit("/", 1)[-1]
        if name in ("[", "test"):
            return self.test(words)
        if name in DECLARE:  # export X=1 Y=2, declare -a A=( ... )
            for a in cmd.declared:
                self.assign(a)
            return True
        if name == "read":
            return self.read(words, cmd.redirects)
        if name in ("source", "."):
            shown = words[1].text if len(words) > 1 else ""
            self.notes.append(f"source {shown}: not read (rlplan reads only this file); give "
                              "what it sets with --set NAME=VALUE")
            return True
        inner = _bash_c(words)
        if inner is not None:
            self.run(inner.text, depth + 1)
            return True
        if name in _IGNORED:
            return name not in ("false",)
        self.commands.append(Command(words, env))
        return True

    def read(self, words: list[Text], redirects: list[Redirect]) -> bool:
        body = next((r for r in redirects if r.heredoc is not None), None)
        names = [w.text for w in words[1:] if re.fullmatch(r"[A-Za-z_]\w*", w.text)]
        if body is None or not names:
            return True
        if body.heredoc_quoted:
            value = Text(body.heredoc)
        else:
            value = self.join(word_parts(body.heredoc, quoted=True))
        self.set(names[-1], [Text(value.text.strip("\n"), value.unset)])
        return True

    def assign(self, a: Word | ArrayAssign) -> None:
        if isinstance(a, ArrayAssign):
            items = [t for w in a.items for t in self.expand(w)]
            self.set(a.name, (self.vars.get(a.name, []) if a.append else []) + items, a.append)
            return
        name, _, _ = a.raw.partition("=")
        append = name.endswith("+")
        name = name.rstrip("+")
        value = self.assigned_value(a)
        if append:
            old = self.vars.get(name, [Text("")])[0]
            value = Text(old.text + value.text, old.unset + value.unset)
        self.set(name, [value], append)

    def assigned_value(self, a: Word) -> Text:
        """The value of `NAME=word`: expanded without splitting; a command substitution in it
        is named by NAME (what --set gives)."""
        name = a.raw.partition("=")[0].rstrip("+")
        parts = _after_equals(a)
        value = self.join(parts)
        if any(u.startswith(("$(", "`")) for u in value.unset):
            value = Text(value.text, tuple(name if u.startswith(("$(", "`")) else u
                                           for u in value.unset))
        return value

    def set(self, name: str, value: list[Text], append: bool = False) -> None:
        if name in self.forced:
            self.overridden.add(name)
            return
        self.vars[name] = value

    # expansion

    def lookup(self, name: str) -> list[Text] | None:
        if name in self.forced:
            self.referenced.add(name)
        if name in self.vars:
            return self.vars[name]
        if name in "@*":
            return []
        if name.isdigit():
            return [Text("")] if name != "0" else [Text("script.sh")]
        if name in ("#", "?", "$", "!"):
            return [Text("0")]
        return None

    def parameter(self, v: Var) -> tuple[list[Text], bool]:
        """A parameter's values and whether they are an array's elements (`[@]`/`[*]`)."""
        values = self.lookup(v.name)
        if v.length:
            return [Text(str(len(values[0].text)) if values else "0")], False
        whole = v.index in ("@", "*") or v.name in "@*"
        if values is not None and v.index is not None and not whole:
            try:
                values = values[int(v.index):int(v.index) + 1] or [Text("")]
            except ValueError:
                values = values[:1]
        elif values is not None and not whole:
            values = values[:1] or [Text("")]
        empty = values is None or (all(not t.text for t in values) and not any(
            t.unset for t in values))
        if v.op in (":-", "-", ":=", "="):
            missing = values is None or (v.op.startswith(":") and empty)
            if missing:
                fallback = self.join(v.arg or ())
                if v.op in (":=", "="):
                    self.set(v.name, [fallback])
                return [fallback], False
        elif v.op in (":+", "+"):
            present = values is not None and not (v.op == ":+" and empty)
            return ([self.join(v.arg or ())] if present else [Text("")]), False
        if values is None:
            return [Text("${" + v.name + "}", (v.name,))], False
        if v.op in ("#", "##", "%", "%%"):
            pattern = "".join(p.text for p in (v.arg or ()) if isinstance(p, Lit))
            values = [Text(_trim(t.text, v.op, pattern), t.unset) for t in values]
        return values, whole

    def expand(self, word: Word) -> list[Text]:
        """The words `word` becomes (bash's field splitting of unquoted expansions)."""
        fields: list[list[Text]] = [[]]
        keep = [False]  # a field with quoted (even empty) text survives
        for part in word.parts:
            if isinstance(part, Lit):
                fields[-1].append(Text(part.text))
                keep[-1] = keep[-1] or part.quoted or bool(part.text)
                continue
            values, whole = self.value(part)
            text = Text(" ".join(t.text for t in values),
                        tuple(u for t in values for u in t.unset))
            if part.quoted and not whole:
                fields[-1].append(text)
                keep[-1] = True
                continue
            # "${A[@]}": one word per element; unquoted: split at whitespace
            pieces = values if part.quoted else _split(values)
            if not pieces:
                continue
            split = not part.quoted
            if split and text.text[:1].isspace() and (fields[-1] or keep[-1]):
                fields.append([])
                keep.append(False)
            for k, piece in enumerate(pieces):
                if k:
                    fields.append([])
                    keep.append(True)
                fields[-1].append(piece)
                keep[-1] = True
            if split and text.text[-1:].isspace():
                fields.append([])
                keep.append(False)
        return [Text("".join(t.text for t in f), tuple(u for t in f for u in t.unset))
                for f, k in zip(fields, keep, strict=True) if k]

    def join(self, parts: tuple[Part, ...]) -> Text:
        """Parts expanded to one text (assignments, here-documents: no splitting)."""
        texts = []
        for part in parts:
            if isinstance(part, Lit):
                texts.append(Text(part.text))
            else:
                values, _ = self.value(part)
                texts.append(Text(" ".join(t.text for t in values),
                                  tuple(u for t in values for u in t.unset)))
        return Text("".join(t.text for t in texts), tuple(u for t in texts for u in t.unset))

    def value(self, part: Part) -> tuple[list[Text], bool]:
        if isinstance(part, Var):
            return self.parameter(part)
        if isinstance(part, Arith):
            return [self.arith(part.expr)], False
        assert isinstance(part, Cmd)  # its output is unknown: `$(...)` stands for it
        return [Text("$(...)", (part.text,))], False

    def arith(self, expr: str) -> Text:
        text = self.join(word_parts(expr, quoted=True))
        if text.unset:
            return Text(f"$(({expr}))", text.unset)
        try:
            value, unset = Arithmetic(text.text, self.lookup).value()
        except ValueError as err:
            raise InputError(f"import: $(({expr})): {err}; fix the script or give the "
                             "variable with --set NAME=VALUE") from None
        return Text(f"$(({expr}))", unset) if unset else Text(str(value))

    # tests

    def test(self, words: list[Text]) -> bool | None:
        args = [w for w in words[1:]]
        if words[0].text in ("[[", "[") and args and args[-1].text in ("]]", "]"):
            args = args[:-1]
        try:
            return Test(args).value()
        except (IndexError, ValueError):
            return None


def _split(values: list[Text]) -> list[Text]:
    """Unquoted values split into words at whitespace; a piece holding a value the script
    leaves open (`${NAME}`, `$(command)`) keeps its names."""
    out = []
    for value in values:
        for piece in value.text.split():
            open_ = value.unset if value.unset and ("$" in piece or "`" in piece) else ()
            out.append(Text(piece, open_))
    return out


def _after_equals(a: Word) -> tuple[Part, ...]:
    """The parts of `NAME=value` after the first '='."""
    out: list[Part] = []
    found = False
    for p in a.parts:
        if found:
            out.append(p)
        elif isinstance(p, Lit) and "=" in p.text:
            found = True
            rest = p.text.split("=", 1)[1]
            if rest:
                out.append(Lit(rest, p.quoted))
    return tuple(out)


def _trim(text: str, op: str, pattern: str) -> str:
    if op in ("#", "##"):
        cuts = [k for k in range(len(text) + 1) if fnmatch.fnmatchcase(text[:k], pattern)]
        return text[(max(cuts) if op == "##" else min(cuts)):] if cuts else text
    cuts = [k for k in range(len(text) + 1) if fnmatch.fnmatchcase(text[k:], pattern)]
    return text[:(min(cuts) if op == "%%" else max(cuts))] if cuts else text


def _bash_c(words: list[Text]) -> Text | None:
    """The command string of `... bash -c STRING` (also `sh -c`, `bash -lc`)."""
    for k, w in enumerate(words[:-1]):
        if w.text.rsplit("/", 1)[-1] in ("bash", "sh", "zsh"):
            for j in range(k + 1, len(words) - 1):
                flag = words[j].text
                if flag.startswith("-") and "c" in flag and not flag.startswith("--"):
                    return words[j + 1]
                if not flag.startswith("-"):
                    break
    return None


def _mentions_launch(raw: str) -> bool:
    return bool(re.search(r"verl\.|openrlhf\.cli|pretrain_\w+\.py|main_ppo", raw))
