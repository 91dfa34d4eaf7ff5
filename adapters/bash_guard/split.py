"""Split a Bash command line into the simple commands it would run.

The guard must see every command a line can start, so this is a small parser of the Bash
grammar, not a tokenizer (``shlex`` does not follow ``$(…)``, backticks, heredocs or
``case``). It follows:

- lists and pipelines: ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, newlines, ``!``;
- compound commands: ``( … )``, ``{ …; }``, ``if``, ``while``, ``until``, ``for … in``,
  ``for ((…))``, ``case``, ``[[ … ]]``, ``(( … ))``, function definitions; redirections after
  one become a command without words, so their targets are still checked;
- words: single, double and ``$'…'`` quotes, backslashes, line continuations, comments,
  ``$NAME``/``${…}``/``$((…))`` (dynamic values), ``$(…)``, backticks, ``<(…)``/``>(…)``
  (their commands are returned too, before the command that uses them), array assignments,
  brace expansion;
- redirections with their targets, heredocs (the body is kept; in an unquoted heredoc its
  command substitutions are parsed) and here-strings.

Everything else — ``select``, ``coproc``, a command substitution inside ``${…}`` or
``$((…))``, an unterminated quote or heredoc, an unexpected token — raises
:class:`BashParseError`. Commands come back in source order, which is the order Bash runs
them in, except that loop and function bodies may run many times (``in_loop``).
"""

from __future__ import annotations

from dataclasses import replace

from adapters.bash_guard.lexer import (
    ASSIGNMENT,
    MAX_DEPTH,
    Heredoc,
    Lexer,
    Pending,
    Shared,
    Token,
)
from adapters.bash_guard.words import (
    BashParseError,
    Dyn,
    Flow,
    Lit,
    Redirect,
    SimpleCommand,
    Word,
    expand_braces,
)

__all__ = ["MAX_LENGTH", "split_command"]

MAX_LENGTH = 64 * 1024
_RESERVED = frozenset(
    {"!", "{", "}", "[[", "]]", "if", "then", "elif", "else", "fi", "while", "until", "for"}
    | {"in", "do", "done", "case", "esac", "function", "select", "coproc"}
)
_SEPARATORS = frozenset({";", "&", "\n"})
_CASE_ENDS = frozenset({";;", ";&", ";;&"})
_NONE: frozenset[str] = frozenset()


def split_command(text: str) -> tuple[SimpleCommand, ...]:
    """Every simple command ``text`` can run, in source order; raises :class:`BashParseError`."""
    if len(text) > MAX_LENGTH:
        raise BashParseError(f"longer than {MAX_LENGTH} characters")
    if "\0" in text:
        raise BashParseError("contains a NUL character")
    shared = Shared()
    Parser(text, shared, depth=0).parse_all()
    return tuple(_finish(pending) for pending in shared.out)


def _finish(pending: Pending) -> SimpleCommand:
    redirects = []
    for op, target, heredoc in pending.redirects:
        if heredoc is not None:
            if heredoc.body is None:
                raise BashParseError(f"heredoc {heredoc.delimiter!r} is never terminated")
            redirects.append(Redirect(op, None, heredoc.body, heredoc.static))
            continue
        assert target is not None
        expanded = expand_braces(target)
        if len(expanded) != 1:
            raise BashParseError(f"ambiguous redirect {target.display!r}")
        body = (target.value or "") + "\n" if op == "<<<" else None
        redirects.append(Redirect(op, expanded[0], body, target.value is not None))
    words = tuple(w for word in pending.words for w in expand_braces(word))
    assignments = tuple(pending.assignments)
    return SimpleCommand(
        assignments, words, tuple(redirects), pending.text, pending.in_loop, pending.flow
    )


