"""Reading input files and the shipped catalogs, with errors a user can act on.

Every reader here turns a failure (missing file, malformed YAML/JSON, a field pydantic rejects,
an unknown catalog name) into one `InputError` line naming the file, the field and the fix.
Nothing is read loosely: a key written twice in one mapping is refused (YAML and JSON parsers
would keep the last silently), and fields are validated strictly (a boolean or a string is not
a count, 8.0 is not an integer).

Nothing read can hurt the machine (`planner.specs.bounds`, "input files"): only a regular file
is opened (a FIFO, a device such as /dev/zero or /dev/urandom, a socket is refused before it is
opened, so nothing blocks or reads without end), at most `MAX_INPUT_BYTES` of it; nesting
deeper than `MAX_NESTING` (the parsers recurse per level; YAML aliases count as the nesting
they stand for, and a YAML document that contains itself is refused) and numbers longer than
`MAX_NUMBER_CHARS` are refused with the line they are on, before any parser or `int()` fails.
"""

from __future__ import annotations

import difflib
import errno
import json
import json.decoder
import json.scanner
import os
import re
import stat
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import InputError
from planner.specs import bounds as lim

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


_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str | None:
    """What a file that is not a regular file or a folder is, in words (None: it is one)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")


def os_problem(path: Path | str, exc: OSError) -> str:
    """What an OSError on `path` means, in words: a name too long says which part and its
    length (the system allows 255 bytes per name), others the system's reason."""
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(os.fsencode(part)) for part in Path(path).parts), default=0)
        if longest > 255:
            return f"file name too long: a part of {longest:,} bytes, the limit is 255"
        return f"path too long: {len(os.fsencode(str(path))):,} bytes"
    return exc.strerror or exc.__class__.__name__


