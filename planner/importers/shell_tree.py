"""The syntax tree of a launch script (shell_syntax.py's tokens → commands, lists, `if`s), for
shell.py to evaluate. Loops, `case` and function bodies are parsed only to be skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planner.errors import InputError
from planner.importers.shell_syntax import ArithCommand, ArrayAssign, Lit, Op, Redirect, Token, Word

DECLARE = {"export", "declare", "typeset", "local", "readonly"}


@dataclass
class Simple:
    assigns: list[Word | ArrayAssign]
    words: list[Word]
    redirects: list[Redirect]
    declared: list[Word | ArrayAssign] = field(default_factory=list)  # export X=1, declare


@dataclass
class List:  # a sequence, or an and-or list: (operator before, node)
    items: list[tuple[str | None, object]]


@dataclass
class If:
    branches: list[tuple[object, object]]
    otherwise: object | None


@dataclass
class Skipped:
    what: str
    raw: str


class Parser:
    def __init__(self, toks: list[Token]):
        self.t, self.i = toks, 0

    def peek(self) -> Token | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def keyword(self, *names: str) -> bool:
        tok = self.peek()
        return isinstance(tok, Word) and tok.literal() in names and tok.raw in names

    def expect(self, name: str) -> None:
        if not self.keyword(name):
            got = self.peek()
            shown = got.raw if isinstance(got, Word) else getattr(got, "op", "the end")
            raise InputError(f"import: the script's shell syntax: expected '{name}', found "
                             f"'{shown!s:.40}'; fix the script")
        self.i += 1

    def sequence(self, stops: tuple[str, ...] = ()) -> List:
        items: list[tuple[str | None, object]] = []
        while True:
            tok = self.peek()
            if tok is None or self.keyword(*stops) or (isinstance(tok, Op) and tok.op in
                                                        (")", ";;")):
                return List(items)
            if isinstance(tok, Op) and tok.op in (";", "&", "\n"):
                self.i += 1
                continue
            items.append((";", self.and_or()))

    def and_or(self) -> List:
        items: list[tuple[str | None, object]] = [(None, self.pipeline())]
        while isinstance(self.peek(), Op) and self.peek().op in ("&&", "||"):
            op = self.peek().op
            self.i += 1
            while isinstance(self.peek(), Op) and self.peek().op == "\n":
                self.i += 1
            items.append((op, self.pipeline()))
        return List(items)

    def pipeline(self) -> object:
        if self.keyword("!"):
            self.i += 1
        items: list[tuple[str | None, object]] = [(None, self.command())]
        while isinstance(self.peek(), Op) and self.peek().op in ("|", "|&"):
            self.i += 1
            while isinstance(self.peek(), Op) and self.peek().op == "\n":
                self.i += 1
            items.append((";", self.command()))
        return items[0][1] if len(items) == 1 else List(items)

    def command(self) -> object:
        tok = self.peek()
        if isinstance(tok, Op) and tok.op == "(":
            self.i += 1
            body = self.sequence()
            self._close(")")
            return body
        if isinstance(tok, ArithCommand):
            self.i += 1
            return Skipped("((...))", tok.expr)
        if self.keyword("if"):
            return self._if()
        if self.keyword("for", "while", "until", "select"):
            return self._loop()
        if self.keyword("case"):
            return self._case()
        if self.keyword("{"):
            self.i += 1
            body = self.sequence(("}",))
            self.expect("}")
            return body
        if self.keyword("function") or self._function_ahead():
            return self._function()
        return self.simple()

    def _close(self, op: str) -> None:
        tok = self.peek()
        if not (isinstance(tok, Op) and tok.op == op):
            raise InputError(f"import: the script's shell syntax: '{op}' expected; fix the "
                             "script")
        self.i += 1

    def _function_ahead(self) -> bool:
        nxt = self.t[self.i + 1:self.i + 3]
        return isinstance(self.peek(), Word) and len(nxt) == 2 and \
            all(isinstance(x, Op) for x in nxt) and [x.op for x in nxt] == ["(", ")"]

    def _function(self) -> object:
        start = self.i
        if self.keyword("function"):
            self.i += 1
        self.i += 1  # the name
        if isinstance(self.peek(), Op) and self.peek().op == "(":
            self.i += 2
        while isinstance(self.peek(), Op) and self.peek().op == "\n":
            self.i += 1
        self.command()
        return Skipped("a function", _raw(self.t[start:self.i]))

    def _if(self) -> If:
        branches = []
        otherwise = None
        self.expect("if")
        while True:
            cond = self.sequence(("then",))
            self.expect("then")
            body = self.sequence(("elif", "else", "fi"))
            branches.append((cond, body))
            if self.keyword("elif"):
                self.i += 1
                continue
            if self.keyword("else"):
                self.i += 1
                otherwise = self.sequence(("fi",))
            self.expect("fi")
            return If(branches, otherwise)

    def _loop(self) -> Skipped:
        start = self.i
        kind = self.peek().raw
        self.i += 1
        if kind in ("while", "until"):
            self.sequence(("do",))
        else:
            while not self.keyword("do"):
                if self.peek() is None:
                    raise InputError(f"import: the script's shell syntax: '{kind}' without "
                                     "'do'; fix the script")
                self.i += 1
        self.expect("do")
        self.sequence(("done",))
        self.expect("done")
        return Skipped(f"a {kind} loop", _raw(self.t[start:self.i]))

    def _case(self) -> Skipped:
        start = self.i
        depth = 0
        while True:
            if self.peek() is None:
                raise InputError("import: the script's shell syntax: 'case' without 'esac'; "
                                 "fix the script")
            if self.keyword("case"):
                depth += 1
            elif self.keyword("esac"):
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return Skipped("a case", _raw(self.t[start:self.i]))
            self.i += 1

    def simple(self) -> Simple:
        cmd = Simple([], [], [])
        in_test = False
        while (tok := self.peek()) is not None:
            if isinstance(tok, Op):
                if in_test and tok.op in ("&&", "||", "(", ")"):
                    cmd.words.append(Word((Lit(tok.op, True),), tok.op))
                    self.i += 1
                    continue
                break
            self.i += 1
            if isinstance(tok, Redirect):
                cmd.redirects.append(tok)
            elif isinstance(tok, ArithCommand):
                cmd.words.append(Word((Lit(f"(({tok.expr}))", True),), f"(({tok.expr}))"))
            elif isinstance(tok, ArrayAssign) or re.match(r"[A-Za-z_]\w*\+?=", tok.raw):
                if not cmd.words:
                    cmd.assigns.append(tok)
                elif cmd.words[0].raw in DECLARE:
                    cmd.declared.append(tok)
                elif isinstance(tok, ArrayAssign):
                    cmd.words.append(Word((Lit(tok.raw, True),), tok.raw))
                else:
                    cmd.words.append(tok)
            else:
                if not cmd.words and tok.raw == "[[":
                    in_test = True
                elif in_test and tok.raw == "]]":
                    in_test = False
                cmd.words.append(tok)
        return cmd


def _raw(toks: list[Token]) -> str:
    return " ".join(t.raw for t in toks if isinstance(t, Word | ArrayAssign))


def describe(node: object) -> str:
    if isinstance(node, List):
        return " ".join(describe(n) for _, n in node.items)
    if isinstance(node, Simple):
        return " ".join(w.raw for w in node.words)[:80]
    return "..."
