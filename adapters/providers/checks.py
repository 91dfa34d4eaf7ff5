"""A revision's pipeline from a forge's CI signals, combined the same way on every forge.

Each vendor reads its own sources into ``Signal``s (GitHub's check runs and commit statuses,
GitLab's commit statuses and newest pipeline); the rule that combines them is one: any failure
fails the pipeline, then anything still running keeps it pending, then all green is success; no
signal at all is no CI (``none``), not "pending forever". A failed pipeline names its failed
checks in ``failed_checks``, for comparison with the default branch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.models import Pipeline


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
