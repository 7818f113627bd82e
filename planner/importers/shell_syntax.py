"""Shell syntax for `rlplan import`: a launch script's text → tokens, nothing run.

The subset training launch scripts are written in (bash): comments, line continuations,
single/double/ANSI quotes and backslashes, `$VAR`, `${VAR}`, `${VAR:-default}` (and the other
`${VAR<op>word}` forms), `${ARR[@]}`, `$((arithmetic))`, `$(command)` and backquotes (kept as
text: never run), arrays `NAME=( ... )` / `NAME+=( ... )`, operators (`;`, `&&`, `||`, `|`, `&`,
newlines, parentheses), redirections and here-documents. `shell.py` evaluates the tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.errors import InputError


@dataclass(frozen=True)
class Lit:
    text: str
    quoted: bool  # quoted text is never split into words


@dataclass(frozen=True)
class Var:
    """`$NAME`, `${NAME[index]<op>arg}`, `${#NAME}`."""

    name: str
    quoted: bool
    index: str | None = None  # "@", "*" or an integer, for arrays
    op: str | None = None  # ":-", "-", ":=", "=", ":+", "+", ":?", "?", "#", "%", ...
    arg: tuple | None = None  # the word after op (parts), expanded only if used
    length: bool = False  # ${#NAME}


@dataclass(frozen=True)
class Arith:
    expr: str
    quoted: bool


@dataclass(frozen=True)
class Cmd:
    """A command substitution: its output is not known without running it."""

    text: str
    quoted: bool


Part = Lit | Var | Arith | Cmd


@dataclass(frozen=True)
class Word:
    parts: tuple[Part, ...]
    raw: str  # as written, for messages

    def literal(self) -> str | None:
        """The text if the word has no expansion (quotes removed), else None."""
        if all(isinstance(p, Lit) for p in self.parts):
            return "".join(p.text for p in self.parts)
        return None


@dataclass(frozen=True)
class Op:
    op: str  # ; && || | & \n ( ) ;; |&


@dataclass(frozen=True)
class Redirect:
    op: str
    target: Word | None
    heredoc: str | None = None  # the body of `<<DELIM`
    heredoc_quoted: bool = False  # `<<'DELIM'`: no expansion in the body


@dataclass(frozen=True)
class ArrayAssign:
    name: str
    append: bool
    items: tuple[Word, ...]
    raw: str


@dataclass(frozen=True)
class ArithCommand:
    expr: str  # `(( ... ))`, also the header of `for (( ... ))`


Token = Word | Op | Redirect | ArrayAssign | ArithCommand

_META = set(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=$")
_SPECIAL = set("@*#?$!-0123456789")
_PARAM_OPS = (":-", ":=", ":+", ":?", "##", "%%", "-", "=", "+", "?", "#", "%", "//", "/", "^^",
              ",,", "^", ",")
_REDIRECTS = ("&>>", "&>", ">>", ">&", "<&", "<<<", "<<-", "<<", "<>", ">|", ">", "<")


class ShellSyntaxError(InputError):
    pass


def tokens(text: str, where: str = "the script") -> list[Token]:
    """The tokens of `text` (comments and line continuations dropped)."""
    return _Lexer(text, where).run()


def word_parts(text: str, quoted: bool = False) -> tuple[Part, ...]:
    """The parts of one word's text (as in a `${X:-text}` default or a here-document body:
    `quoted` keeps quotes as characters and splits nothing)."""
    lexer = _Lexer(text, "a word")
    return lexer.parts_until(set(), heredoc=quoted)[0]


class _Lexer:
    def __init__(self, text: str, where: str):
        self.s, self.i, self.where = text, 0, where
        self.out: list[Token] = []
        self.heredocs: list[tuple[int, str, bool, bool]] = []  # token index, delim, quoted, strip

    def fail(self, what: str) -> ShellSyntaxError:
        line = self.s.count("\n", 0, self.i) + 1
        return ShellSyntaxError(f"import: {self.where}, line {line}: {what}; fix the script's "
                                "quoting")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def run(self) -> list[Token]:
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c in " \t\r":
                self.i += 1
            elif c == "#":
                self._comment()
            elif c == "\n":
                self.i += 1
                self.out.append(Op("\n"))
                self._read_heredocs()
            elif c == "(" and self.peek(1) == "(":
                self.out.append(ArithCommand(self._balanced("(", ")")[2:-2]))
            elif self._redirect_ahead():
                self._redirect()
            elif c in ";&|()":
                self.out.append(Op(self._operator()))
            else:
                self._word()
        self._read_heredocs()
        return self.out

    def _comment(self) -> None:
        end = self.s.find("\n", self.i)
        self.i = len(self.s) if end < 0 else end

    def _operator(self) -> str:
        for op in (";;", "&&", "||", "|&", ";", "&", "|", "(", ")"):
            if self.s.startswith(op, self.i):
                self.i += len(op)
                return op
        raise self.fail("unexpected character")  # pragma: no cover - guarded by the caller

    def _redirect_ahead(self) -> bool:
        m = re.match(r"\d*", self.s[self.i:])
        rest = self.s[self.i + m.end():]
        return any(rest.startswith(r) for r in _REDIRECTS) and (m.end() == 0 or rest[:1] in "<>")

    def _redirect(self) -> None:
        m = re.match(r"\d*", self.s[self.i:])
        self.i += m.end()
        op = next(r for r in _REDIRECTS if self.s.startswith(r, self.i))
        self.i += len(op)
        while self.peek() in " \t":
            self.i += 1
        if op in ("<<", "<<-"):
            delim_word = self._read_word()
            raw = delim_word.raw
            quoted = any(q in raw for q in "'\"\\")
            delim = "".join(p.text for p in delim_word.parts if isinstance(p, Lit))
            self.out.append(Redirect(op, delim_word))
            self.heredocs.append((len(self.out) - 1, delim, quoted, op == "<<-"))
            return
        target = None
        if self.peek() and self.peek() not in _META:
            target = self._read_word()
        self.out.append(Redirect(op, target))

    def _read_heredocs(self) -> None:
        for index, delim, quoted, strip in self.heredocs:
            lines = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                line = self.s[self.i:] if end < 0 else self.s[self.i:end]
                self.i = len(self.s) if end < 0 else end + 1
                check = line.lstrip("\t") if strip else line
                if check == delim:
                    break
                lines.append(check)
            old = self.out[index]
            assert isinstance(old, Redirect)
            self.out[index] = Redirect(old.op, old.target, "\n".join(lines) + "\n", quoted)
        self.heredocs = []

    def _word(self) -> None:
        start = self.i
        word = self._read_word()
        m = _ASSIGN.match(word.raw)
        if m and self.peek() == "(":  # NAME=( items ) or NAME+=( items )
            self.i += 1
            items: list[Word] = []
            while True:
                c = self.peek()
                if not c:
                    raise self.fail(f"array {m.group(1)}=( is not closed by ')'")
                if c == ")":
                    self.i += 1
                    break
                if c == "\\" and self.peek(1) == "\n":
                    self.i += 2
                elif c in " \t\r\n":
                    self.i += 1
                elif c == "#":
                    self._comment()
                else:
                    items.append(self._read_word())
            self.out.append(ArrayAssign(m.group(1), m.group(2) == "+", tuple(items),
                                        self.s[start:self.i]))
            return
        self.out.append(word)

    def _read_word(self) -> Word:
        start = self.i
        parts, _ = self.parts_until(_META)
        if self.i == start:
            raise self.fail(f"unexpected '{self.peek()}'")
        return Word(parts, self.s[start:self.i])

    def parts_until(self, stop: set[str], heredoc: bool = False) -> tuple[tuple[Part, ...], str]:
        """Parts of a word up to an unquoted character in `stop` (or the end)."""
        parts: list[Part] = []
        buf: list[str] = []

        def flush(quoted: bool = False) -> None:
            if buf:
                parts.append(Lit("".join(buf), quoted or heredoc))
                buf.clear()

        while self.i < len(self.s):
            c = self.peek()
            if c in stop:
                break
            if c == "\\":
                nxt = self.peek(1)
                self.i += 2
                if nxt == "\n":
                    continue
                if heredoc and nxt not in "$`\\":
                    buf.append("\\")
                buf.append(nxt)
            elif c == "'" and not heredoc:
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise self.fail("a single quote (') is not closed")
                flush()
                parts.append(Lit(self.s[self.i + 1:end], True))
                self.i = end + 1
            elif c == '"' and not heredoc:
                flush()
                self.i += 1
                parts += self._double_quoted()
            elif c == "$" and self.peek(1) == "'" and not heredoc:
                flush()
                parts.append(Lit(self._ansi_c(), True))
            elif c in "$`":
                flush()
                parts.append(self._dollar(quoted=heredoc))
            else:
                buf.append(c)
                self.i += 1
        flush()
        return tuple(parts), ""

    def _double_quoted(self) -> list[Part]:
        parts: list[Part] = []
        buf: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise self.fail('a double quote (") is not closed')
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.peek(1) in '"\\$`\n':
                if self.peek(1) != "\n":
                    buf.append(self.peek(1))
                self.i += 2
            elif c in "$`":
                if buf:
                    parts.append(Lit("".join(buf), True))
                    buf = []
                parts.append(self._dollar(quoted=True))
            else:
                buf.append(c)
                self.i += 1
        if buf or not parts:
            parts.append(Lit("".join(buf), True))
        return parts

    def _ansi_c(self) -> str:
        self.i += 2
        out = []
        escapes = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}
        while True:
            c = self.peek()
            if not c:
                raise self.fail("a $'...' quote is not closed")
            self.i += 1
            if c == "'":
                return "".join(out)
            if c == "\\":
                out.append(escapes.get(self.peek(), "\\" + self.peek()))
                self.i += 1
            else:
                out.append(c)

    def _balanced(self, open_: str, close: str) -> str:
        """The text from the opening character at self.i to its matching close (inclusive),
        skipping quoted text."""
        start, depth = self.i, 0
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\":
                self.i += 2
                continue
            if c == "'" and open_ != "{":
                end = self.s.find("'", self.i + 1)
                self.i = (len(self.s) if end < 0 else end) + 1
                continue
            if c == '"':
                self.i += 1
                self._double_quoted()
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return self.s[start:self.i]
            self.i += 1
        raise self.fail(f"'{open_}' is not closed by '{close}'")

    def _dollar(self, quoted: bool) -> Part:
        if self.peek() == "`":
            end = self.s.find("`", self.i + 1)
            if end < 0:
                raise self.fail("a backquote (`) is not closed")
            text = self.s[self.i:end + 1]
            self.i = end + 1
            return Cmd(text, quoted)
        nxt = self.peek(1)
        if nxt == "(":
            self.i += 1
            if self.peek(1) == "(":
                inner = self._balanced("(", ")")
                if inner.startswith("((") and inner.endswith("))"):
                    return Arith(inner[2:-2], quoted)
                return Cmd("$" + inner, quoted)
            return Cmd("$" + self._balanced("(", ")"), quoted)
        if nxt == "{":
            self.i += 1
            body = self._balanced("{", "}")[1:-1]
            return self._parameter(body, quoted)
        m = _NAME.match(self.s, self.i + 1)
        if m:
            self.i = m.end()
            return Var(m.group(), quoted)
        if nxt and nxt in _SPECIAL:
            self.i += 2
            return Var(nxt, quoted)
        self.i += 1
        return Lit("$", quoted)

    def _parameter(self, body: str, quoted: bool) -> Part:
        if body.startswith("#") and _NAME.fullmatch(body[1:]):
            return Var(body[1:], quoted, length=True)
        m = _NAME.match(body) or re.match(r"[@*#?$!0-9-]", body)
        if not m:
            raise self.fail(f"cannot read ${{{body}}}")
        name, rest, index = m.group(), body[m.end():], None
        im = re.match(r"\[([^\]]*)\]", rest)
        if im:
            index, rest = im.group(1), rest[im.end():]
        if not rest:
            return Var(name, quoted, index)
        op = next((o for o in _PARAM_OPS if rest.startswith(o)), None)
        if op is None:
            raise self.fail(f"cannot read ${{{body}}}")
        arg = word_parts(rest[len(op):]) if op in (":-", "-", ":=", "=", ":+", "+") else \
            (Lit(rest[len(op):], True),)
        return Var(name, quoted, index, op, arg)
