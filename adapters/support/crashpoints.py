"""Named crashpoints: the instants at which the crash suite makes cpe die as ``kill -9`` would.

A crashpoint marks a place where a crash leaves durable state half-way: after a journal commit,
around every provider write, around an agent run's terminal event, inside a merge, around a
worktree's removal. ``POINTS`` lists every one with what is durable when it is hit, and
``crashpoint(name)`` refuses a name it does not list, so the list is complete by construction.

Unset (production), a crashpoint costs a dictionary lookup. Two environment variables, read
once when this module is imported, turn them on:

- ``CPE_CRASH_AT=name`` (or ``name:N``): the process kills itself with SIGKILL at the first
  (or N-th) hit of ``name``: no ``finally``, no ``atexit``, no flush, exactly a ``kill -9``.
- ``CPE_CRASH_TRACE=path``: every hit appends its name to ``path`` (one line each), so a test
  can prove that a full loop passes every point.

``tests/e2e/test_crash_consistency.py`` kills a real ``cpe run`` at each point in turn and
checks that a restart finishes the work exactly once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from types import MappingProxyType

# The provider writes the executor makes, by command type; each has a point before the write
# (its intent committed, nothing written) and after it (written, the intent still pending).
WRITES = (
    "ApplyPlan",
    "TransitionStatus",
    "CreateRevision",
    "UpdateRevision",
    "PostReview",
    "MergeRevision",
    "UpdateBranch",
)

_POINTS: dict[str, str] = {
    "journal.after_append": "an event from outside is committed; the engine has not taken it",
    "journal.after_cycle": "a cycle's result events and its cursor are committed",
    "session.before_terminal": "an agent run ended; its terminal event is not journaled",
    "session.after_terminal": "the run's terminal event is journaled, not processed",
    "worktree.setup_started": "a new worktree's setup command is running",
    "worktree.before_remove": "the run's patch is taken; its worktree is still on disk",
    "worktree.after_remove": "the worktree is removed; its local branch is not yet deleted",
    "local.revision.after_branch": "a revision's branch is written; the tracker has no row",
    "local.merge.after_ref": "the default branch holds the merge; the tracker says open",
    "local.update.after_ref": "a queued revision's branch holds the default branch merged in; "
    "the tracker still has the old head",
    "local.pipeline.after_start": "the local pipeline's test command is running",
    "github.item.after_issue": "an issue is made; its labels and native blockers are not",
    "github.revision.after_branch": "a revision's branch is on GitHub; no pull request opened",
    "gitlab.label.after_create": "a status label is made on GitLab; the others are not",
    "gitlab.issue.after_create": "an issue is made on GitLab; its labels and blocking links are "
    "not",
    "gitlab.issue.after_link": "one blocking link of a new issue is made; the others are not",
    "gitlab.issue.after_update": "an issue's description or labels are written; not acknowledged",
    "gitlab.issue.after_transition": "an issue's status label (and state) are written; not "
    "acknowledged",
    "gitlab.revision.after_commit": "a revision's commit is on its GitLab branch; no merge "
    "request opened",
    "gitlab.revision.after_mr": "a revision's merge request is open on GitLab; not yet answered",
    "gitlab.review.after_discussions": "a review's diff discussions are on GitLab; its summary "
    "note (with the verdict and the approval) is not",
    "gitlab.update.after_rebase": "GitLab is rebasing a queued merge request; cpe has not seen "
    "it finish",
    "linear.label.after_create": "a label is made in the Linear team; not acknowledged",
    "linear.issue.after_create": "an issue is made on Linear (with its state and labels); its "
    "blocking relations are not",
    "linear.issue.after_link": "one blocking relation of a new issue is made; the others are not",
    "linear.issue.after_update": "an issue's description, labels or state are written; not "
    "acknowledged",
    "linear.issue.after_transition": "an issue's workflow state is written; not acknowledged",
    "linear.issue.after_comment": "cpe's comment is on the Linear issue; not acknowledged",
    "jira.issue.after_create": "an issue is made on Jira; its blocking links are not",
    "jira.issue.after_link": "one blocking link of a new Jira issue is made; the others are not",
    "jira.issue.after_update": "a Jira issue's description or labels are written; not acknowledged",
    "jira.issue.after_transition": "a Jira issue's transition is made; not acknowledged",
    "jira.issue.after_comment": "cpe's comment on a Jira issue is made; not acknowledged",
    "tracker.comment.after": "cpe's comment on a work item is made; the write it tells of is "
    "not acknowledged",
}
for _write in WRITES:
    _POINTS[f"write.{_write}.before"] = f"{_write}: its intent is committed, nothing written"
    _POINTS[f"write.{_write}.after"] = f"{_write}: written, its intent still pending"

POINTS: Mapping[str, str] = MappingProxyType(_POINTS)


def _parse(value: str | None) -> tuple[str, int] | None:
    if not value:
        return None
    name, _, count = value.partition(":")
    if name not in POINTS:
        raise ValueError(f"CPE_CRASH_AT: unknown crashpoint {name!r}; known: {', '.join(POINTS)}")
    try:
        nth = int(count or 1)
    except ValueError:
        raise ValueError(f"CPE_CRASH_AT: {value!r}: expected NAME or NAME:N") from None
    if nth < 1:
        raise ValueError(f"CPE_CRASH_AT: {value!r}: N must be at least 1")
    return name, nth


_target = _parse(os.environ.get("CPE_CRASH_AT"))
_trace = os.environ.get("CPE_CRASH_TRACE") or None
_hits: dict[str, int] = {}
_lock = threading.Lock()


def crashpoint(name: str) -> None:
    """Die here when ``CPE_CRASH_AT`` names this point (and this is its N-th hit)."""
    if name not in POINTS:
        raise KeyError(
            f"unregistered crashpoint {name!r}: add it to adapters.support.crashpoints.POINTS"
        )
    if _target is None and _trace is None:
        return
    with _lock:
        hits = _hits[name] = _hits.get(name, 0) + 1
        if _trace is not None:
            with open(_trace, "a") as trace:
                trace.write(f"{name}\n")
        if _target is not None and _target == (name, hits):
            sys.stderr.write(f"cpe: crashpoint {name} (hit {hits}): killing myself\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
