"""What cpe writes into GitHub's text: the neutral markers every Markdown forge shares
(``adapters/providers/markers.py``), and GitHub's status labels (``status:<status>``)."""

from __future__ import annotations

from collections.abc import Iterable

from adapters.providers.markers import (
    GENERATED,
    blocked_by,
    blocker_id,
    closes,
    commit_has_key,
    commit_is_cpe,
    commit_message,
    has_key,
    is_foreign_blocker,
    issue_body,
    key_marker,
    key_token,
    linked_item,
    marked_work_item,
    pull_body,
    pull_user_body,
    reference,
    review_digest,
    review_marker,
    split_body,
    strip_markers,
    user_body,
    with_user_body,
    work_item_reference,
)
from domain.models import STATUSES, Status

__all__ = [
    "GENERATED",
    "STATUS_PREFIX",
    "blocked_by",
    "blocker_id",
    "closes",
    "commit_has_key",
    "commit_is_cpe",
    "commit_message",
    "has_key",
    "is_foreign_blocker",
    "is_status_label",
    "issue_body",
    "key_marker",
    "key_token",
    "linked_item",
    "marked_work_item",
    "pull_body",
    "pull_user_body",
    "reference",
    "review_digest",
    "review_marker",
    "split_body",
    "status_label",
    "status_of",
    "strip_markers",
    "user_body",
    "with_user_body",
    "work_item_reference",
]

STATUS_PREFIX = "status:"


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
