"""What the fake GitHub stores: plain records, mutated only under the server's lock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from tests.fakes import http


def database_id(number: int) -> int:
    """Issue database ids differ from numbers, as on GitHub (the dependencies API wants ids)."""
    return 9_000_000 + number * 17


@dataclass
class IssueRecord:
    number: int
    title: str
    body: str | None
    user: str
    created_at: int
    updated_at: int
    labels: list[str] = field(default_factory=list)
    state: str = "open"
    state_reason: str | None = None
    closed_at: int | None = None
    blocked_by: list[int] = field(default_factory=list)  # issue numbers
    is_pull: bool = False
    foreign_blockers: list[tuple[str, int]] = field(default_factory=list)  # ("o/r", number)

    @property
    def id(self) -> int:
        return database_id(self.number)


@dataclass
class PullRecord:
    number: int
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    draft: bool = False
    merged: bool = False
    merged_at: int | None = None
    merge_commit_sha: str | None = None
    merged_by: str | None = None
    merge_base: str | None = None  # kept at merge time: the files of a merged PR stay its own
    # The (base head, head) GitHub last computed ``mergeable`` for: GitHub computes it in the
    # background, so a read for another pair (either branch moved) answers null and starts it.
    mergeable_for: tuple[str, str] | None = None

    @property
    def id(self) -> int:
        return 7_000_000 + self.number * 13


@dataclass
class ReviewRecord:
    id: int
    pull: int
    user: str
    body: str
    state: str
    commit_id: str
    submitted_at: int


@dataclass
class ReviewCommentRecord:
    id: int
    review_id: int
    pull: int
    user: str
    path: str
    line: int
    side: str
    body: str
    commit_id: str
    diff_hunk: str
    created_at: int


@dataclass(frozen=True)
class EventRecord:
    """An entry of an issue's timeline: ``merged`` (``commit_id``: the merge commit),
    ``closed``, ``reopened``, ``labeled`` and ``unlabeled`` (``label``: its name),
    ``renamed`` (``rename``: the title before and after). ``actor`` did it."""

    id: int
    issue: int
    event: str
    actor: str
    commit_id: str | None
    created_at: int
    label: str | None = None
    rename: tuple[str, str] | None = None


@dataclass(frozen=True)
class Protection:
    """Branch protection: checks that must be green on a pull request's head, how many
    approving reviews (by others than its author) it needs, and whether its head must contain
    the base branch's head ("Require branches to be up to date before merging", GitHub's
    ``required_status_checks.strict``), before GitHub merges it."""

    checks: tuple[str, ...] = ()
    reviews: int = 0
    up_to_date: bool = False


@dataclass
class CheckRunRecord:
    id: int
    head_sha: str
    name: str
    status: str
    conclusion: str | None
    details_url: str | None
    started_at: int
    completed_at: int | None


@dataclass
class StatusRecord:
    id: int
    sha: str
    context: str
    state: str
    description: str | None
    target_url: str | None
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class RecordedRequest(http.RecordedRequest):
    """One request as the fake GitHub saw it (``tests/fakes/http.RecordedRequest``), with the
    ``X-GitHub-Api-Version`` it named and its ``Authorization`` header as sent (the fake's tokens
    are test values). ``counted`` is False for a 304: it costs no rate limit on GitHub."""

    api_version: str | None = None
    authorization: str = ""


TokenKind = Literal["classic", "fine-grained", "app"]
# GitHub's repository roles, from least to most access.
Role = Literal["read", "triage", "write", "maintain", "admin"]
ROLES: tuple[Role, ...] = ("read", "triage", "write", "maintain", "admin")

# What a fine-grained personal access token can be given for a repository's issues, pull
# requests and code. GitHub offers no Checks permission for these tokens at all.
FINE_GRAINED_PERMISSIONS: Mapping[str, str] = MappingProxyType(
    {
        "contents": "write",
        "issues": "write",
        "pull_requests": "write",
        "statuses": "read",
        "metadata": "read",
    }
)


PUSHING_ROLES: frozenset[str] = frozenset({"write", "maintain", "admin"})


@dataclass(frozen=True)
class Access:
    """Who a token acts as, and what it may do on the repository.

    A classic token acts with its user's ``role`` (``triage`` may label and close issues but
    not push, so it cannot create labels, and labels it sends with a new issue are dropped);
    a fine-grained token or an App installation token has ``permissions``
    (``{"checks": "read", "issues": "write", ...}``), and what they do not name is refused.
    The token's user (not an App's bot) is a collaborator with ``role`` on the repository: a
    fine-grained token can do no more than its user may either.
    """

    login: str
    kind: TokenKind = "classic"
    role: Role = "admin"
    permissions: Mapping[str, str] = field(default_factory=dict)

    def level(self, permission: str) -> str:
        """``write``, ``read`` or ``none`` for a permission (``checks``, ``issues``, ...)."""
        if self.kind == "classic":
            if permission in ("issues", "pull_requests") and self.role == "triage":
                return "write"  # labels, state: yes; creating labels: see can_create_labels
            if self.role in PUSHING_ROLES:
                return "write"
            return "read"
        return self.permissions.get(permission, "none")

    @property
    def can_push(self) -> bool:
        """Write access to the repository's contents (classic tokens: a role that may push)."""
        if self.kind == "classic":
            return self.role in PUSHING_ROLES
        return self.level("contents") == "write"

    @property
    def can_create_labels(self) -> bool:
        if self.kind == "classic":
            return self.can_push
        return self.level("issues") == "write" or self.level("pull_requests") == "write"

    @property
    def refusal(self) -> str:
        """GitHub's message when this token may not do something."""
        if self.kind == "fine-grained":
            return "Resource not accessible by personal access token"
        if self.kind == "app":
            return "Resource not accessible by integration"
        return "Must have push access to repository"
