"""What cpe writes into issue, merge/pull request, commit and review text, and how it reads it
back: the same words on every tracker and forge that takes Markdown (GitHub, GitLab).

Trackers and forges have no idempotency keys, so cpe carries its own in the text it writes: a
hidden marker ``<!-- cpe:key=... -->`` in an issue or pull request body, a ``Cpe-Key:`` trailer
in a commit message, a ``<!-- cpe:review ... -->`` marker in a review. Before creating anything,
the writer looks for its key; a write whose response was lost is found instead of made twice.

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
from collections.abc import Sequence

GENERATED = "<!-- cpe:generated -->"
_SAFE_KEY = re.compile(r"^[A-Za-z0-9:._/@+=-]{1,200}$")
_KEY = re.compile(r"<!-- cpe:key=(\S+) -->")
# A project path: owner/name on GitHub; group/subgroup/…/name on GitLab.
_PATH = r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+"
_REF = rf"(?:{_PATH})?#\d+"
_BLOCKED_BY = re.compile(
    rf"^[ \t>*-]*blocked by:?[ \t]+((?:{_REF}[ \t,]*(?:and[ \t]+)?)+)", re.I | re.M
)
_REFERENCE = re.compile(rf"(?:({_PATH}))?#(\d+)")
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+#(\d+)\b", re.IGNORECASE)
_TRAILER_KEY = "Cpe-Key: "
_TRAILER_MADE = "Cpe-Made-By: control-plane-engine"
_REVIEW = re.compile(r"<!-- cpe:review digest=([0-9a-f]+) -->")
_WORK_ITEM = re.compile(r"<!-- cpe:work-item=(\S+) -->")
_WORK_ITEM_LINE = re.compile(r"^Work item: \S+\n?", re.M)
# A work item id in a branch name: a number (GitHub, GitLab, local) or an upper-case key
# (ENG-12, PROJ-7: Linear's and Jira's).
_BRANCH_ITEM = re.compile(r"(\d+|[A-Z][A-Z0-9]*-\d+)(?:-|$)")


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
    """``owner/name#12`` (``group/sub/name#12``): an issue of another repository."""
    return re.fullmatch(rf"{_PATH}#\d+", blocker) is not None


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


def pull_body(body: str, work_item: str, key: str | None, *, closing: bool = True) -> str:
    """A revision's description: the caller's body, then how it names its work item, then the
    key. ``closing``: the tracker is the forge's own, and "Closes #N" names the item (and closes
    it on merge); otherwise (the tracker is another system) a reference would name an unrelated
    issue of the forge's project, so the item is named by ``work_item_reference``."""
    link = f"Closes #{work_item}" if closing else work_item_reference(work_item)
    if not closing:
        # The engine's own "Work item: #N" line would link the forge's #N, an unrelated issue
        # or pull request here: the reference says it instead.
        body = re.sub(rf"^Work item: #{re.escape(work_item)}[ \t]*(?:\n|$)", "", body, flags=re.M)
    parts = [body.rstrip(), link]
    if key is not None:
        parts.append(key_marker(key))
    return "\n\n".join(p for p in parts if p) + "\n"


def work_item_reference(work_item: str) -> str:
    """How a revision names a work item kept in another system: a visible line and a hidden
    marker, which is what reading it back trusts (the line is for people)."""
    return f"Work item: {work_item}\n<!-- cpe:work-item={work_item} -->"


def marked_work_item(text: str | None) -> str | None:
    """The work item a ``work_item_reference`` in ``text`` names, if any."""
    found = _WORK_ITEM.search(text or "")
    return found.group(1) if found else None


def pull_user_body(text: str | None) -> str:
    text = _WORK_ITEM_LINE.sub("", _WORK_ITEM.sub("", text or ""))
    return _KEY.sub("", text).rstrip()


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
    return _WORK_ITEM.sub("", _REVIEW.sub("", _KEY.sub("", text or ""))).rstrip()


def linked_item(body: str | None, branch: str, prefix: str, *, closing: bool = True) -> str | None:
    """The work item a revision is for: its ``work_item_reference`` marker; else, when the
    tracker is the forge's own (``closing``), "Closes #N" in its body; else the branch name
    ``<prefix><id>-…``."""
    marked = marked_work_item(body)
    if marked is not None:
        return marked
    closed = closes(body) if closing else []
    if closed:
        return closed[0]
    if branch.startswith(prefix):
        found = _BRANCH_ITEM.match(branch.removeprefix(prefix))
        if found:
            return found.group(1)
    return None
