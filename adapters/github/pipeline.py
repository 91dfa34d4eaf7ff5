"""A revision's pipeline from GitHub's two CI sources: check runs and commit statuses.

Actions reports check runs; older integrations post commit statuses; a repository may have
both. Both are combined (field notes): any failure fails the pipeline, then anything still
running keeps it pending, then all green is success. Neither present means no CI (``none``),
not "pending forever". ``cancelled``, ``timed_out``, ``action_required``, ``stale`` and
``startup_failure`` are not green. A failed pipeline names its failed checks (a check run's
name, a status's context) in ``failed_checks``, for comparison with the default branch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from githubkit_schemas.latest.models import CheckRun, SimpleCommitStatus

from domain.models import Pipeline

_GREEN_CONCLUSIONS = frozenset({"success", "neutral", "skipped"})


@dataclass(frozen=True)
class _Signal:
    name: str
    state: str  # success | pending | failure
    url: str | None
    check: str  # the check run's name or the status's context


def _from_check(run: CheckRun) -> _Signal:
    url = run.details_url or run.html_url
    if run.status != "completed":
        return _Signal(run.name, "pending", url, run.name)
    conclusion = run.conclusion or "none"
    state = "success" if conclusion in _GREEN_CONCLUSIONS else "failure"
    return _Signal(f"{run.name} ({conclusion})", state, url, run.name)


def _from_status(status: SimpleCommitStatus) -> _Signal:
    state = {"success": "success", "pending": "pending"}.get(status.state, "failure")
    return _Signal(f"{status.context} ({status.state})", state, status.target_url, status.context)


def combine(checks: Sequence[CheckRun], statuses: Sequence[SimpleCommitStatus]) -> Pipeline:
    signals = [_from_check(c) for c in checks] + [_from_status(s) for s in statuses]
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
