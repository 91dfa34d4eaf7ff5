"""Ports: the Protocols adapters implement, so the engine never names a concrete adapter.

Providers are synchronous (actors are threads). Each entity has a reader and a writer, and no
component is given both for one entity type: readers go to the pollers and the runtimes,
writers to the command executor. Writers that create things take an ``idempotency_key``: the
same key must never create a second entity (a retried write, a restart between the write and its
acknowledgement). The runtime port is asynchronous, as the agent SDKs are.

Poller note: a poller compares what it reads against a state snapshot taken *before* the read,
so an observation older than the engine's own write can never revert it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from domain.models import (
    AgentRole,
    AgentStartParams,
    Baseline,
    EngineState,
    Frozen,
    IgnoredWorkItem,
    ReviewHistory,
    Revision,
    RevisionFile,
    RevisionId,
    RunSignal,
    RunUsage,
    SessionId,
    Spec,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.results import AgentResult, AgentReview

# ---------------------------------------------------------------------------- providers


@runtime_checkable
class WorkProviderReader(Protocol):
    def list_work_items(self) -> Sequence[WorkItem]: ...
    def get_work_item_body(self, work_item_id: WorkItemId) -> str: ...


@runtime_checkable
class WorkProviderWriter(Protocol):
    def create_work_item(
        self,
        title: str,
        body: str,
        labels: Sequence[str] = (),
        blocked_by: Sequence[WorkItemId] = (),
        *,
        idempotency_key: str | None = None,
    ) -> WorkItemId: ...
    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None: ...
    def close_work_item(self, work_item_id: WorkItemId) -> None: ...
    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None: ...


@runtime_checkable
class WorkItemCommenter(Protocol):
    """A tracker that takes comments on its items (optional: a writer without it is told
    nothing). When the work items are kept apart from the revisions (Linear, Jira), the item is
    where a person looks: cpe says there what it did with it (``domain/item_comments.py``)."""

    def comment(
        self, work_item_id: WorkItemId, body: str, *, idempotency_key: str | None = None
    ) -> None:
        """Add ``body`` (Markdown) as a comment; the same key never comments twice."""
        ...


@runtime_checkable
class RevisionProviderReader(Protocol):
    def list_revisions(self) -> Sequence[Revision]: ...
    def get_revision_files(self, revision_id: RevisionId) -> Sequence[RevisionFile]: ...
    def get_review_history(self, revision_id: RevisionId) -> ReviewHistory: ...


@runtime_checkable
class IgnoredItemsReader(Protocol):
    """A work item reader that also says which tracker items it left out, and why (optional:
    a reader without it lists every item it has as work)."""

    def ignored_work_items(self) -> Sequence[IgnoredWorkItem]:
        """The open items the last ``list_work_items`` left out (not trusted, a required label
        missing); reading them asks the provider nothing."""
        ...


@runtime_checkable
class BaselineReader(Protocol):
    """A revision reader that also reports the default branch's pipeline (optional: a provider
    without it has no baseline, and every red check is the revision's)."""

    def baseline(self) -> Baseline | None:
        """The pipeline on the default branch's head; None when there is none to observe."""
        ...


