"""A commit's pipeline on GitLab: its CI pipelines and the commit statuses reported on it.

GitLab keeps both in one place: every job of a CI pipeline and every status an outside CI posts
(``POST /statuses/:sha``, which GitLab files under an external pipeline of its own) is a commit
status of the sha, listed by ``/repository/commits/:sha/statuses`` with its name (the latest of
each name). They are combined as GitHub's checks are: any failure fails the pipeline, then
anything not finished keeps it pending, then all green is success; a failed pipeline names its
failed jobs and statuses in ``failed_checks``, for comparison with the default branch's. A job
allowed to fail (``allow_failure``) is not a failure; a manual job not yet run waits only when
it blocks the pipeline (not allowed to fail). The newest pipeline of the sha is read too: one
that failed with no failed job (a broken ``.gitlab-ci.yml``) fails the pipeline under its own
name, one still running with no job listed yet keeps it pending. Neither a pipeline nor a
status means no CI (``none``).
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.providers.checks import Signal, combine_signals
from adapters.providers.gitlab.api import GitLabApi, Json
from domain.models import Pipeline

_GREEN = frozenset({"success", "skipped"})
_RUNNING = frozenset(
    {
        "created",
        "waiting_for_resource",
        "preparing",
        "waiting_for_callback",
        "pending",
        "running",
        "scheduled",
        "canceling",
    }
)


def _from_status(status: Json) -> Signal | None:
    name = str(status.get("name") or "status")
    state = str(status.get("status") or "")
    url = status.get("target_url") or None
    allowed = bool(status.get("allow_failure"))
    if state in _GREEN:
        return Signal(f"{name} ({state})", "success", url, name)
    if state == "manual":
        # A manual job waits for a person: it holds the pipeline only when it blocks it.
        return None if allowed else Signal(f"{name} (manual)", "pending", url, name)
    if state in _RUNNING:
        return Signal(f"{name} ({state})", "pending", url, name)
    if allowed:
        return Signal(f"{name} ({state}, allowed to fail)", "success", url, name)
    return Signal(f"{name} ({state})", "failure", url, name)


def _from_pipeline(pipeline: Json, signals: Sequence[Signal]) -> Signal | None:
    """The newest pipeline, when its jobs do not already say what it says."""
    state = str(pipeline.get("status") or "")
    name = f"pipeline #{pipeline.get('id')}"
    url = pipeline.get("web_url") or None
    if state in ("failed", "canceled") and not any(s.state == "failure" for s in signals):
        return Signal(f"{name} ({state})", "failure", url, name)
    if state in _RUNNING and not any(s.state == "pending" for s in signals):
        return Signal(f"{name} ({state})", "pending", url, name)
    if state in _GREEN and not signals:
        return Signal(f"{name} ({state})", "success", url, name)
    return None


def combine(pipelines: Sequence[Json], statuses: Sequence[Json]) -> Pipeline:
    """The pipeline of a sha from its pipelines (newest first) and its latest statuses."""
    signals = [s for s in map(_from_status, statuses) if s is not None]
    if pipelines:
        newest = _from_pipeline(pipelines[0], signals)
        if newest is not None:
            signals.append(newest)
    return combine_signals(signals)


class PipelineReader:
    """A commit's pipeline: its newest pipelines and its latest commit statuses."""

    def __init__(self, api: GitLabApi) -> None:
        self._api = api

    def read(self, sha: str) -> Pipeline:
        pipelines = self._api.get(
            f"list the pipelines of {sha[:12]}",
            "/pipelines",
            {"sha": sha, "order_by": "id", "sort": "desc", "per_page": 5},
        )
        statuses = self._api.all_pages(
            f"list the statuses of {sha[:12]}", f"/repository/commits/{sha}/statuses"
        )
        newest = (
            [p for p in pipelines if isinstance(p, dict)] if isinstance(pipelines, list) else []
        )
        return combine(newest, statuses)
