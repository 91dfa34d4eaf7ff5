"""Every error cpe raises on purpose, under one root.

Vendor and OS exceptions are translated into these at the adapter boundary
(``raise ProviderError(...) from exc``), so nothing above an adapter catches a githubkit,
GitPython, sqlite3 or claude_agent_sdk exception. Each class is one kind of failure and carries
the fields a caller needs to decide what to do (a status code, a retry delay, a key path).

::

    CpeError
    ├── ConfigError              supervisor.toml or an EngineConfig is wrong (exit 78)
    ├── DomainError              a domain rule was broken by the caller
    │   ├── UnknownEntityError       an id the state does not hold
    │   └── InvalidAgentOutputError  an agent's structured output does not match its role's schema
    ├── ProviderError            a provider call failed (status, retry_after, transient)
    │   ├── NotFoundError            the entity does not exist on the provider
    │   ├── ConflictError            the provider refused a write (merge conflict, stale head)
    │   │   └── BaseMovedError           the default branch moved since the revision was tested
    │   └── MergeWaitError           the provider will merge later, not now (branch protection)
    ├── AgentFailure             an agent run did not produce a result (kind, reason)
    ├── AgentDefinitionError     .claude/agents/<role>.md is missing or malformed
    ├── ContextError             a run's context could not be assembled (spec, body, files)
    ├── WorktreeError            a worktree could not be created, set up or removed
    ├── PatchError               a patch could not be extracted or applied
    ├── JournalError             the event journal cannot be read (damaged, newer: exit 65)
    │   ├── JournalIOError           the disk refused it (full, read-only, not a directory: exit 74)
    │   └── JournalInUseError        another process holds the engine's instance lock
    └── SupervisionError         an actor tree gave up past its restart intensity (exit 75)
"""

from __future__ import annotations

from typing import Literal

AgentFailureKind = Literal["failed", "timed-out", "cancelled"]
FailureClass = Literal["work", "infrastructure"]


class CpeError(Exception):
    """Root of every error cpe raises on purpose."""


class ConfigError(CpeError):
    """Configuration is missing or invalid.

    ``key_path`` names where (``"runtime.implementor.kind"``), ``expected`` what would be valid.
    """

    def __init__(self, message: str, *, key_path: str | None = None, expected: str | None = None):
        self.key_path = key_path
        self.expected = expected
        parts = [f"{key_path}: {message}" if key_path else message]
        if expected:
            parts.append(f"expected {expected}")
        super().__init__("; ".join(parts))


class DomainError(CpeError):
    """A domain rule was broken by the caller."""


class UnknownEntityError(DomainError):
    """An id that the engine state does not hold."""

    def __init__(self, kind: str, entity_id: str):
        self.kind = kind
        self.entity_id = entity_id
        super().__init__(f"unknown {kind} {entity_id!r}")


class InvalidAgentOutputError(DomainError):
    """An agent's structured output does not match its role's schema."""

    def __init__(self, role: str, detail: str):
        self.role = role
        self.detail = detail
        super().__init__(f"invalid {role} output: {detail}")


class ProviderError(CpeError):
    """A provider call failed.

    ``status`` is the HTTP-like status when there is one, ``retry_after`` the seconds the
    provider asked us to wait, ``transient`` whether retrying the same call may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        transient: bool | None = None,
        method: str | None = None,
    ):
        self.status = status
        self.retry_after = retry_after
        self.method = method
        if transient is None:
            transient = status is not None and (status >= 500 or status in (403, 408, 429))
        self.transient = transient
        prefix = f"{method}: " if method else ""
        suffix = f" (status {status})" if status is not None else ""
        super().__init__(f"{prefix}{message}{suffix}")


class NotFoundError(ProviderError):
    """The entity does not exist on the provider."""

    def __init__(self, message: str, *, method: str | None = None):
        super().__init__(message, status=404, transient=False, method=method)


class ConflictError(ProviderError):
    """The provider refused a write that cannot succeed as asked (merge conflict, stale head).

    A textual conflict between a revision and the default branch names the conflicting
    ``files`` and, where git gives them, the conflict hunks (``detail``), so that the agent sent
    back to resolve it is told exactly where."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 409,
        method: str | None = None,
        files: tuple[str, ...] = (),
        detail: str = "",
    ):
        self.files = files
        self.detail = detail
        super().__init__(message, status=status, transient=False, method=method)


class BaseMovedError(ConflictError):
    """A merge refused because the default branch is no longer at ``expected`` (the head the
    revision was tested on top of) but at ``actual``: the merged tree would be untested, so the
    revision is tested again on the new head. Nothing was written."""

    def __init__(
        self, message: str, *, expected: str, actual: str | None, status: int | None = None
    ):
        self.expected = expected
        self.actual = actual
        super().__init__(message, status=status)


class MergeWaitError(ProviderError):
    """The provider refused a merge for now: what protects the target branch is not satisfied
    yet (a required check not reported, a required approving review not given). Retrying at
    once cannot help, waiting may: the revision waits and the merge is tried again on the next
    poll. ``reason`` is what the provider said is missing."""

    def __init__(self, message: str, *, reason: str, status: int | None = 405):
        self.reason = reason
        super().__init__(message, status=status, transient=False)


class AgentFailure(CpeError):
    """An agent run ended without a result: it failed, timed out or was cancelled.

    ``infrastructure`` says the run failed under the agent, not because of its work: no or a
    refused credential, the model API unreachable, overloaded or rate limiting, the CLI not
    starting, a sandbox that cannot run commands. Such a failure spends no attempt; a streak
    of them pauses dispatch."""

    def __init__(self, kind: AgentFailureKind, reason: str, *, infrastructure: bool = False):
        self.kind: AgentFailureKind = kind
        self.reason = reason
        self.infrastructure = infrastructure
        super().__init__(f"agent {kind}: {reason}")


class AgentDefinitionError(CpeError):
    """An agent definition file is missing, unreadable or malformed (the run cannot start)."""


class ContextError(CpeError):
    """The context of a run could not be assembled: a spec, a work item body, the revision's
    files or a project context file could not be read."""


class WorktreeError(CpeError):
    """A worktree could not be created, set up or removed."""


class PatchError(CpeError):
    """A patch could not be extracted from a worktree or applied to a tree. ``files`` names
    the files where it conflicts with the tree (a three-way apply left them unmerged), with
    the conflict hunks in ``detail``: the tree moved under the patch."""

    def __init__(self, message: str, *, files: tuple[str, ...] = (), detail: str = ""):
        self.files = files
        self.detail = detail
        super().__init__(message)


class JournalError(CpeError):
    """The event journal could not be read or written."""


class JournalIOError(JournalError):
    """The disk refused the journal: full, read-only, or its directory is not one. Unlike a
    damaged journal, freeing space or fixing the path fixes it (exit 74, EX_IOERR)."""


class JournalInUseError(JournalError):
    """Another process (an engine, or a command journaling a person's request) holds the
    state directory's instance lock."""


class SupervisionError(CpeError):
    """An actor tree exceeded its restart intensity and was stopped."""
