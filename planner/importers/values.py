"""The settings of a launch command, read by key: each getter says what it wants (a whole
number, a switch, ...) and a value that is not that is one error naming the key, the value and
what is expected — or the variable the script leaves unset and the `--set` that gives it. What
is never read is listed (`unread`): flags rlplan does not price are ignored with a note."""

from __future__ import annotations

import re
from collections.abc import Iterable

from planner.errors import InputError
from planner.importers.shell import Text

_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off", "none", "null"}


def unset_error(where: str, value: Text) -> InputError:
    names = sorted(set(value.unset))
    named = [n for n in names if not n.startswith(("$(", "`"))]
    if named:
        which = ", ".join(f"${n}" for n in named)
        sets = " ".join(f"--set {n}=VALUE" for n in named)
        return InputError(f"import: {where}={value.text}: {which} "
                          f"{'is' if len(named) == 1 else 'are'} not set in the script (an "
                          f"environment variable); give {'it' if len(named) == 1 else 'them'} "
                          f"with {sets}")
    return InputError(f"import: {where}={value.text}: the value comes from a command rlplan "
                      "does not run; set it in the script, or give the variable holding it "
                      "with --set NAME=VALUE")


def as_int(where: str, value: Text, minimum: int = 1) -> int:
    if value.unset:
        raise unset_error(where, value)
    raw = value.text.strip()
    if not re.fullmatch(r"[+-]?\d{1,12}", raw):
        raise InputError(f"import: {where}={raw!r}: expected a whole number (e.g. {where}=8); "
                         "fix the script or give the variable with --set NAME=VALUE")
    number = int(raw)
    if number < minimum:
        raise InputError(f"import: {where}={raw}: expected a whole number ≥ {minimum}")
    return number


def as_float(where: str, value: Text) -> float:
    if value.unset:
        raise unset_error(where, value)
    try:
        return float(value.text)
    except ValueError:
        raise InputError(f"import: {where}={value.text!r}: expected a number") from None


def as_bool(where: str, value: Text) -> bool:
    if value.unset:
        raise unset_error(where, value)
    low = value.text.strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise InputError(f"import: {where}={value.text!r}: expected true or false")


class Settings:
    """key → value(s) of one command (the last occurrence of a key wins), read by key."""

    def __init__(self, values: dict[str, list[Text]], shown: dict[str, str] | None = None):
        self.values = values
        self.shown = shown or {}  # key → how the script wrote it (e.g. with its `+`)
        self.read: set[str] = set()

    def has(self, key: str) -> bool:
        self.read.add(key)
        return key in self.values

    def first(self, *keys: str) -> tuple[str, list[Text]] | None:
        """The first of `keys` the command sets, with its values."""
        for key in keys:
            if self.has(key):
                return key, self.values[key]
        return None

    def text(self, key: str, default: str | None = None) -> Text | None:
        if not self.has(key):
            return None if default is None else Text(default)
        vals = self.values[key]
        return vals[0] if vals else Text("true")

    def int(self, key: str, default: int, minimum: int = 1) -> int:
        value = self.text(key)
        return default if value is None else as_int(self.name(key), value, minimum)

    def float(self, key: str, default: float) -> float:
        value = self.text(key)
        return default if value is None else as_float(self.name(key), value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.text(key)
        return default if value is None else as_bool(self.name(key), value)

    def name(self, key: str) -> str:
        return self.shown.get(key, key)

    def unread(self) -> list[str]:
        return [self.name(k) for k in self.values if k not in self.read]


def flag_settings(words: Iterable[Text]) -> Settings:
    """`--flag value`, `--flag=value`, `--flag v1 v2` and bare switches."""
    values: dict[str, list[Text]] = {}
    current: str | None = None
    for w in words:
        if w.text.startswith("--") and len(w.text) > 2:
            flag, eq, rest = w.text.partition("=")
            values[flag] = [Text(rest)] if eq else []
            current = None if eq else flag
        elif current is not None:
            values[current].append(w)
    return Settings(values)


def note_unread(unread: list[str], what: str) -> list[str]:
    """The note listing what rlplan ignored (datasets, logging, optimizer, ...)."""
    if not unread:
        return []
    return [f"ignored ({len(unread)} {what} rlplan does not price): {', '.join(unread)}"]
