"""What the Bash splitter produces: words made of literal and dynamic parts, redirections,
simple commands — and Bash's brace expansion, which turns one word into several before a
command runs (``{git,push}`` is two words), so the guard must see its result."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import pairwise

__all__ = [
    "MAX_BRACE_WORDS",
    "BashParseError",
    "Dyn",
    "Flow",
    "Lit",
    "Part",
    "Redirect",
    "SimpleCommand",
    "Word",
    "expand_braces",
    "merge_parts",
]

MAX_BRACE_WORDS = 512
_GLOB = re.compile(r"[*?]|\[.+\]")


class BashParseError(ValueError):
    """The line uses shell grammar the splitter does not follow; the guard denies it."""


@dataclass(frozen=True, slots=True)
class Lit:
    """Literal text; ``quoted`` text is exempt from globbing, brace and tilde expansion."""

    text: str
    quoted: bool = False


@dataclass(frozen=True, slots=True)
class Dyn:
    """An expansion only the running shell knows: ``$X``, ``${…}``, ``$(…)``, ``$((…))``…

    ``name`` is the parameter's name for ``$NAME`` and ``${NAME}``.
    """

    raw: str
    name: str | None = None


Part = Lit | Dyn


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word as a sequence of literal and dynamic parts."""

    parts: tuple[Part, ...]

    @classmethod
    def literal(cls, text: str) -> Word:
        return cls((Lit(text, quoted=True),))

    @property
    def value(self) -> str | None:
        """The word after quote removal, or ``None`` when part of it is only known at run time."""
        texts = [p.text for p in self.parts if isinstance(p, Lit)]
        return "".join(texts) if len(texts) == len(self.parts) else None

    @property
    def skeleton(self) -> str:
        """The literal text with each dynamic part as a NUL: what is certain about the word."""
        return "".join(p.text if isinstance(p, Lit) else "\0" for p in self.parts)

    @property
    def display(self) -> str:
        return "".join(p.text if isinstance(p, Lit) else p.raw for p in self.parts)

    def has_glob(self) -> bool:
        """Whether pathname expansion applies: an unquoted ``*``, ``?`` or ``[…]``."""
        return any(isinstance(p, Lit) and not p.quoted and _GLOB.search(p.text) for p in self.parts)

    def starts_unquoted(self, prefix: str) -> bool:
        first = self.parts[0] if self.parts else None
        return isinstance(first, Lit) and not first.quoted and first.text.startswith(prefix)


@dataclass(frozen=True, slots=True)
class Redirect:
    """``op`` is the operator without its fd; ``body`` is a heredoc's or here-string's text."""

    op: str
    target: Word | None
    body: str | None = None
    body_static: bool = True

    @property
    def writes(self) -> bool:
        if self.op == ">&":  # ">&2" duplicates a descriptor, ">&file" writes a file
            value = self.target.value if self.target else None
            return value is None or not (value.isdigit() or value == "-")
        return self.op in {">", ">>", ">|", "<>", "&>", "&>>"}


@dataclass(frozen=True, slots=True)
class Flow:
    """Where a command sits in its and-or list (``a && b || c``), so the guard knows which
    commands run only if a ``cd`` before them succeeded.

    ``chain`` numbers the list, ``step`` is the pipeline's index in it, ``since`` the index of
    the last pipeline that follows a ``||`` (it runs whether or not what came before
    succeeded); ``piped`` commands share a pipeline, so each runs in its own subshell.
    """

    chain: int = 0
    step: int = 0
    since: int = 0
    piped: bool = False


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command as Bash would run it: assignments, argv words (brace-expanded), redirects.

    ``text`` is its source, ``in_loop`` whether it may run more than once (a loop or function
    body).
    """

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str
    in_loop: bool = False
    flow: Flow = Flow()


def merge_parts(parts: list[Part]) -> tuple[Part, ...]:
    merged: list[Part] = []
    for part in parts:
        last = merged[-1] if merged else None
        if isinstance(part, Lit) and isinstance(last, Lit) and last.quoted == part.quoted:
            merged[-1] = replace(last, text=last.text + part.text)
        else:
            merged.append(part)
    return tuple(merged)


_OPEN, _CLOSE, _COMMA = Lit("{"), Lit("}"), Lit(",")
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?")


def expand_braces(word: Word) -> list[Word]:
    """Bash's brace expansion: ``a{b,c}`` is two words, ``{1..3}`` three, ``{x}`` stays one."""
    atoms: list[Part] = []  # one unquoted character each, or a whole quoted or dynamic part
    for part in word.parts:
        if isinstance(part, Lit) and not part.quoted:
            atoms.extend(Lit(c) for c in part.text)
        else:
            atoms.append(part)
    if _OPEN not in atoms:
        return [word]
    return [Word(merge_parts(expanded)) for expanded in _expand(atoms)]


def _expand(atoms: list[Part]) -> list[list[Part]]:
    for start, atom in enumerate(atoms):
        if atom != _OPEN:
            continue
        close, commas = _match(atoms, start)
        if close is None:
            continue
        if commas:
            bounds = [start, *commas, close]
            alternatives = [atoms[a + 1 : b] for a, b in pairwise(bounds)]
        else:
            inner = atoms[start + 1 : close]
            texts = [a.text for a in inner if isinstance(a, Lit) and not a.quoted]
            items = _sequence("".join(texts)) if len(texts) == len(inner) else None
            if items is None:
                continue
            alternatives = [[Lit(c) for c in item] for item in items]
        out: list[list[Part]] = []
        for alternative in alternatives:
            out.extend(_expand(atoms[:start] + alternative + atoms[close + 1 :]))
            if len(out) > MAX_BRACE_WORDS:
                raise BashParseError(f"brace expansion gives more than {MAX_BRACE_WORDS} words")
        return out
    return [atoms]


def _match(atoms: list[Part], start: int) -> tuple[int | None, list[int]]:
    depth, commas = 0, list[int]()
    for j in range(start, len(atoms)):
        if atoms[j] == _OPEN:
            depth += 1
        elif atoms[j] == _CLOSE:
            depth -= 1
            if depth == 0:
                return j, commas
        elif atoms[j] == _COMMA and depth == 1:
            commas.append(j)
    return None, []


def _sequence(text: str) -> list[str] | None:
    m = _SEQUENCE.fullmatch(text)
    if not m:
        return None
    first, last, step_text = m.groups()
    numeric = first.lstrip("-").isdigit()
    if numeric != last.lstrip("-").isdigit():
        return None
    a, b = (int(first), int(last)) if numeric else (ord(first), ord(last))
    step = abs(int(step_text or "1")) or 1
    if abs(b - a) // step >= MAX_BRACE_WORDS:
        raise BashParseError(f"brace expansion gives more than {MAX_BRACE_WORDS} words")
    values = range(a, b + 1, step) if b >= a else range(a, b - 1, -step)
    return [str(n) if numeric else chr(n) for n in values]