def read_bytes(path: Path, what: str) -> bytes:
    """The content of an input file: a regular file (a FIFO or a device is refused before it is
    opened) of at most `MAX_INPUT_BYTES`."""
    shown = shorten(str(path))
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{shown}: is a folder; give the path of a {what} file")
        if (kind := file_kind(mode)) is not None:
            raise InputError(f"{shown}: is {kind}, not a regular file; give the path of a "
                             f"{what} file")
        # non-blocking: a FIFO put in the file's place since the check cannot block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(f"{shown}: is not a regular file; give the path of a {what} "
                                 "file")
            data = _read_at_most(fd, lim.MAX_INPUT_BYTES + 1)
        finally:
            os.close(fd)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(f"{shown}: no such file; check the path") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot read it ({os_problem(path, exc)}); check the "
                         "path") from None
    except ValueError:  # a NUL byte in the name
        raise InputError(f"{shown}: not a valid path; check it") from None
    if len(data) > lim.MAX_INPUT_BYTES:
        raise InputError(f"{shown}: larger than {lim.MAX_INPUT_BYTES // 1024**2} MiB, the "
                         "limit for an input file; check the path")
    return data


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit and (chunk := os.read(fd, min(1 << 20, limit - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_text(path: Path, what: str) -> str:
    """An input file's text (UTF-8), read as `read_bytes` reads it."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{shorten(str(path))}: cannot read it as text (not UTF-8 at byte "
                         f"{exc.start:,}); check the path") from None


def shorten(text: str, limit: int = 120) -> str:
    """`text` cut to `limit` characters for a message (a 5,000-character name stays readable)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


def _duplicate_message(path: Path | str, dup: _DuplicateKey) -> str:
    return (f"{path}: key '{dup.key}' appears twice in one mapping (again at line {dup.line}); "
            "keep one (a parser would silently take the last)")


class _Refused(Exception):
    """A document shaped beyond the limits: what, and the line it is on."""

    def __init__(self, problem: str, line: int, fix: str = "check the file",
                 literal: str = "") -> None:
        super().__init__(problem, line)
        self.problem, self.line, self.fix, self.literal = problem, line, fix, literal


def _refused_message(path: Path | str, refused: _Refused) -> str:
    return f"{shorten(str(path))}: line {refused.line}: {refused.problem}; {refused.fix}"


def _too_deep() -> str:
    return (f"mappings and lists nested deeper than {lim.MAX_NESTING} levels (an input nests "
            "a few)")


def _too_long(chars: int) -> str:
    return f"a number of {chars:,} characters (no field takes more than {lim.MAX_NUMBER_CHARS})"


# Aliases may not make a document larger than a file of the size limit could hold written out
# (a value takes at least two characters there): the bound on "billion laughs".
_MAX_EXPANDED_VALUES = lim.MAX_INPUT_BYTES // 2


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a composed YAML document whose aliases nest it deeper than `MAX_NESTING`, expand
    it beyond `_MAX_EXPANDED_VALUES` values, or make it contain itself. Iterative (the limit
    is what keeps recursion safe), each node once."""
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        line = node.start_mark.line + 1
        if leaving:
            kids = _children(node)
            depth[id(node)] = 1 + max((depth[id(k)] for k in kids), default=0)
            size[id(node)] = 1 + sum(size[id(k)] for k in kids)
            if depth[id(node)] > lim.MAX_NESTING:
                raise _Refused(_too_deep() + ", counting what its aliases stand for", line)
            if size[id(node)] > _MAX_EXPANDED_VALUES:
                raise _Refused(f"aliases expand the document beyond {_MAX_EXPANDED_VALUES:,} "
                               "values", line, "write the values out")
            continue
        if id(node) in depth:
            continue
        entered.add(id(node))
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in entered and id(kid) not in depth:  # on the path to here: a cycle
                raise _Refused("an alias that contains itself (a recursive structure)",
                               kid.start_mark.line + 1, "write the value out")
            stack.append((kid, False))


class _Strict:
    """The constructor rules of every YAML rlplan reads: a key repeated within one mapping is
    refused (merge keys `<<` aside: a mapping may override what it merges in), and so is a
    number beyond `MAX_NUMBER_CHARS`."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: SafeLoader reports it itself below
                continue
            if repeated:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]

    def _bounded_number(self, node: yaml.ScalarNode) -> Any:
        if len(node.value) > lim.MAX_NUMBER_CHARS:
            raise _Refused(_too_long(len(node.value)), node.start_mark.line + 1,
                           "check the value")
        if node.tag.endswith(":int"):
            return self.construct_yaml_int(node)  # type: ignore[attr-defined]
        return self.construct_yaml_float(node)  # type: ignore[attr-defined]


class _UniqueKeyLoader(_Strict, yaml.SafeLoader):
    """SafeLoader with the `_Strict` rules that also refuses nesting beyond `MAX_NESTING`
    (checked as the composer descends, then with aliases expanded): what users' files go
    through."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> yaml.Node:
        self._depth += 1
        try:
            if self._depth > lim.MAX_NESTING:
                raise _Refused(_too_deep(), self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        _check_expanded(node)
        return node


# The package's own files (framework presets, read by every plan): libyaml's parser, several
# times faster, with the same constructor rules; nothing of theirs nests deep. Without libyaml
# (PyYAML built without it), the pure-Python loader.
_ShippedLoader: type = (type("_ShippedLoader", (_Strict, yaml.CSafeLoader), {})
                        if getattr(yaml, "__with_libyaml__", False) else _UniqueKeyLoader)

for _loader in {_UniqueKeyLoader, _ShippedLoader}:
    _loader.add_constructor("tag:yaml.org,2002:map", _loader.construct_yaml_map)
    for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        _loader.add_constructor(_tag, _loader._bounded_number)
    # YAML 1.1 reads `5e4` (no dot) as a string; strict fields would then refuse a plain
    # number. YAML 1.2 and JSON read it as a float: so does rlplan (checked after int, so `5`
    # stays an int).
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def parse_yaml(text: str, source: Path | str, shipped: bool = False) -> Any:
    """Parse YAML text read from `source`; a syntax error names the line and column, a
    repeated key its line, a document beyond the limits what and where. `shipped`: one of the
    package's own files (`_ShippedLoader`)."""
    try:
        return yaml.load(text, Loader=_ShippedLoader if shipped else _UniqueKeyLoader)
    except _DuplicateKey as dup:
        raise InputError(_duplicate_message(source, dup)) from None
    except _Refused as refused:
        raise InputError(_refused_message(source, refused)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}: malformed YAML{where}: {problem}; fix the syntax") from None


def read_yaml(path: Path, what: str | None = None) -> Any:
    """Parse a YAML file (`read_text`, `parse_yaml`)."""
    return parse_yaml(read_text(path, what or "YAML"), path)


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
    """json.JSONDecoder that refuses a key repeated within one object (naming its line),
    nesting beyond `MAX_NESTING` and numbers beyond `MAX_NUMBER_CHARS`. The pure-Python
    scanner is used so that each object's and array's start offset is known."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self.parse_object = self._parse_object
        self.parse_array = self._parse_array
        self.parse_int = self._bounded(int)
        self.parse_float = self._bounded(float)
        self.scan_once = json.scanner.py_make_scanner(self)

    def _enter(self, text: str, at: int) -> None:
        self._depth += 1
        if self._depth > lim.MAX_NESTING:
            raise _Refused(_too_deep(), text.count("\n", 0, at) + 1)

    def _parse_object(self, s_and_end: tuple[str, int], strict: bool, scan_once: Any,
                      hook: Any, pairs_hook: Any, memo: Any = None) -> tuple[Any, int]:
        text, start = s_and_end
        self._enter(text, start)
        try:
            pairs, end = json.decoder.JSONObject(s_and_end, strict, scan_once, None, list, memo)
        finally:
            self._depth -= 1
        value = dict(pairs)
        if len(value) < len(pairs):  # a key repeated: find where (rare, so scan the text)
            seen: set[str] = set()
            for key, at in _object_keys(text, start):
                if key in seen:
                    raise _DuplicateKey(key, text.count("\n", 0, at) + 1)
                seen.add(key)
        return value, end

    def _parse_array(self, s_and_end: tuple[str, int], scan_once: Any) -> tuple[Any, int]:
        self._enter(*s_and_end)
        try:
            return json.decoder.JSONArray(s_and_end, scan_once)
        finally:
            self._depth -= 1

    def _bounded(self, kind: type) -> Any:
        def parse(literal: str) -> Any:
            if len(literal) > lim.MAX_NUMBER_CHARS:
                # the scanner does not say where: the caller finds the literal's line
                raise _Refused(_too_long(len(literal)), 0, "check the value", literal)
            return kind(literal)
        return parse


def parse_json(text: str, source: Path | str) -> Any:
    """Parse JSON text read from `source`; a syntax error names the line and column, a
    repeated key its line, a document beyond the limits what and where."""
    try:
        return json.loads(text, cls=_UniqueKeyDecoder)
    except _DuplicateKey as dup:
        raise InputError(_duplicate_message(source, dup)) from None
    except _Refused as refused:
        if refused.literal:  # a number: the line of its first appearance
            refused.line = text.count("\n", 0, max(0, text.find(refused.literal))) + 1
        raise InputError(_refused_message(source, refused)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: malformed JSON at line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg}; fix the syntax") from None


def read_json(path: Path, what: str | None = None) -> Any:
    """Parse a JSON file (`read_text`, `parse_json`)."""
    return parse_json(read_text(path, what or "JSON"), path)


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
        elif err["type"] == "finite_number":  # inf, 1e400 (read as inf) or nan
            parts.append(f"field '{field}': {err.get('input')!r} is not a finite number; give "
                         "a finite number")
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
