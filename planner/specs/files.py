"""Reading input files and the shipped catalogs, with errors a user can act on.

Every reader here turns a failure (missing file, malformed YAML/JSON, a field pydantic rejects,
an unknown catalog name) into one `InputError` line naming the file, the field and the fix.
Nothing is read loosely: a key written twice in one mapping is refused (YAML and JSON parsers
would keep the last silently), and fields are validated strictly (a boolean or a string is not
a count, 8.0 is not an integer).
"""

from __future__ import annotations

import difflib
import json
import json.decoder
import json.scanner
import re
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


def path_kind(path: Path) -> str | None:
    """"file", "dir" or None (nothing there). A string that cannot be a path on this system
    (too long, a NUL byte) is nothing there: it is a name, not a path."""
    try:
        return "dir" if path.is_dir() else "file" if path.exists() else None
    except (OSError, ValueError):
        return None


def read_text(path: Path, what: str) -> str:
    if path_kind(path) == "dir":
        raise InputError(f"{path}: is a folder; give the path of a {what} file")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file; check the path") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{shorten(str(path))}: cannot read it as text "
                         f"({exc.__class__.__name__}); check the path") from None


def shorten(text: str, limit: int = 120) -> str:
    """`text` cut to `limit` characters for a message (a 5,000-character name stays readable)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


def _duplicate_message(path: Path, dup: _DuplicateKey) -> str:
    return (f"{path}: key '{dup.key}' appears twice in one mapping (again at line {dup.line}); "
            "keep one (a parser would silently take the last)")


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated within one mapping (merge keys `<<` aside: a
    mapping may override what it merges in)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: SafeLoader reports it itself below
                continue
            if repeated:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:map", _UniqueKeyLoader.construct_yaml_map)
# YAML 1.1 reads `5e4` (no dot) as a string; strict fields would then refuse a plain number.
# YAML 1.2 and JSON read it as a float: so does rlplan (checked after int, so `5` stays an int).
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def read_yaml(path: Path, what: str | None = None) -> Any:
    """Parse a YAML file; a syntax error names the line and column, a repeated key its line."""
    text = read_text(path, what or "YAML")
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as dup:
        raise InputError(_duplicate_message(path, dup)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}: malformed YAML{where}: {problem}; fix the syntax") from None


def _object_keys(text: str, start: int) -> list[tuple[str, int]]:
    """The keys of the JSON object whose body starts at `start` (just after its '{'), with
    their offsets; nested objects' keys are skipped. The text is already known to parse."""
    keys, depth, i = [], 0, start
    while depth >= 0:
        c = text[i]
        if c == '"':
            value, end = json.decoder.scanstring(text, i + 1)
            if depth == 0 and text.startswith(":", json.decoder.WHITESPACE.match(text, end).end()):
                keys.append((value, i))
            i = end
            continue
        depth += 1 if c in "{[" else -1 if c in "}]" else 0
        i += 1
    return keys


class _UniqueKeyDecoder(json.JSONDecoder):
    """json.JSONDecoder that refuses a key repeated within one object, naming its line. The
    pure-Python scanner is used so each object's start offset is known (files are small)."""

    def __init__(self) -> None:
        super().__init__()
        self.parse_object = self._parse_object
        self.scan_once = json.scanner.py_make_scanner(self)

    def _parse_object(self, s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
        text, start = s_and_end
        value, end = json.decoder.JSONObject(s_and_end, *args)
        keys = _object_keys(text, start)
        if len(value) < len(keys):  # the dict kept fewer: some key was repeated
            seen: set[str] = set()
            for key, at in keys:
                if key in seen:
                    raise _DuplicateKey(key, text.count("\n", 0, at) + 1)
                seen.add(key)
        return value, end


def read_json(path: Path, what: str | None = None) -> Any:
    """Parse a JSON file; a syntax error names the line and column, a repeated key its line."""
    text = read_text(path, what or "JSON")
    try:
        return json.loads(text, cls=_UniqueKeyDecoder)
    except _DuplicateKey as dup:
        raise InputError(_duplicate_message(path, dup)) from None
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
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                        for p in err["loc"]).removeprefix(".")  # cluster.pools[1].gpu
        msg = err["msg"].removeprefix("Value error, ")
        limit = (err.get("ctx") or {}).get("le", (err.get("ctx") or {}).get("ge"))
        if not field:  # a check of the whole file (or section): no field to name
            parts.append(msg)
        elif err["type"] in ("less_than_equal", "greater_than_equal") and limit is not None:
            side = "above the limit" if err["type"] == "less_than_equal" else "below the floor"
            verb = "at most" if err["type"] == "less_than_equal" else "at least"
            got = err.get("input")
            shown = f"{got:,}" if isinstance(got, int | float) and not isinstance(got, bool) \
                else repr(got)
            parts.append(f"field '{field}': {shown} is {side} of {limit:,}; give {verb} {limit:,}")
        elif err["type"] == "missing":
            parts.append(f"field '{field}' is missing; add it")
        elif err["type"] == "extra_forbidden":
            parts.append(f"field '{field}' is not known; remove it or check its spelling")
        elif (strict := _strict_problem(err)) is not None:
            parts.append(f"field '{field}': {strict}")
        else:
            got = err.get("input")
            shown = ("" if isinstance(got, dict | list) or "input" not in err
                     else f" (got {shorten(repr(got))})")
            parts.append(f"field '{field}': {msg}{shown}")
    return f"{source}: " + "; ".join(parts)


_KIND = {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
         "string_type": "a string"}


def _strict_problem(err: Any) -> str | None:
    """What strict validation refused, in words: a boolean or a quoted number where a number
    goes, 8.0 where a count goes, 1 where true/false goes."""
    want = _KIND.get(err["type"])
    if want is None or "input" not in err:
        return None
    got = err["input"]
    if isinstance(got, bool):
        shown = "true" if got else "false"
        return f"expects {want}, got {shown} (a boolean); write {want}"
    if isinstance(got, float) and got.is_integer() and err["type"] == "int_type":
        return f"expects {want}, got {got!r}; write {int(got)}"
    if isinstance(got, str) and err["type"] in ("int_type", "float_type"):
        return f"expects {want}, got {shorten(repr(got))} (a string); write the number unquoted"
    if isinstance(got, int | float) and err["type"] in ("bool_type", "string_type"):
        fix = "true or false" if err["type"] == "bool_type" else "it in quotes"
        return f"expects {want}, got {got!r}; write {fix}"
    return None


def validate_as(model: type[ModelT], data: Any, source: str) -> ModelT:
    """`model.model_validate(data)` in strict mode (no bool → 1, no "8" → 8, no 8.0 → 8; ints
    are still taken where floats go), with a failure turned into one InputError line."""
    try:
        return model.model_validate(data, strict=True)
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
    return InputError(f"unknown {kind} '{shorten(name)}'{suggestion} ({hint})")


def looks_like_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or ref.lower().endswith((".json", ".yaml", ".yml"))
