"""JQL's words for the fake Jira's reader (``jql.py``): its tokens, the fields Jira has that the
fake does not search by, and the error Jira answers a query it refuses with."""

from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|(?P<op>!=|>=|<=|!~|[=<>~(),])'
    r"|(?P<word>[A-Za-z0-9_\-.:/]+))"
)
# Fields Jira has that the fake does not search by: said plainly (not Jira's "does not exist").
UNSERVED = frozenset(
    {
        "assignee",
        "reporter",
        "creator",
        "priority",
        "resolution",
        "resolved",
        "text",
        "description",
        "comment",
        "sprint",
        "component",
        "fixversion",
        "parent",
        "watcher",
    }
)


class JqlError(Exception):
    """A query Jira refuses: ``message`` is its ``errorMessages`` entry."""


@dataclass(frozen=True)
class Token:
    kind: str  # str | op | word | eof
    text: str


def unserved(name: str) -> None:
    if name.casefold() in UNSERVED:
        raise JqlError(
            f"The fake Jira does not search by '{name}' (a Jira field it does not serve: see "
            "tests/fakes/jira/jql.py)."
        )


def tokenize(text: str) -> list[Token]:
    tokens, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        found = TOKEN.match(text, at)
        if found is None or found.end() == at:
            bad = text[at:].strip()[:1]
            raise JqlError(
                f"Error in the JQL Query: The character '{bad}' is a reserved JQL character. "
                f"You must enclose it in a string or use the escape '\\u{ord(bad):04x}' instead."
            )
        at = found.end()
        if found.group("str") is not None:
            raw = found.group("str")[1:-1]
            tokens.append(Token("str", re.sub(r"\\(.)", r"\1", raw)))
        elif found.group("op") is not None:
            tokens.append(Token("op", found.group("op")))
        else:
            tokens.append(Token("word", found.group("word")))
    tokens.append(Token("eof", "EOF"))
    return tokens
