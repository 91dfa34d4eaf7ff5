"""What a per-command rule may ask of the guard, and GNU-style option scanning for rules.

A rule gets the command's name (the basename of its first word) and its arguments, and either
returns (nothing to object to), recurses through :class:`Checks` into a command it runs, or
calls ``checks.deny``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn, Protocol

from adapters.bash_guard.words import Dyn, Word

__all__ = [
    "STDIN_WORD",
    "Checks",
    "Options",
    "Rule",
    "first_operand",
    "known_only",
    "scan",
    "words",
]

STDIN_WORD = Word((Dyn("<stdin>"),))
"""An argument only known at run time: what ``xargs`` or ``find -exec`` passes."""


class Checks(Protocol):
    @property
    def allow_network_get(self) -> bool: ...

    def deny(self, reason: str) -> NoReturn: ...

    def write(self, word: Word, what: str) -> None:
        """Deny unless ``word`` is a literal path inside the worktree (or a harmless device)."""

    def location(self, word: Word, what: str) -> None:
        """Deny unless ``word`` is a literal directory inside the worktree."""

    def argv(self, words: Sequence[Word]) -> None:
        """Check a command this one runs, with every rule."""

    def program(self, text: str, what: str) -> None:
        """Parse ``text`` as a shell program and check every command in it."""

    def assignment(self, word: Word) -> None:
        """Check a ``NAME=value`` environment assignment."""

    def stdin_script(self) -> str | None:
        """The current command's heredoc or here-string, when it is literal text."""


Rule = Callable[[Checks, str, list[Word]], None]


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Options:
    flags: list[tuple[str, Word | None]]
    args: list[Word]

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.flags)

    def values(self, *names: str) -> list[Word]:
        return [value for name, value in self.flags if name in names and value is not None]


def scan(
    args: Sequence[Word], takes_value: frozenset[str] = frozenset(), *, stop: bool = False
) -> Options:
    """Split ``args`` into options and operands the GNU way: bundled short options, an
    attached or separate value for the options in ``takes_value``, ``--long=value``, ``--``.

    ``stop`` ends the options at the first operand (a wrapper's command). A word only known at
    run time is an operand.
    """
    flags: list[tuple[str, Word | None]] = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        word, value = args[i], args[i].value
        i += 1
        if value is None or value == "-" or not value.startswith("-"):
            operands.append(word)
            if stop:
                operands.extend(args[i:])
                break
            continue
        if value == "--":
            operands.extend(args[i:])
            break
        if value.startswith("--"):
            name, eq, attached = value.partition("=")
            if eq:
                flags.append((name, Word.literal(attached)))
            elif name in takes_value and i < len(args):
                flags.append((name, args[i]))
                i += 1
            else:
                flags.append((name, None))
            continue
        for k in range(1, len(value)):
            name = "-" + value[k]
            if name not in takes_value:
                flags.append((name, None))
                continue
            if value[k + 1 :]:
                flags.append((name, Word.literal(value[k + 1 :])))
            elif i < len(args):
                flags.append((name, args[i]))
                i += 1
            else:
                flags.append((name, None))
            break
    return Options(flags, operands)


def known_only(checks: Checks, name: str, options: Options, known: frozenset[str]) -> None:
    """Wrappers deny options they do not know: such an option may take a value, and then
    the wrong word would be taken for the command they run."""
    for flag, _ in options.flags:
        if flag not in known:
            checks.deny(f"{name}: unknown option {flag!r}, so the command it runs is unclear")


def first_operand(args: Sequence[Word]) -> int | None:
    """Index of the first argument that is not an option (a subcommand)."""
    for k, word in enumerate(args):
        if word.value is None or not word.value.startswith("-"):
            return k
    return None