@runtime_checkable
class ChangeNotifier(Protocol):
    """A reader that also says the moment something it reads changed on its own (the local
    pipeline finished), so the engine reads it at once rather than at its next poll (optional:
    a reader without it is read at each poll interval)."""

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from any thread, quickly: it only asks for a poll) after each
        such change."""
        ...


@runtime_checkable
class RevisionProviderWriter(Protocol):
    def create_from_patch(
        self,
        work_item_id: WorkItemId,
        branch_name: str,
        title: str,
        body: str,
        patch: str,
        *,
        idempotency_key: str | None = None,
    ) -> Revision: ...
    def update_from_patch(
        self, revision_id: RevisionId, patch: str, *, idempotency_key: str | None = None
    ) -> Revision: ...
    def post_review(
        self,
        revision_id: RevisionId,
        head_sha: str,
        review: AgentReview,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        """Post ``review`` of ``head_sha``; posting it again with the same key (a retry of a
        write whose answer was lost) adds nothing."""
        ...

    def merge(self, revision_id: RevisionId) -> str:
        """Merge into the default branch and return the merge commit; merging an already merged
        revision returns its merge commit (idempotent); a conflict raises ``ConflictError``."""
        ...


class BranchUpdate(NamedTuple):
    """A revision brought up to date with the default branch: ``revision`` as it is now (its new
    head, and that head's pipeline), and ``base_sha``, the default branch's head it contains."""

    revision: Revision
    base_sha: str


@runtime_checkable
class RevisionLander(Protocol):
    """What a provider offers the merge queue, beside ``RevisionProviderWriter`` (a writer
    without it is merged as it is, the seed's way). Landing a revision is: bring it up to date
    with the default branch (``update_branch``), let its pipeline run on that exact tree, then
    merge it only if the default branch has not moved since (``land``)."""

    def create_from_patch(
        self,
        work_item_id: WorkItemId,
        branch_name: str,
        title: str,
        body: str,
        patch: str,
        *,
        idempotency_key: str | None = None,
        base_sha: str | None = None,
    ) -> Revision:
        """As ``RevisionProviderWriter.create_from_patch``; with ``base_sha`` (the commit the
        patch was made against, the run's fork point) the revision is built on that commit, not
        on the default branch's head, where the provider has it."""
        ...

    def update_from_patch(
        self,
        revision_id: RevisionId,
        patch: str,
        *,
        idempotency_key: str | None = None,
        base_sha: str | None = None,
    ) -> Revision:
        """As ``RevisionProviderWriter.update_from_patch``, ``base_sha`` as for creating."""
        ...

    def update_branch(
        self, revision_id: RevisionId, *, idempotency_key: str | None = None
    ) -> BranchUpdate:
        """Merge the default branch's head into the revision's branch (nothing when the branch
        already contains it). The new head's pipeline starts as a push starts it. A textual
        conflict raises ``ConflictError`` with ``files`` (and ``detail``: the conflict hunks,
        where they can be had); the branch is left as it was."""
        ...

    def land(self, revision_id: RevisionId, *, expected_base: str, head_sha: str) -> str:
        """Merge the revision whose head ``head_sha`` contains ``expected_base``, only while the
        default branch is still at ``expected_base``: so the default branch moves to exactly the
        tree whose pipeline ran. Returns the merge commit (idempotent, as ``merge``).
        ``BaseMovedError`` when the default branch moved; ``ConflictError`` when the provider
        refuses it otherwise; ``MergeWaitError`` when it will merge later."""
        ...


@runtime_checkable
class SpecProviderReader(Protocol):
    def list_specs(self) -> Sequence[Spec]: ...
    def read_spec(self, path: str) -> str: ...
    def read_blob(self, blob_sha: str) -> str: ...


@dataclass(frozen=True)
class ProviderInterfaces:
    """The five provider interfaces an engine is built with (S002-19: all five are required)."""

    work_item_reader: WorkProviderReader
    work_item_writer: WorkProviderWriter
    revision_reader: RevisionProviderReader
    revision_writer: RevisionProviderWriter
    spec_reader: SpecProviderReader


# ---------------------------------------------------------------------------- runtimes


def _no_usage() -> RunUsage | None:
    return None


@dataclass(frozen=True)
class AgentRunHandle:
    """A started run. ``output`` yields plain text and ends on any termination; ``result``
    raises ``AgentFailure(kind, reason)`` when the run does not produce one. ``usage`` tells
    the run's cost once it has ended (None when the runtime cannot tell)."""

    session_id: SessionId
    output: AsyncIterator[str]
    result: Awaitable[AgentResult]
    log_file_path: str | None = None
    usage: Callable[[], RunUsage | None] = _no_usage


@runtime_checkable
class RuntimeAdapter(Protocol):
    """The seed's runtime port: start a run, cancel it. An adapter with these two methods
    only is a runtime adapter (S000); reaping is an optional capability (``RuntimeReaper``)."""

    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle: ...
    def cancel_agent(self, session_id: SessionId) -> None:
        """Cancel a run; an unknown session id is a no-op. Safe to call from any thread."""
        ...


@runtime_checkable
class RuntimeReaper(Protocol):
    """A runtime that can clean up after a crash: the engine calls ``reap`` where an adapter
    offers it."""

    def reap(self, keep_branches: frozenset[str]) -> None:
        """At start, before any run: remove what runs of an earlier process left (processes,
        worktrees, branches), keeping the branches in ``keep_branches`` (open revisions')."""
        ...


def _no_signal(session_id: SessionId, signal: RunSignal) -> None:
    return None


@dataclass(frozen=True)
class RuntimeAdapterDeps:
    """What the engine gives every runtime adapter factory (S002-21). ``report_signal``: what a
    live run's CLI says of the model API (retrying, rate-limited, its headroom), from any
    thread; the engine sees it while the run goes on (a runtime that never calls it works)."""

    work_item_reader: WorkProviderReader
    revision_reader: RevisionProviderReader
    get_state: Callable[[], EngineState]
    get_review_history: Callable[[RevisionId], ReviewHistory]
    report_signal: Callable[[SessionId, RunSignal], None] = _no_signal


class SessionLogging(Frozen):
    agent_sessions: bool = True
    logs_dir: str


class RuntimeAdapterConfig(Frozen):
    """The base of every runtime's config: duration limit and transcripts."""

    max_agent_duration: float
    logging: SessionLogging


RuntimeAdapterFactory = Callable[[RuntimeAdapterDeps], dict[AgentRole, RuntimeAdapter]]
"""The runtime adapter factory ``create_engine`` requires (S002-20): one adapter per role."""
