"""Path globs as git and shells mean them, for paths inside a repository.

``*`` and ``?`` stay inside one path segment, ``**`` spans any number of directories (zero
included, so ``specs/**/*.md`` matches ``specs/a.md``), ``[...]`` is a character class.
``fnmatch`` lets ``*`` cross ``/`` and ``PurePath.match`` has no ``**`` before Python 3.13.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def glob_to_regex(glob: str) -> re.Pattern[str]:
    parts: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            parts.append("(?:[^/]*/)*")
            i += 3
        elif glob.startswith("**", i):
            parts.append(".*")
            i += 2
        elif char == "*":
            parts.append("[^/]*")
            i += 1
        elif char == "?":
            parts.append("[^/]")
            i += 1
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            negate = body.startswith(("!", "^"))
            body = body[1:] if negate else body
            parts.append(f"[{'^' if negate else ''}{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        else:
            parts.append(re.escape(char))
            i += 1
    return re.compile("".join(parts) + r"\Z")


class PathMatcher:
    """Matches repository paths (``/``-separated, relative to the root) against globs."""

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = tuple(globs)
        self._patterns = [glob_to_regex(g.lstrip("/")) for g in self.globs]

    def __call__(self, path: str) -> bool:
        return any(p.match(path) for p in self._patterns)
