"""The expressions of a launch script: `[[ ... ]]` / `[ ... ]` tests (True, False, or None when
they need what rlplan does not know) and `$(( ))` integer arithmetic."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Any


class Test:
    """`[[ ... ]]` / `[ ... ]`: True, False, or None when it needs what rlplan does not know
    (a file on the cluster, a variable left open)."""

    def __init__(self, args: list[Any]):  # shell.Text: .text, and .unset (open names)
        self.a, self.i = args, 0

    def value(self) -> bool | None:
        out = self.disjunction()
        if self.i != len(self.a):
            raise ValueError("trailing words")
        return out

    def disjunction(self) -> bool | None:
        left = self.conjunction()
        while self.i < len(self.a) and self.a[self.i].text in ("||", "-o"):
            self.i += 1
            left = _or(left, self.conjunction())
        return left

    def conjunction(self) -> bool | None:
        left = self.unary()
        while self.i < len(self.a) and self.a[self.i].text in ("&&", "-a"):
            self.i += 1
            left = _and(left, self.unary())
        return left

    def unary(self) -> bool | None:
        a = self.a
        if a[self.i].text == "!":
            self.i += 1
            inner = self.unary()
            return None if inner is None else not inner
        if a[self.i].text == "(":
            self.i += 1
            inner = self.disjunction()
            self.i += 1
            return inner
        if a[self.i].text in ("-z", "-n") and self.i + 1 < len(a):
            arg = a[self.i + 1]
            self.i += 2
            if arg.unset:
                return None
            return (arg.text == "") == (a[self.i - 2].text == "-z")
        if re.fullmatch(r"-[a-zA-Z]", a[self.i].text) and self.i + 1 < len(a):
            self.i += 2  # -f FILE, -d DIR, ...: the cluster's files are not here
            return None
        left = a[self.i]
        if self.i + 2 < len(a) + 0 and self.i + 1 < len(a) and a[self.i + 1].text in _BINARY:
            op, right = a[self.i + 1].text, a[self.i + 2]
            self.i += 3
            if left.unset or right.unset:
                return None
            return _BINARY[op](left.text, right.text)
        self.i += 1
        return None if left.unset else left.text != ""


def _num(f):
    return lambda x, y: f(int(x), int(y))


_BINARY = {"==": lambda x, y: fnmatch.fnmatchcase(x, y), "=": lambda x, y: fnmatch.fnmatchcase(
    x, y), "!=": lambda x, y: not fnmatch.fnmatchcase(x, y), "=~": lambda x, y: bool(
    re.search(y, x)), "<": lambda x, y: x < y, ">": lambda x, y: x > y,
    "-eq": _num(lambda x, y: x == y), "-ne": _num(lambda x, y: x != y),
    "-lt": _num(lambda x, y: x < y), "-le": _num(lambda x, y: x <= y),
    "-gt": _num(lambda x, y: x > y), "-ge": _num(lambda x, y: x >= y)}


def _or(x: bool | None, y: bool | None) -> bool | None:
    return True if x or y else (None if x is None or y is None else False)


def _and(x: bool | None, y: bool | None) -> bool | None:
    return False if x is False or y is False else (None if x is None or y is None else True)


class Arith:
    """Integer arithmetic of `$(( ))`: + - * / % and parentheses, unary signs, variable names
    (bash's integer division truncates toward zero)."""

    def __init__(self, text: str, lookup: Callable[[str], Any]):
        self.toks = re.findall(r"\d+|[A-Za-z_]\w*|\*\*|[-+*/%()]|\S", text)
        self.i, self.lookup, self.unset = 0, lookup, []

    def value(self) -> tuple[int, tuple[str, ...]]:
        if not self.toks:
            return 0, ()
        out = self.sum()
        if self.i != len(self.toks):
            raise ValueError(f"cannot read '{self.toks[self.i]}' there")
        return out, tuple(self.unset)

    def sum(self) -> int:
        out = self.product()
        while self.i < len(self.toks) and self.toks[self.i] in "+-":
            op = self.toks[self.i]
            self.i += 1
            out = out + self.product() if op == "+" else out - self.product()
        return out

    def product(self) -> int:
        out = self.unary()
        while self.i < len(self.toks) and self.toks[self.i] in ("*", "/", "%"):
            op = self.toks[self.i]
            self.i += 1
            right = self.unary()
            if op == "*":
                out *= right
            elif right == 0:
                raise ValueError("division by zero")
            else:
                q = abs(out) // abs(right) * (1 if (out >= 0) == (right > 0) else -1)
                out = q if op == "/" else out - q * right
        return out

    def unary(self) -> int:
        if self.i >= len(self.toks):
            raise ValueError("the expression ends early")
        tok = self.toks[self.i]
        self.i += 1
        if tok in "+-" and tok:
            value = self.unary()
            return -value if tok == "-" else value
        if tok == "(":
            value = self.sum()
            if self.i >= len(self.toks) or self.toks[self.i] != ")":
                raise ValueError("a '(' is not closed")
            self.i += 1
            return value
        if tok.isdigit():
            return int(tok)
        if re.fullmatch(r"[A-Za-z_]\w*", tok):
            values = self.lookup(tok)  # list of Text, or None
            if values is None or values[0].unset:
                self.unset += [tok] if values is None else list(values[0].unset)
                return 1
            raw = values[0].text.strip() or "0"
            if not re.fullmatch(r"-?\d+", raw):
                raise ValueError(f"{tok} is '{raw}', not a whole number")
            return int(raw)
        raise ValueError(f"cannot read '{tok}'")
