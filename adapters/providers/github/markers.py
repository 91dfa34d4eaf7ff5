"""What cpe writes into issue, pull request, commit and review text, and how it reads it back.

GitHub has no idempotency keys, so cpe carries its own in the text it writes: a hidden marker
``<!-- cpe:key=... -->`` in an issue or pull request body, a ``Cpe-Key:`` trailer in a commit
message, a ``<!-- cpe:review ... -->`` marker in a review. Before creating anything, the writer
looks for its key; a write whose response was lost is found instead of made twice.

An issue body written by cpe is the caller's body, then a generated section::

    <the body>

    <!-- cpe:generated -->
    Blocked by #12
    <!-- cpe:key=plan:3:a -->

``user_body`` returns the part above, so reading a body gives back exactly what was written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from domain.models import STATUSES, Status

GENERATED = "<!-- cpe:generated -->"
STATUS_PREFIX = "status:"
_SAFE_KEY = re.compile(r"^[A-Za-z0-9:._/@+=-]{1,200}$")
_KEY = re.compile(r"<!-- cpe:key=(\S+) -->")
_REF = r"(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d+"
_BLOCKED_BY = re.compile(
    rf"^[ \t>*-]*blocked by:?[ \t]+((?:{_REF}[ \t,]*(?:and[ \t]+)?)+)", re.I | re.M
)
_REFERENCE = re.compile(r"(?:([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+))?#(\d+)")
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+#(\d+)\b", re.IGNORECASE)
_TRAILER_KEY = "Cpe-Key: "
_TRAILER_MADE = "Cpe-Made-By: control-plane-engine"
_REVIEW = re.compile(r"<!-- cpe:review digest=([0-9a-f]+) -->")


def key_token(key: str) -> str:
    """The key as it is embedded: itself when it is plain, else a digest of it."""
    if _SAFE_KEY.match(key):
        return key
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def key_marker(key: str) -> str:
    return f"<!-- cpe:key={key_token(key)} -->"


def has_key(text: str | None, key: str) -> bool:
    return key_token(key) in _KEY.findall(text or "")


def issue_body(body: str, blocked_by: Sequence[str], key: str | None) -> str:
    lines = [f"Blocked by {reference(b)}" for b in blocked_by]
    if key is not None:
        lines.append(key_marker(key))
    if not lines:
        return body
    return f"{body}\n\n{GENERATED}\n" + "\n".join(lines) + "\n"


def reference(blocker: str) -> str:
    """How a blocker is written: ``#12`` here, ``owner/repo#12`` in another repository."""
    return blocker if "#" in blocker else f"#{blocker}"


def blocker_id(repository: str | None, number: int, here: str) -> str:
    """A blocker's id: its number in this repository (``here``, "owner/name"), else
    ``owner/name#number`` — an issue of another repository is no issue of this one."""
    if repository is None or repository.lower() == here.lower():
        return str(number)
    return f"{repository}#{number}"


def split_body(text: str | None) -> tuple[str, str]:
    """(the caller's body, the generated section with its marker, or "")."""
    text = text or ""
    if text.startswith(GENERATED):
        return "", text
    head, found, tail = text.partition(f"\n\n{GENERATED}")
    return (head, GENERATED + tail) if found else (text, "")


def user_body(text: str | None) -> str:
    return split_body(text)[0]


def with_user_body(text: str | None, body: str) -> str:
    generated = split_body(text)[1]
    return f"{body}\n\n{generated}" if generated else body


def is_foreign_blocker(blocker: str) -> bool:
    """``owner/name#12``: an issue of another repository."""
    return re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\d+", blocker) is not None


def blocked_by(text: str | None, here: str) -> list[str]:
    """The blockers "Blocked by #N" (or "owner/repo#N") lines name, in order, without repeats,
    as ids (``blocker_id``)."""
    found: dict[str, None] = {}
    for match in _BLOCKED_BY.finditer(text or ""):
        for repository, number in _REFERENCE.findall(match.group(1)):
            found[blocker_id(repository or None, int(number), here)] = None
    return list(found)


def closes(text: str | None) -> list[str]:
    """Issue numbers a pull request body closes ("Closes #N", "Fixes #N", …)."""
    return list(dict.fromkeys(_CLOSES.findall(text or "")))


def pull_body(body: str, work_item: str, key: str | None) -> str:
    parts = [body.rstrip(), f"Closes #{work_item}"]
    if key is not None:
        parts.append(key_marker(key))
    return "\n\n".join(p for p in parts if p) + "\n"


def pull_user_body(text: str | None) -> str:
    return _KEY.sub("", text or "").rstrip()


def commit_message(title: str, body: str, key: str | None) -> str:
    trailers = [_TRAILER_MADE]
    if key is not None:
        trailers.append(f"{_TRAILER_KEY}{key_token(key)}")
    return f"{title}\n\n{body}".strip() + "\n\n" + "\n".join(trailers) + "\n"


def commit_is_cpe(message: str) -> bool:
    return _TRAILER_MADE in message.splitlines()


def commit_has_key(message: str, key: str) -> bool:
    return f"{_TRAILER_KEY}{key_token(key)}" in message.splitlines()


def review_marker(digest: str) -> str:
    return f"<!-- cpe:review digest={digest} -->"


def review_digest(text: str | None) -> str | None:
    found = _REVIEW.search(text or "")
    return found.group(1) if found else None


def strip_markers(text: str | None) -> str:
    return _REVIEW.sub("", _KEY.sub("", text or "")).rstrip()


def status_label(status: Status) -> str:
    return STATUS_PREFIX + status


def is_status_label(name: str) -> bool:
    """``status:…`` as GitHub matches label names: case-insensitively, surrounding whitespace
    ignored (``Status:Blocked`` is ``status:blocked``)."""
    return name.strip().casefold().startswith(STATUS_PREFIX)


def status_of(labels: Iterable[str], closed: bool) -> Status:
    """``done`` when closed; else the status label's value; ``pending`` without one."""
    if closed:
        return "done"
    for name in labels:
        value = name.strip().casefold().removeprefix(STATUS_PREFIX).strip()
        if is_status_label(name) and value in STATUSES and value != "done":
            return value
    return "pending"


def linked_item(body: str | None, branch: str, prefix: str) -> str | None:
    """The work item a pull request is for: "Closes #N" in its body, else ``<prefix><N>-…``."""
    closed = closes(body)
    if closed:
        return closed[0]
    if branch.startswith(prefix):
        number = re.match(r"(\d+)(?:-|$)", branch.removeprefix(prefix))
        if number:
            return number.group(1)
    return None
