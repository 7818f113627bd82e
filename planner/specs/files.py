"""Reading input files and the shipped catalogs, with errors a user can act on.

Every reader here turns a failure (missing file, malformed YAML/JSON, a field pydantic rejects,
an unknown catalog name) into one `InputError` line naming the file, the field and the fix.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import InputError

ModelT = TypeVar("ModelT", bound=BaseModel)

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """The shipped catalog folder `name` ("model_specs" or "hardware_profiles").

    A wheel carries the catalogs inside the package (`planner/_data/`, see pyproject.toml); a
    source checkout or an editable install reads them from the repository's top level.
    """
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise InputError(f"the shipped catalog '{name}' is missing from this installation; "
                     "reinstall rlplan (pip install .)")


def read_text(path: Path, what: str) -> str:
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give the path of a {what} file")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it as text ({exc.__class__.__name__})") from None


def read_yaml(path: Path, what: str | None = None) -> Any:
    """Parse a YAML file; a syntax error names the line and column."""
    text = read_text(path, what or "YAML")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}: malformed YAML{where}: {problem}; fix the syntax") from None


def read_json(path: Path, what: str | None = None) -> Any:
    """Parse a JSON file; a syntax error names the line and column."""
    text = read_text(path, what or "JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg}; fix the syntax") from None


def read_mapping(path: Path, what: str | None = None) -> dict[str, Any]:
    """A YAML or JSON file (by suffix) whose top level must be a mapping; `what` names the
    kind of file expected in errors (default: by suffix)."""
    data = read_json(path, what) if path.suffix.lower() == ".json" else read_yaml(path, what)
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InputError(f"{path}: the file is {kind}; expected a mapping of fields")
    return data


def describe_validation_error(exc: ValidationError, source: str) -> str:
    """One line for a pydantic error: every failing field with what is wrong."""
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        limit = (err.get("ctx") or {}).get("le", (err.get("ctx") or {}).get("ge"))
        if not field:  # a check of the whole file (or section): no field to name
            parts.append(msg)
        elif err["type"] in ("less_than_equal", "greater_than_equal") and limit is not None:
            side = "above the limit" if err["type"] == "less_than_equal" else "below the floor"
            verb = "at most" if err["type"] == "less_than_equal" else "at least"
            parts.append(f"field '{field}': {err.get('input')!r} is {side} of {limit:,}; "
                         f"give {verb} {limit:,}")
        elif err["type"] == "missing":
            parts.append(f"field '{field}' is missing; add it")
        elif err["type"] == "extra_forbidden":
            parts.append(f"field '{field}' is not known; remove it or check its spelling")
        else:
            got = err.get("input")
            shown = "" if isinstance(got, dict | list) or "input" not in err else f" (got {got!r})"
            parts.append(f"field '{field}': {msg}{shown}")
    return f"{source}: " + "; ".join(parts)


def validate_as(model: type[ModelT], data: Any, source: str) -> ModelT:
    """`model.model_validate(data)`, with a failure turned into one InputError line."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, source)) from None


def catalog_names(folder: Path, suffixes: tuple[str, ...]) -> dict[str, Path]:
    """Shipped entries of a catalog folder: lower-case name → file."""
    return {p.stem.lower(): p for p in sorted(folder.iterdir())
            if p.is_file() and p.suffix.lower() in suffixes}


def unknown_name(kind: str, name: str, known: list[str], hint: str) -> InputError:
    """'unknown GPU 'h100'; did you mean h100-sxm, h100-pcie? (rlplan gpus lists them)'."""
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
    if not close:  # prefixes ('h100') are what people type most
        close = [k for k in known if k.startswith(name.lower())][:3]
    suggestion = f"; did you mean {', '.join(close)}?" if close else ""
    return InputError(f"unknown {kind} '{name}'{suggestion} ({hint})")


def looks_like_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or ref.lower().endswith((".json", ".yaml", ".yml"))
