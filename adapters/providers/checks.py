"""A revision's pipeline from a forge's CI signals, combined the same way on every forge.

Each vendor reads its own sources into ``Signal``s (GitHub's check runs and commit statuses,
GitLab's commit statuses and newest pipeline); the rule that combines them is one: any failure
fails the pipeline, then anything still running keeps it pending, then all green is success; no
signal at all is no CI (``none``), not "pending forever". A failed pipeline names its failed
checks in ``failed_checks``, for comparison with the default branch's. When a forge's index
reads a revision's pipeline again is one rule too (``PipelineWatches``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from domain.models import Pipeline, RevisionState


@dataclass(frozen=True)
class Signal:
    name: str  # as the reason shows it: the check and its state
    state: str  # success | pending | failure
    url: str | None
    check: str  # the check's own name (a check run's, a status's context, a job's)


def combine_signals(signals: Sequence[Signal]) -> Pipeline:
    if not signals:
        return Pipeline(status="none")
    for wanted in ("failure", "pending"):
        matching = [s for s in signals if s.state == wanted]
        if matching:
            names = ", ".join(sorted(s.name for s in matching))
            verb = "failed" if wanted == "failure" else "running"
            failed = sorted({s.check for s in signals if s.state == "failure"})
            return Pipeline(
                status=wanted,
                reason=f"{verb}: {names}",
                url=matching[0].url,
                failed_checks=tuple(failed),
            )
    return Pipeline(status="success", url=signals[0].url)


@dataclass(frozen=True)
class _Watch:
    sha: str
    pipeline: Pipeline
    first_seen: int  # the cycle its head was first read
    stale: bool = False  # cpe wrote to the revision: read again, shown as last read meanwhile


class PipelineWatches:
    """Each open revision's last pipeline, and when a forge's index reads it again: every cycle
    while it is pending, or while a new head has had no CI yet for ``grace_cycles`` cycles;
    after that (settled, or no CI) only every ``recheck_cycles`` cycles, staggered by the
    revision's number, to catch a re-run. Revisions are known by their number (a pull request's,
    a merge request's iid). Not thread-safe: its index holds the lock."""

    def __init__(self, grace_cycles: int, recheck_cycles: int) -> None:
        self._grace = grace_cycles
        self._recheck = recheck_cycles
        self._watches: dict[int, _Watch] = {}
        self.cycle = 0

    def due(self, number: int, head_sha: str) -> bool:
        watch = self._watches.get(number)
        if watch is None or watch.stale or watch.sha != head_sha:
            return True
        if watch.pipeline.status == "pending":
            return True
        young = self.cycle - watch.first_seen < self._grace
        if watch.pipeline.status == "none" and young:
            return True
        return (self.cycle + number) % self._recheck == 0

    def record(self, number: int, head_sha: str, pipeline: Pipeline) -> None:
        watch = self._watches.get(number)
        first_seen = watch.first_seen if watch and watch.sha == head_sha else self.cycle
        self._watches[number] = _Watch(head_sha, pipeline, first_seen)

    def forget(self, number: int) -> None:
        """cpe wrote to it: read its pipeline again next time it is open. Until then it shows
        the pipeline last read of its head: a merged revision keeps the green it merged on
        (not "none")."""
        watch = self._watches.get(number)
        if watch is not None:
            self._watches[number] = replace(watch, stale=True)

    def pipeline(self, number: int, head_sha: str, state: RevisionState) -> Pipeline:
        """The revision's pipeline as last read for this head; an open revision's head not read
        yet is pending, a merged or closed one's is no CI."""
        watch = self._watches.get(number)
        if watch is not None and watch.sha == head_sha:
            return watch.pipeline
        if state == "open":
            return Pipeline(status="pending", reason="not read yet")
        return Pipeline()
