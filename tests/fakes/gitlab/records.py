"""What the fake GitLab stores: plain records, mutated only under the server's lock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tests.fakes import http

# GitLab's project access levels (``access_level`` of a member).
GUEST, PLANNER, REPORTER, DEVELOPER, MAINTAINER, OWNER = 10, 15, 20, 30, 40, 50
ACCESS_LEVELS = {
    "guest": GUEST,
    "planner": PLANNER,
    "reporter": REPORTER,
    "developer": DEVELOPER,
    "maintainer": MAINTAINER,
    "owner": OWNER,
}

Tier = Literal["free", "premium"]
Scope = Literal["api", "read_api"]


@dataclass(frozen=True)
class Token:
    """An access token: whose it is, its scopes (``api`` writes and reads, ``read_api`` only
    reads), and the ``access_level`` its user holds on the project (a project access token's
    role; a personal token's user's membership)."""

    username: str
    access_level: int = MAINTAINER
    scopes: tuple[Scope, ...] = ("api",)


@dataclass
class IssueRecord:
    iid: int
    title: str
    description: str | None
    author: str
    created_at: int
    updated_at: int
    labels: list[str] = field(default_factory=list)
    state: str = "opened"  # opened | closed
    closed_at: int | None = None
    closed_by: str | None = None

    @property
    def id(self) -> int:
        """The instance-wide id (differs from ``iid``, as on GitLab)."""
        return 80_000 + self.iid * 7


@dataclass
class LabelRecord:
    id: int
    name: str
    color: str = "#6699cc"
    description: str | None = None


@dataclass
class NoteRecord:
    id: int
    noteable: str  # "Issue" | "MergeRequest"
    iid: int  # the issue's or merge request's
    author: str
    body: str
    created_at: int
    system: bool = False
    discussion: str = ""  # the id of the discussion it belongs to
    position: dict[str, object] | None = None  # a diff note's
    resolved: bool = False
    individual: bool = True  # a note on its own, not a thread's (``POST /discussions``)

    @property
    def resolvable(self) -> bool:
        """A merge request thread's notes can be resolved; single notes and issues' cannot."""
        return self.noteable == "MergeRequest" and not self.individual and not self.system


@dataclass(frozen=True)
class LabelEventRecord:
    """An entry of ``resource_label_events``: ``user`` added or removed ``label``."""

    id: int
    noteable: str  # "Issue" | "MergeRequest"
    iid: int
    user: str
    label: str
    action: str  # add | remove
    created_at: int


@dataclass
class LinkRecord:
    """An issue link, stored as GitLab stores it: ``is_blocked_by`` is kept as the ``blocks``
    link the other way round."""

    id: int
    source: int  # issue iids
    target: int
    link_type: str  # relates_to | blocks
    created_at: int


@dataclass(frozen=True)
class RecordedRequest(http.RecordedRequest):
    """One request as the fake GitLab saw it (``tests/fakes/http.RecordedRequest``), with the
    token it sent (header or parameter; the fake's tokens are test values). ``counted``: on
    GitLab every answered request costs rate limit, a 304 too; a 429 does not."""

    token: str = ""

    @property
    def write(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class MergeRequestRecord:
    iid: int
    title: str
    description: str | None
    author: str
    source_branch: str
    target_branch: str
    head_sha: str  # the source branch's head as of the last push the MR saw
    base_sha: str  # the merge base when the diff was made (``diff_refs.base_sha``)
    start_sha: str  # the target's head when the diff was made (``diff_refs.start_sha``)
    created_at: int
    updated_at: int
    labels: list[str] = field(default_factory=list)
    state: str = "opened"  # opened | closed | merged | locked
    squash: bool = False
    remove_source_branch: bool | None = None
    merged_at: int | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    squash_commit_sha: str | None = None
    closed_at: int | None = None
    closed_by: str | None = None
    merge_error: str | None = None
    rebasing: bool = False  # a rebase was asked for and has not run yet
    auto_merge_by: str | None = None  # merge when the pipeline succeeds, as this user
    auto_merge_sha: str | None = None
    # The (target head, source head) GitLab last checked mergeability for: a read for another
    # pair answers ``checking`` once and starts the check, as GitLab's asynchronous check does.
    checked_for: tuple[str, str] | None = None
    diff_versions: list[tuple[str, str, str]] = field(default_factory=list)  # (base, start, head)

    @property
    def id(self) -> int:
        return 90_000 + self.iid * 13

    @property
    def draft(self) -> bool:
        title = self.title.lstrip()
        return title.lower().startswith(("draft:", "[draft]", "(draft)"))


@dataclass
class ApprovalRecord:
    iid: int
    user: str
    sha: str
    approved_at: int


@dataclass
class JobRecord:
    """A job of a pipeline: a commit status GitLab got from outside (``external``), or a CI
    job of a pipeline the fake ran (``build``)."""

    id: int
    pipeline: int
    name: str
    status: str  # created | pending | running | success | failed | canceled | skipped
    kind: str  # external | build
    target_url: str | None
    description: str | None
    author: str
    created_at: int
    started_at: int | None = None
    finished_at: int | None = None
    retried: bool = False
    allow_failure: bool = False


@dataclass
class PipelineRecord:
    id: int
    iid: int
    sha: str
    ref: str
    source: str  # external | push | merge_request_event
    user: str
    created_at: int
    updated_at: int
    jobs: list[JobRecord] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The composite status of its latest jobs, as GitLab derives it."""
        current = [j for j in self.jobs if not j.retried]
        states = {j.status for j in current if not (j.allow_failure and j.status == "failed")}
        if not current:
            return "created"
        for state in ("running", "pending", "created"):
            if state in states:
                return "running" if state == "running" or "success" in states else state
        for state in ("failed", "canceled"):
            if state in states:
                return state
        if states <= {"skipped"}:
            return "skipped"
        return "success"
