"""The merge queue: the default branch only ever moves to a tree whose pipeline passed.

An item approved with ``auto_merge`` enters the queue (``landing_queue``: in the order of
approval). The queue lands one revision at a time, in three steps, each a provider write the
executor makes:

1. ``UpdateBranch``: the default branch's head is merged into the revision's branch (nothing
   when it already contains it), so the revision's head is exactly the tree the default branch
   would move to (``LandingTest``);
2. its pipeline runs on that head, as on any push: the queue waits for it;
3. green: ``MergeRevision`` with ``expected_base``: the provider merges only while the default
   branch is still at that head, so the merge's tree is the tested one. Moved meanwhile (a
   person's push): ``LandingRefused`` ``moved``, and the revision is tested again.

While one revision is under test the ones behind it wait: each is then tested on a default
branch that already holds every landing before it. A revision that no longer merges
(``LandingRefused`` ``conflict``), or whose merged tree fails a check its own head passed, is
sent back to its implementor (``send_back``) with what happened; that round spends no attempt,
and past ``max_landing_rounds`` rounds the item is blocked. A tree that fails only checks the
default branch fails as well is held, not sent back, and not landed: nothing red lands on a red
default branch, and the queue goes on past it. A merge the provider holds for now (branch
protection, a checkout in the way: ``merge_waits``) is tried again on every poll and does not
hold the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from domain.commands import EngineCommand, MergeRevision, TransitionStatus, UpdateBranch
from domain.models import EngineState, LandingTest, Revision, SentBack, WorkItem
from domain.revisions import Required, inherited_failure, untested_lands
from domain.selectors import natural_key, revision_for
from domain.state.queue import landing_report
from domain.workflow import Trigger, next_status

_LAST = datetime.max.replace(tzinfo=UTC)


def landing_queue(state: EngineState) -> list[tuple[WorkItem, Revision]]:
    """Approved items with an open revision, in the order they were approved."""
    entries = []
    for item in state.work_items.values():
        revision = revision_for(state, item) if item.status == "approved" else None
        if revision is not None and revision.state == "open":
            entries.append((item, revision))
    return sorted(
        entries, key=lambda e: (state.approved_at.get(e[0].id, _LAST), natural_key(e[0].id))
    )


@dataclass(frozen=True)
class QueueEntry:
    """One entry as the operator sees it: where it is and what it waits for."""

    position: int
    item: WorkItem
    revision: Revision
    step: str
    test: LandingTest | None


def describe_queue(
    state: EngineState, *, charge_baseline: bool = False, required: Required = "auto"
) -> list[QueueEntry]:
    """The queue in order, each entry with its step in words."""
    entries = []
    turn_taken = False
    for position, (item, revision) in enumerate(landing_queue(state), start=1):
        step = _entry_step(state, item, revision, 1, charge_baseline, required)
        words = "waits its turn" if step.holds and turn_taken else step.words
        turn_taken = turn_taken or step.holds
        test = state.landing.get(revision.id)
        entries.append(QueueEntry(position, item, revision, words, test))
    return entries


def _green(state: EngineState, test: LandingTest, revision: Revision, required: Required) -> bool:
    """The tested head's pipeline passed; ``none`` (no checks) only where the approved head had
    none either and ``untested_lands`` allows it."""
    if revision.head_sha != test.tested_sha:
        return False
    status = revision.pipeline.status
    if status == "success":
        return True
    return status == "none" and test.approved_pipeline == "none" and untested_lands(state, required)


def landing_step(
    state: EngineState,
    *,
    max_rounds: int,
    charge_baseline: bool = False,
    required: Required = "auto",
) -> list[EngineCommand]:
    """The queue's next writes: the first entry not held is the one under way (brought up to
    date, tested, merged, or sent back); entries behind it wait. A held merge is asked again."""
    commands: list[EngineCommand] = []
    for item, revision in landing_queue(state):
        step = _entry_step(state, item, revision, max_rounds, charge_baseline, required)
        commands += list(step.commands)
        if step.holds:
            break
    return commands


@dataclass(frozen=True)
class _Step:
    """One entry's next writes, whether it holds the queue (the entries behind it wait), and
    what it is doing, in words."""

    commands: Sequence[EngineCommand]
    holds: bool
    words: str


def _entry_step(  # noqa: PLR0917 - one call site per caller, positional as the rest
    state: EngineState,
    item: WorkItem,
    revision: Revision,
    max_rounds: int,
    charge_baseline: bool,
    required: Required,
    /,
) -> _Step:
    test = state.landing.get(revision.id)
    failed = _failed(state, revision)
    if test is None:
        first = UpdateBranch(
            work_item_id=item.id, revision_id=revision.id, head_sha=revision.head_sha
        )
        return _Step([first], True, f"to be brought up to date with the default branch{failed}")
    if test.stale:
        note = test.note or "the default branch moved"
        step = f"to be tested again: {note}{failed}"
        return _Step([_test_again(item, revision, test)], True, step)
    wait = state.merge_waits.get(revision.id)
    if wait is not None:  # tried again on every poll; the others go on meanwhile
        merge = [_merge(item, revision, test)] if _green(state, test, revision, required) else []
        return _Step(merge, False, f"merge held by the provider: {_flat(wait.reason)}")
    if revision.head_sha not in test.heads:  # a head cpe did not make: not landed unreviewed
        return _Step([], False, f"held: its head {revision.head_sha[:12]} was pushed outside cpe")
    if revision.head_sha != test.tested_sha:
        return _Step([_test_again(item, revision, test)], True, f"to be tested again{failed}")
    on = f"{test.tested_sha[:12]} on top of the default branch at {test.base_sha[:12]}"
    if _green(state, test, revision, required):
        return _Step([_merge(item, revision, test)], True, f"merging {on}{failed}")
    if revision.pipeline.status != "failure":
        since = f" since {test.at.strftime('%Y-%m-%d %H:%M:%S UTC')}" if test.at else ""
        return _Step([], True, f"testing {on}: pipeline {revision.pipeline.status}{since}")
    if not charge_baseline and inherited_failure(state, revision):
        # red only where the default branch is red: held, not landed
        return _Step([], False, f"held: {on} fails only where the default branch fails too")
    if test.base_red:  # tested on a red default branch that has changed since: again on it
        return _Step([_test_again(item, revision, test)], True, f"to be tested again{failed}")
    pipeline = revision.pipeline
    checks = ", ".join(pipeline.failed_checks) or "the pipeline"
    reason = (
        f"revision #{revision.id} passed on its own but failed ({checks}) merged with the "
        f"default branch at {test.base_sha[:12]}"
    )
    detail = pipeline.reason or ""
    if pipeline.url:
        detail = f"{detail}\n{pipeline.url}".strip()
    report = landing_report(state, item, revision.id, "failed", reason, detail=detail)
    return _Step(send_back(state, item, report, max_rounds), True, f"failed on {on}: sent back")


def _failed(state: EngineState, revision: Revision) -> str:
    """What an earlier try of the entry's step met, when its write failed (``landing_failures``):
    said beside the step, which is asked again on every poll."""
    failure = state.landing_failures.get(revision.id)
    if failure is None:
        return ""
    times = f", {failure.tries} times" if failure.tries > 1 else ""
    since = f" since {failure.since.strftime('%Y-%m-%d %H:%M:%S UTC')}" if failure.since else ""
    return f" (the last try failed{times}{since}: {_flat(failure.reason)}; tried again each poll)"


def _flat(text: str) -> str:
    return " ".join(text.split())[:200]


def _test_again(item: WorkItem, revision: Revision, test: LandingTest) -> UpdateBranch:
    """Bring the revision up to date again: the test on ``test.base_sha`` no longer holds."""
    return UpdateBranch(
        work_item_id=item.id,
        revision_id=revision.id,
        head_sha=revision.head_sha,
        stale_base=test.base_sha,
    )


def _merge(item: WorkItem, revision: Revision, test: LandingTest) -> MergeRevision:
    return MergeRevision(
        work_item_id=item.id,
        revision_id=revision.id,
        expected_base=test.base_sha,
        head_sha=test.tested_sha,
    )


def send_back(
    state: EngineState, item: WorkItem, report: SentBack, max_rounds: int
) -> list[EngineCommand]:
    """The item back to its implementor with what the queue found (that round spends no
    attempt), or blocked once ``report`` is past ``max_rounds`` rounds."""
    trigger: Trigger
    reason = report.reason
    if report.rounds > max_rounds:
        trigger = "landing-rounds-exhausted"
        reason = f"sent back by the merge queue {max_rounds} times; the last: {reason}"
    elif item.status == "in-progress":
        trigger = "patch-conflict"
    else:
        trigger = "landing-conflict" if report.problem == "conflict" else "landing-failed"
    target = next_status(item.status, trigger)
    if target is None:
        return []
    return [TransitionStatus(work_item_id=item.id, to=target, reason=reason, landing=report)]


@dataclass(frozen=True)
class BaselineReport:
    """The default branch's pipeline when it is red, as ``cpe status`` and the dashboard say
    it: ``headline`` (where, which checks), the last lines of its ``failure``, its log ``url``,
    and what it ``means`` for revisions (``charge_baseline_failures``)."""

    headline: str
    failure: tuple[str, ...]
    url: str | None
    means: tuple[str, ...]


def describe_baseline(state: EngineState, *, charge_baseline: bool) -> BaselineReport | None:
    """The red default branch in words; None while its pipeline is not red."""
    baseline = state.baseline
    if baseline is None or baseline.pipeline.status != "failure":
        return None
    pipeline = baseline.pipeline
    checks = ", ".join(pipeline.failed_checks) or "the pipeline"
    failure = [line.strip()[:200] for line in (pipeline.reason or "").splitlines() if line.strip()]
    if charge_baseline:
        means: tuple[str, ...] = ("revisions failing the same checks are sent back all the same",)
    else:
        means = (
            "revisions failing only these checks are reviewed, not charged to the implementor",
            "and not merged automatically: fix the default branch, or merge them by hand",
        )
    return BaselineReport(
        headline=f"default branch pipeline: red at {baseline.sha[:12]} (failed: {checks})",
        failure=tuple(failure[-3:]),
        url=pipeline.url,
        means=means,
    )


def why_not_merged(
    state: EngineState,
    item: WorkItem,
    *,
    auto_merge: bool,
    merge_queue: bool,
    charge_baseline: bool = False,
    required: Required = "auto",
) -> str | None:
    """Why an approved item has not merged yet (None for one that is not approved): through
    the queue, its place and step there (``describe_queue``'s words, as ``cpe status`` lists
    them); else what ``revisions.revision_step`` waits for before it merges the revision as it
    is: a merge the provider holds, a head not reviewed, a pipeline not green."""
    if item.status != "approved":
        return None
    revision = revision_for(state, item)
    if revision is None:
        return "it has no open revision to merge"
    if revision.state != "open":
        return f"its revision {revision.id} is {revision.state}"
    if not auto_merge:
        return "[workflow] auto_merge is off: a person merges it"
    if merge_queue:
        for entry in describe_queue(state, charge_baseline=charge_baseline, required=required):
            if entry.item.id == item.id:
                return f"merge queue {entry.position}: {entry.step}"
    wait = state.merge_waits.get(revision.id)
    if wait is not None:
        return f"merge held by the provider: {_flat(wait.reason)}"
    if revision.id in state.landing_failures:
        return f"merging{_failed(state, revision)}"
    if revision.reviewed_sha != revision.head_sha:
        return f"its head {revision.head_sha[:12]} is not the head the reviewer approved"
    status = revision.pipeline.status
    if status == "failure" and not charge_baseline and inherited_failure(state, revision):
        return "held: its pipeline fails only where the default branch fails too"
    if status in ("failure", "pending"):
        return f"its pipeline is {'red' if status == 'failure' else 'running'}"
    if status == "none" and not untested_lands(state, required):
        return "no pipeline has reported on its head yet"
    return "merging"
