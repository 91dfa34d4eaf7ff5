"""The Bash lexer: operators, redirections, words with their quotes and expansions, heredocs.

Lexing Bash needs the grammar: a ``$(…)`` inside a word holds a whole program, so the lexer
hands it to the parser (:class:`~adapters.bash_guard.split.Parser` extends this
class) and keeps what comes back. Only one token is ever looked ahead, so the parser can
also scan raw text (arithmetic) right after a token.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from adapters.bash_guard.words import (
    BashParseError,
    Dyn,
    Flow,
    Lit,
    Part,
    Word,
    merge_parts,
)

__all__ = ["ASSIGNMENT", "MAX_DEPTH", "Heredoc", "Lexer", "Pending", "Shared", "Token"]

MAX_DEPTH = 40
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_META = frozenset(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAM = frozenset("@*#?$!-0123456789")
_REDIRECT = re.compile(r"(\d*)(&>>|&>|<<<|<<-|<<|<>|<&|>&|>>|>\||<|>)")
_OPERATORS = ("((", ";;&", "&&", "||", ";;", ";&", "|&", "&", "|", ";", "(", ")")
_C_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_C_ESCAPES |= {"t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_OCTAL, _HEX = "01234567", "0123456789abcdefABCDEF"
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}
# two words in a row are no arithmetic: Bash would not run "((git push))", but a guard that
# skipped it would be trusting its own reading of where Bash stops parsing arithmetic
_NOT_ARITHMETIC = re.compile(r"[\w.]\s+[A-Za-z_]")


@dataclass
class Token:
    kind: str  # "word" | "op" | "redir" | "eof"
    value: str
    start: int
    end: int
    word: Word | None = None


@dataclass
class Heredoc:
    delimiter: str
    strip_tabs: bool
    expands: bool
    body: str | None = None
    static: bool = True


@dataclass
class Pending:
    """A simple command being parsed; its heredoc bodies arrive after the next newline."""

    assignments: list[Word]
    words: list[Word]
    redirects: list[tuple[str, Word | None, Heredoc | None]]
    text: str
    in_loop: bool
    flow: Flow


@dataclass
class Shared:
    """State every parser of one command line shares, nested ones included."""

    out: list[Pending] = field(default_factory=list)
    loop_depth: int = 0
    chains: int = 0
    flow: Flow = field(default_factory=Flow)


class Lexer(ABC):
    def __init__(self, s: str, shared: Shared, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise BashParseError("nested too deeply")
        self.s = s
        self.i = 0
        self.shared = shared
        self.depth = depth
        self.peeked: Token | None = None
        self.heredocs: list[Heredoc] = []

    @abstractmethod
    def command_substitution(self, start: int) -> Dyn:
        """Parse the program of a ``$(``, ``<(`` or ``>(`` up to its ``)``."""

    @abstractmethod
    def spawn(self, text: str) -> Lexer:
        """A parser for a separate text (a backtick body, a heredoc) sharing this line's state."""

    @abstractmethod
    def parse_all(self) -> None: ...

    def peek(self) -> Token:
        if self.peeked is None:
            self.peeked = self.lex()
        return self.peeked

    def take(self) -> Token:
        tok = self.peek()
        self.peeked = None
        return tok

    def lex(self) -> Token:
        s = self.s
        while self.i < len(s):
            if s[self.i] in " \t":
                self.i += 1
            elif s.startswith("\\\n", self.i):
                self.i += 2
            elif s[self.i] == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            else:
                break
        start = self.i
        if start >= len(s):
            return Token("eof", "", start, start)
        if s[start] == "\n":
            self.i += 1
            self.read_heredocs()
            return Token("op", "\n", start, start + 1)
        m = _REDIRECT.match(s, start)
        substitution = m and m.group(2) in {"<", ">"} and s.startswith("(", m.end())
        if m and not (substitution and not m.group(1)):
            self.i = m.end()
            return Token("redir", m.group(2), start, self.i)
        for op in _OPERATORS:
            if s.startswith(op, start):
                self.i += len(op)
                return Token("op", op, start, self.i)
        word = self.read_word()
        return Token("word", word.value or "\0", start, self.i, word)

    def read_word(self) -> Word:
        s = self.s
        parts: list[Part] = []
        while self.i < len(s):
            c = s[self.i]
            if c in _META:
                if c in "<>" and s.startswith("(", self.i + 1) and not parts:
                    self.i += 2
                    parts.append(self.command_substitution(self.i - 2))
                    continue
                plain = [p.text for p in parts if isinstance(p, Lit) and not p.quoted]
                if c == "(" and len(plain) == len(parts) and ASSIGNMENT.fullmatch("".join(plain)):
                    parts.append(self.array_assignment())
                    continue
                break
            if c == "\\":
                if s.startswith("\n", self.i + 1):
                    self.i += 2
                    continue
                parts.append(Lit(s[self.i + 1 : self.i + 2] or "\\", quoted=True))
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise BashParseError("unterminated single quote")
                parts.append(Lit(s[self.i + 1 : end], quoted=True))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                parts.extend(self.read_double_quoted())
            elif c in "$`":
                parts.append(self.read_dollar_or_backtick(quoted=False))
            else:
                parts.append(Lit(c))
                self.i += 1
        if not parts:
            raise BashParseError(f"unexpected {s[self.i : self.i + 1]!r}")
        return Word(merge_parts(parts))

    def read_double_quoted(self, *, terminator: str | None = '"') -> list[Part]:
        """Up to ``terminator``; ``None`` reads a heredoc body, where ``"`` is plain text."""
        s = self.s
        parts: list[Part] = [Lit("", quoted=True)]
        while True:
            if self.i >= len(s):
                if terminator is None:
                    return parts
                raise BashParseError("unterminated double quote")
            c = s[self.i]
            if c == terminator:
                self.i += 1
                return parts
            if c == "\\" and s[self.i + 1 : self.i + 2] in {"$", "`", '"', "\\", "\n"}:
                escaped = s[self.i + 1]
                if escaped == '"' and terminator is None:
                    parts.append(Lit('\\"', quoted=True))
                elif escaped != "\n":
                    parts.append(Lit(escaped, quoted=True))
                self.i += 2
            elif c in "$`":
                parts.append(self.read_dollar_or_backtick(quoted=True))
            else:
                parts.append(Lit(c, quoted=True))
                self.i += 1

    def read_dollar_or_backtick(self, *, quoted: bool) -> Part:
        s, start = self.s, self.i
        if s[start] == "`":
            return self.backtick(quoted=quoted)
        nxt = s[start + 1 : start + 2]
        if nxt == "'" and not quoted:
            return self.ansi_c_quote()
        if nxt == '"' and not quoted:  # $"…" is a translated double-quoted string
            self.i += 2
            parts = self.read_double_quoted()
            if all(isinstance(p, Lit) for p in parts):
                return Lit("".join(p.text for p in parts if isinstance(p, Lit)), quoted=True)
            return Dyn(s[start : self.i])
        if s.startswith("$((", start):
            self.i += 3
            if self.scan_arith():
                return Dyn(s[start : self.i])
            self.i = start + 2  # "$((cmd) )" is a command substitution of a subshell
            return self.command_substitution(start)
        if nxt == "(":
            self.i += 2
            return self.command_substitution(start)
        if nxt == "{":
            return self.parameter(start)
        m = _NAME.match(s, start + 1)
        if m:
            self.i = m.end()
            return Dyn(s[start : self.i], m.group())
        if nxt and nxt in _SPECIAL_PARAM:
            self.i += 2
            return Dyn(s[start : self.i], nxt)
        self.i += 1
        return Lit("$", quoted=quoted)

    def backtick(self, *, quoted: bool) -> Dyn:
        s, start = self.s, self.i
        self.i += 1
        body: list[str] = []
        while True:
            if self.i >= len(s):
                raise BashParseError("unterminated backtick")
            c = s[self.i]
            if c == "`":
                self.i += 1
                break
            if c == "\\" and self.i + 1 < len(s):
                escaped = s[self.i + 1]
                keep = escaped in "$`\\" or (quoted and escaped == '"')
                body.append(escaped if keep else c + escaped)
                self.i += 2
                continue
            body.append(c)
            self.i += 1
        self.spawn("".join(body)).parse_all()
        return Dyn(s[start : self.i])

    def parameter(self, start: int) -> Dyn:
        s = self.s
        self.i = start + 2
        depth = 1
        while depth:
            if self.i >= len(s):
                raise BashParseError("unterminated ${")
            c = s[self.i]
            if c == "\\":
                self.i += 1
            elif c == "'":
                end = s.find("'", self.i + 1)
                self.i = len(s) if end < 0 else end
            elif s.startswith("${", self.i):
                depth += 1
                self.i += 1
            elif c == "}":
                depth -= 1
            self.i += 1
        raw = s[start : self.i]
        inner = raw[2:-1]
        if any(marker in inner for marker in ("$(", "`", "<(", ">(")):
            raise BashParseError("command substitution inside ${…}")
        name = inner if _NAME.fullmatch(inner) or inner in _SPECIAL_PARAM else None
        return Dyn(raw, name)

    def scan_arith(self) -> bool:
        """Skip an arithmetic expression to its ``))``; its values are dynamic.

        Like Bash, when the parenthesis matching the second ``(`` is not followed by another
        ``)`` this is no arithmetic but nested subshells (``((cd a); ls)``): return False
        without moving, for the caller to parse it as commands.
        """
        s, start = self.s, self.i
        depth, k = 0, start
        while k < len(s):
            c = s[k]
            if c in "'\"":
                end = s.find(c, k + 1)
                k = len(s) if end < 0 else end
            elif c == "\\":
                k += 1
            elif c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            k += 1
        if k >= len(s):
            raise BashParseError("unterminated arithmetic")
        if not s.startswith("))", k):
            return False
        content = s[start:k]
        if any(c in content for c in "`'\"") or re.search(r"\$\((?!\()", content):
            raise BashParseError("quotes or a command substitution inside arithmetic")
        if _NOT_ARITHMETIC.search(content):
            raise BashParseError(f"not arithmetic: {content!r}")
        self.i = k + 2
        return True

    def ansi_c_quote(self) -> Lit:
        s = self.s
        self.i += 2
        out: list[str] = []
        while self.i < len(s) and s[self.i] != "'":
            if s[self.i] != "\\" or self.i + 1 >= len(s):
                out.append(s[self.i])
                self.i += 1
                continue
            c = s[self.i + 1]
            self.i += 2
            if c in _C_ESCAPES:
                out.append(_C_ESCAPES[c])
            elif c in _OCTAL or c in _HEX_WIDTH:
                start = self.i - 1 if c in _OCTAL else self.i
                width, digits = (3, _OCTAL) if c in _OCTAL else (_HEX_WIDTH[c], _HEX)
                end = start
                while end < len(s) and end - start < width and s[end] in digits:
                    end += 1
                if end == start:
                    out.append("\\" + c)
                    continue
                out.append(chr(min(int(s[start:end], 8 if c in _OCTAL else 16), 0x10FFFF)))
                self.i = end
            elif c == "c" and self.i < len(s):
                out.append(chr(ord(s[self.i]) & 0x1F))
                self.i += 1
            else:
                out.append("\\" + c)
        if self.i >= len(s):
            raise BashParseError("unterminated $'…' quote")
        self.i += 1
        return Lit("".join(out), quoted=True)

    def array_assignment(self) -> Dyn:
        start = self.i
        self.i += 1
        while (tok := self.take()).kind != "op" or tok.value != ")":
            if tok.kind != "word" and tok.value != "\n":
                raise BashParseError(f"unexpected {tok.value or 'end'!r} in an array assignment")
        return Dyn(self.s[start : self.i])

    def read_heredocs(self) -> None:
        s = self.s
        for heredoc in self.heredocs:
            lines: list[str] = []
            while True:
                if self.i >= len(s):
                    raise BashParseError(f"heredoc {heredoc.delimiter!r} is never terminated")
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                line = s[self.i : end]
                self.i = min(end + 1, len(s))
                if heredoc.strip_tabs:
                    line = line.lstrip("\t")
                if line == heredoc.delimiter:
                    break
                lines.append(line + "\n")
            heredoc.body = "".join(lines)
            if heredoc.expands:  # an unquoted heredoc runs its $(…) and backticks
                parts = self.spawn(heredoc.body).read_double_quoted(terminator=None)
                heredoc.static = all(isinstance(p, Lit) for p in parts)
        self.heredocs.clear()
