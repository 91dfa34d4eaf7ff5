"""Secrets out of everything a run writes to disk: transcripts, metadata, final responses.

Run artifacts hold what an agent saw and said, and agents read files and run commands, so a
credential can turn up anywhere in them. Everything is passed through :func:`redact` before it
is written; the rules are those of ``agent_env`` (names by :func:`is_secret_name`, values by
:func:`looks_like_token`), applied to structured data:

1. **Secret-named keys.** A mapping key whose name is secret (``password``, ``api_key``,
   ``Authorization``, ``GITHUB_TOKEN``…) has its string values replaced by :data:`REDACTED`,
   including strings nested under it. Numbers, booleans and ``None`` are kept: a credential is
   a string, and the stream's token counts (``input_tokens``) are not secrets. ``session_id``
   is exempt from the name rule (every stream-json message carries the CLI's session UUID); its
   value is still judged by rule 2.
2. **Token-shaped values.** Every other string is cut into words (at whitespace, quotes,
   brackets, commas); a word that :func:`looks_like_token` is replaced, and so is a word that
   completes a credential with the word before it (``Bearer <token>``). A whole URL with a
   ``user:password@`` part is replaced.
3. **Assignments in text.** ``NAME=value`` and ``"name": "value"`` inside a string (a shell
   command, a JSON config printed by ``cat``) lose the value when ``NAME`` is secret-named and
   the value is not a number (``max_tokens=100`` stays).
4. **Command lines.** :func:`redact_argv` also hides the value after a secret-named flag
   (``--api-key X``, ``--token=X``), unless it is a number (``--max-thinking-tokens 8000``).

Redaction errs on the side of hiding: a long random-looking identifier is replaced too (see
``agent_env``'s known gaps for what slips through: short or single-case secrets under
innocent names). Mapping keys themselves are kept as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.runtime.process.agent_env import is_secret_name, looks_like_token

__all__ = ["REDACTED", "redact", "redact_argv", "redact_text"]

REDACTED = "[REDACTED]"

# Keys of the stream-json protocol that is_secret_name flags but that hold no credential.
_EXEMPT_KEYS = frozenset({"session_id", "native_session_id"})

# Words are cut at blanks and at the punctuation that surrounds values in code and JSON.
_SPLIT = re.compile(r"""([\s"'`,;()<>\[\]{}]+)""")
_ASSIGNMENT = re.compile(
    r"""(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s"';&|]+)"""
)
_JSON_PAIR = re.compile(r'"([^"\\]{1,100})"(\s*:\s*)"((?:[^"\\]|\\.)*)"')
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
# No token shape of agent_env fits in fewer characters (``s://u:p@``): shorter words are skipped.
_SHORTEST = 8


def redact(value: Any) -> Any:
    """A copy of JSON-like ``value`` with secrets replaced (rules 1 to 3)."""
    return _redact(value, secret=False)


def _redact(value: Any, *, secret: bool) -> Any:
    if isinstance(value, str):
        return REDACTED if secret and value else redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {
            str(key): _redact(item, secret=secret or _secret_key(str(key)))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact(item, secret=secret) for item in value]
    # Anything else (a path, a timestamp, an object) is written as its text: judge that text.
    return _redact(str(value), secret=secret)


def _secret_key(key: str) -> bool:
    return key not in _EXEMPT_KEYS and is_secret_name(key)


def redact_text(text: str) -> str:
    """``text`` with token-shaped words and secret assignments replaced (rules 2 and 3)."""
    if not text:
        return text
    text = _ASSIGNMENT.sub(_assignment, text)
    text = _JSON_PAIR.sub(_json_pair, text)
    parts = _SPLIT.split(text)
    previous = ""
    for index in range(0, len(parts), 2):  # even indexes are words, odd ones separators
        word = parts[index]
        if len(word) < _SHORTEST or word == REDACTED:
            previous = word
            continue
        if looks_like_token(word) or (
            previous and looks_like_token(f"{previous} {word}") and not looks_like_token(previous)
        ):
            parts[index] = REDACTED
        previous = word
    return "".join(parts)


def _assignment(match: re.Match[str]) -> str:
    name = match.group(1)
    if not _secret_key(name) or _NUMBER.fullmatch(match.group(2)):
        return match.group(0)
    return f"{name}={REDACTED}"


def _json_pair(match: re.Match[str]) -> str:
    key = match.group(1)
    if not _secret_key(key) or not match.group(3):
        return match.group(0)
    return f'"{key}"{match.group(2)}"{REDACTED}"'


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with secrets replaced, flag values included (rule 4)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not _NUMBER.fullmatch(arg):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-"):
            flag, eq, value = arg.partition("=")
            name = flag.lstrip("-").replace("-", "_")
            if name and _secret_key(name):
                if not eq:
                    hide_next = True
                elif value and not _NUMBER.fullmatch(value):
                    out.append(f"{flag}={REDACTED}")
                    continue
        out.append(redact_text(arg))
    return out
