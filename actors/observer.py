"""What the engine says about each processed event besides its handlers' work.

The ``Observer`` runs on the engine's thread after an event is applied and before its handlers
run: it tells the watchers (``Engine.watch``: the console, the dashboard) and logs what a
person must know that no command shows: a spec version the planner gave up on (its attempts
or its planning budget spent), the default
branch's pipeline turning red or green again.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from domain.events import AgentFailed, BaselineChanged, EngineEvent
from domain.handlers.options import HandlerOptions
from domain.models import AgentRun, Baseline, EngineState
from domain.selectors import planner_failures, spent_on_spec

log = structlog.get_logger("cpe.engine")

Watcher = Callable[[EngineEvent, EngineState, EngineState], None]
"""Told of every processed event: ``(event, state before, state after)``."""


class Observer:
    def __init__(self, options: HandlerOptions):
        self.options = options
        self._watchers: list[Watcher] = []
        self._baseline_said: tuple[str, str] | None = None  # the baseline the log last told

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def __call__(self, event: EngineEvent, before: EngineState, state: EngineState) -> None:
        """Tell the watchers; say so when a failed planner run leaves a spec version with no
        attempt left (it is not planned again until it changes), and when the default branch's
        pipeline is red."""
        for watcher in list(self._watchers):
            try:
                watcher(event, before, state)
            except Exception:
                log.exception("an event watcher failed", watcher=repr(watcher))
        if isinstance(event, BaselineChanged):
            self._baseline(event.baseline)
            return
        if not (isinstance(event, AgentFailed) and event.role == "planner"):
            return
        run = state.agent_runs.get(event.session_id)
        if run is None:
            return
        self._spec_budget(run, before, state)
        if run.failure_class == "infrastructure":
            return
        limit = self.options.max_attempts
        for path, sha in run.spec_shas.items():
            if planner_failures(state, path, sha) == limit:
                log.error(
                    "spec not planned again until it changes",
                    spec=path,
                    blob_sha=sha[:12],
                    failed_planner_runs=limit,
                    last_failure=" ".join((event.reason or "").split())[:300],
                )

    def _spec_budget(self, run: AgentRun, before: EngineState, state: EngineState) -> None:
        """Say so when this failed planner run spent a spec version's planning budget."""
        budget = self.options.spec_budget_usd
        if budget is None:
            return
        for path, sha in run.spec_shas.items():
            spent = spent_on_spec(state, path, sha)
            if spent >= budget > spent_on_spec(before, path, sha):
                log.error(
                    "spec not planned again until it changes: its planning budget is spent",
                    spec=path,
                    blob_sha=sha[:12],
                    spent_usd=round(spent, 4),
                    per_spec_usd=budget,
                )

    def _baseline(self, baseline: Baseline) -> None:
        pipeline = baseline.pipeline
        said = (baseline.sha, pipeline.status)
        if said == self._baseline_said or pipeline.status == "pending":
            return
        before, self._baseline_said = self._baseline_said, said
        if pipeline.status == "failure":
            charged = self.options.charge_baseline_failures
            log.error(
                "the default branch's pipeline is red",
                head_sha=baseline.sha[:12],
                failed_checks=list(pipeline.failed_checks),
                reason=" ".join((pipeline.reason or "").split())[-500:],
                log_url=pipeline.url,
                revisions_failing_the_same_checks="charged to the implementor"
                if charged
                else "reviewed, not charged, not merged automatically",
            )
        elif before is not None and before[1] == "failure":
            log.info("the default branch's pipeline is green again", head_sha=baseline.sha[:12])