class Parser(Lexer):
    def spawn(self, text: str) -> Parser:
        return Parser(text, self.shared, self.depth + 1)

    def parse_all(self) -> None:
        self.parse_list(_NONE, _NONE)
        tok = self.peek()
        if tok.kind != "eof":
            raise BashParseError(f"unexpected {tok.value!r}")
        if self.heredocs:
            raise BashParseError(f"heredoc {self.heredocs[0].delimiter!r} is never terminated")

    def parse_list(self, stop_words: frozenset[str], stop_ops: frozenset[str]) -> None:
        def stops(tok: Token) -> bool:
            if tok.kind == "eof" or (tok.kind == "op" and tok.value in stop_ops):
                return True
            return self.reserved(tok) in stop_words

        while True:
            self.skip_newlines()
            if stops(self.peek()):
                return
            self.parse_and_or()
            tok = self.peek()
            if tok.kind == "op" and tok.value in _SEPARATORS:
                self.take()
            elif not stops(tok):
                raise BashParseError(f"unexpected {tok.value!r}")

    def parse_and_or(self) -> None:
        shared = self.shared
        outer, chain = shared.flow, shared.chains
        shared.chains += 1
        shared.flow = Flow(chain)
        self.parse_pipeline()
        while self.peek().kind == "op" and self.peek().value in {"&&", "||"}:
            step = shared.flow.step + 1
            since = step if self.take().value == "||" else shared.flow.since
            shared.flow = Flow(chain, step, since)
            self.skip_newlines()
            self.parse_pipeline()
        shared.flow = outer

    def parse_pipeline(self) -> None:
        if self.reserved(self.peek()) == "!":
            self.take()
        first = len(self.shared.out)
        self.parse_command()
        piped = False
        while self.peek().kind == "op" and self.peek().value in {"|", "|&"}:
            self.take()
            self.skip_newlines()
            self.parse_command()
            piped = True
        flow = self.shared.flow
        for pending in self.shared.out[first:] if piped else ():
            if pending.flow == flow:
                pending.flow = replace(flow, piped=True)

    def parse_command(self) -> None:
        tok = self.peek()
        if tok.kind == "op" and tok.value == "((":
            self.take()
            if not self.scan_arith():  # "((cd a); ls)" is two subshells, as Bash reads it
                self.i = tok.start + 1
                self.nested(_NONE, frozenset({")"}))
                self.expect_op(")")
        elif tok.kind == "op" and tok.value == "(":
            self.take()
            self.nested(_NONE, frozenset({")"}))
            self.expect_op(")")
        elif self.reserved(tok) == "[[":
            self.take()
            while self.reserved(tok := self.take()) != "]]":
                if tok.kind == "eof":
                    raise BashParseError("'[[' without ']]'")
            return
        elif (word := self.reserved(tok)) is not None:
            self.take()
            self.parse_compound(word)
        else:
            self.parse_simple()
            return
        if self.peek().kind == "redir":  # "{ …; } > file": its targets are checked like any
            self.parse_simple()

    def parse_compound(self, word: str) -> None:
        if word == "{":
            self.nested(frozenset({"}"}), _NONE)
            self.expect_word("}")
        elif word == "if":
            self.parse_if()
        elif word in {"while", "until"}:
            self.shared.loop_depth += 1
            self.nested(frozenset({"do"}), _NONE)
            self.expect_word("do")
            self.parse_body_done()
        elif word == "for":
            self.shared.loop_depth += 1
            self.parse_for()
        elif word == "case":
            self.parse_case()
        elif word == "function":
            self.take_word()
            if self.peek().kind == "op" and self.peek().value == "(":
                self.take()
                self.expect_op(")")
            self.parse_function_body()
        else:
            raise BashParseError(f"{word!r} is not supported here")

    def parse_if(self) -> None:
        branch: str | None = "if"
        while branch != "fi":
            if branch in {"if", "elif"}:
                self.nested(frozenset({"then"}), _NONE)
                self.expect_word("then")
            elif branch != "else":
                raise BashParseError("'if' without 'fi'")
            self.nested(frozenset({"elif", "else", "fi"}), _NONE)
            branch = self.reserved(self.take())

    def parse_for(self) -> None:
        if self.peek().kind == "op" and self.peek().value == "((":
            self.take()
            if not self.scan_arith():
                raise BashParseError("for (( … )) without its closing ))")
        else:
            self.take_word()
            self.skip_newlines()
            if self.reserved(self.peek()) == "in":
                self.take()
                while self.peek().kind == "word":
                    self.take()
        if self.peek().kind == "op" and self.peek().value == ";":
            self.take()
        self.skip_newlines()
        self.expect_word("do")
        self.parse_body_done()

    def parse_body_done(self) -> None:
        self.nested(frozenset({"done"}), _NONE)
        self.expect_word("done")
        self.shared.loop_depth -= 1

    def parse_case(self) -> None:
        self.take_word()
        self.skip_newlines()
        self.expect_word("in")
        while True:
            self.skip_newlines()
            if self.reserved(self.peek()) == "esac":
                self.take()
                return
            if self.peek().kind == "op" and self.peek().value == "(":
                self.take()
            self.take_word()
            while self.peek().kind == "op" and self.peek().value == "|":
                self.take()
                self.take_word()
            self.expect_op(")")
            self.nested(frozenset({"esac"}), _CASE_ENDS)
            if self.peek().kind == "op" and self.peek().value in _CASE_ENDS:
                self.take()

    def parse_function_body(self) -> None:
        self.skip_newlines()
        self.shared.loop_depth += 1  # a body can run any number of times, like a loop's
        self.parse_command()
        self.shared.loop_depth -= 1

    def parse_simple(self) -> None:
        start = end = self.peek().start
        pending = Pending([], [], [], "", self.shared.loop_depth > 0, self.shared.flow)
        while (tok := self.peek()).kind in {"word", "redir"}:
            self.take()
            end = tok.end
            if tok.kind == "redir":
                end = self.parse_redirect(tok.value, pending)
                continue
            word = _word(tok)
            first = word.parts[0]
            plain = first.text if isinstance(first, Lit) and not first.quoted else ""
            if not pending.words and ASSIGNMENT.match(plain):
                pending.assignments.append(word)
                continue
            pending.words.append(word)
            is_name = len(pending.words) == 1 and not pending.assignments
            if is_name and self.peek().kind == "op" and self.peek().value == "(":
                self.take()  # "name() compound-command" defines a function
                self.expect_op(")")
                self.parse_function_body()
                return
        if start == end:
            tok = self.peek()
            raise BashParseError(f"unexpected {tok.value!r}" if tok.value else "missing command")
        pending.text = self.s[start:end]
        self.shared.out.append(pending)

    def parse_redirect(self, op: str, pending: Pending) -> int:
        target = self.take()
        if target.kind != "word":
            raise BashParseError(f"redirection {op!r} without a target")
        word = _word(target)
        if op in {"<<", "<<-"}:
            if word.value is None:
                raise BashParseError("heredoc delimiter with an expansion")
            quoted = any(isinstance(p, Lit) and p.quoted for p in word.parts)
            heredoc = Heredoc(word.value, op == "<<-", expands=not quoted)
            self.heredocs.append(heredoc)
            pending.redirects.append((op, None, heredoc))
        else:
            pending.redirects.append((op, word, None))
        return target.end

    def command_substitution(self, start: int) -> Dyn:
        self.nested(_NONE, frozenset({")"}))
        self.expect_op(")")
        return Dyn(self.s[start : self.i])

    def nested(self, stop_words: frozenset[str], stop_ops: frozenset[str]) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise BashParseError("nested too deeply")
        self.parse_list(stop_words, stop_ops)
        self.depth -= 1

    def reserved(self, tok: Token) -> str | None:
        plain = tok.kind == "word" and tok.word is not None and tok.word.parts == (Lit(tok.value),)
        return tok.value if plain and tok.value in _RESERVED else None

    def skip_newlines(self) -> None:
        while self.peek().kind == "op" and self.peek().value == "\n":
            self.take()

    def expect_op(self, op: str) -> None:
        tok = self.take()
        if tok.kind != "op" or tok.value != op:
            raise BashParseError(f"expected {op!r}, found {tok.value or 'the end'!r}")

    def expect_word(self, word: str) -> None:
        tok = self.take()
        if self.reserved(tok) != word:
            raise BashParseError(f"expected {word!r}, found {tok.value or 'the end'!r}")

    def take_word(self) -> Word:
        tok = self.take()
        if tok.kind != "word":
            raise BashParseError(f"expected a word, found {tok.value or 'the end'!r}")
        return _word(tok)


def _word(tok: Token) -> Word:
    assert tok.word is not None
    return tok.word
