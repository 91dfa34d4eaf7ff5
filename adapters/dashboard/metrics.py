"""``GET /metrics``: the engine in Prometheus' text exposition format (version 0.0.4).

Run counters come from the run history the journal keeps (they carry over a restart); gauges are
read when scraped. Runs are labelled by ``role``, ``runtime`` (the runtime the configuration
gives the role) and, once ended, ``outcome`` (their terminal status).

The merge queue's families are read from the state too: its entries and held merges now, the
landings ever made (``EngineState.landings_total``), the items holding a send-back (the state
keeps only each item's latest), and summaries over the landings the state keeps (the last 50).

So is the model's side, as live runs reported it (``AgentSignalled``): each model account's
usage windows (utilization, reset) and whether a hold keeps its runs from starting, the live runs
whose CLI is retrying the model API by cause, and dispatch paused by an ``outage`` of it apart
from the ``breaker``'s pause for runs failing under the agent.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, get_args

from adapters.dashboard.source import Source
from adapters.dashboard.views import queue_entries
from adapters.host.metering import ProviderMeter
from domain.models import AGENT_ROLES, STATUSES, AgentRun, EngineState, RetryCause

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DURATION_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
QUANTILES = (0.5, 0.9, 0.99)


def render_metrics(source: Source, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    state = source.state()
    runs = list(state.agent_runs.values())
    out: list[str] = []

    started = Counter((run.role, source.runtime(run.role)) for run in runs)
    _family(
        out,
        "cpe_runs_started_total",
        "counter",
        "agent runs requested",
        started,
        ("role", "runtime"),
    )
    ended = Counter(
        (run.role, source.runtime(run.role), run.status) for run in runs if run.is_terminal
    )
    _family(
        out,
        "cpe_runs_ended_total",
        "counter",
        "agent runs ended, by outcome (their terminal status)",
        ended,
        ("role", "runtime", "outcome"),
    )
    active = Counter({(role, source.runtime(role)): 0 for role in AGENT_ROLES})
    active.update((run.role, source.runtime(run.role)) for run in runs if run.is_active)
    _family(out, "cpe_runs_active", "gauge", "agent runs under way", active, ("role", "runtime"))
    _histogram(out, source, runs)
    cost: dict[tuple[str], float] = {(role,): 0.0 for role in AGENT_ROLES}
    for run in runs:
        cost[(run.role,)] += run.cost_usd or 0.0
    _family(
        out,
        "cpe_run_cost_usd_total",
        "counter",
        "what agent runs cost, as reported",
        cost,
        ("role",),
    )

    items = Counter({(status,): 0 for status in STATUSES})
    items.update((item.status,) for item in state.work_items.values())
    _family(out, "cpe_work_items", "gauge", "work items by status", items, ("status",))
    _family(
        out,
        "cpe_queue_depth",
        "gauge",
        "events queued for the engine",
        {(): source.queue_depth()},
        (),
    )
    paused = {("person",): 0, ("breaker",): 0, ("outage",): 0}
    for pause in source.pauses(state, now):
        paused[(pause.by,)] = 1
    _family(
        out,
        "cpe_dispatch_paused",
        "gauge",
        "1 while dispatch is paused, by cause (a person; the breaker, for runs failing under the "
        "agent; an outage of the model API, as live runs report it)",
        paused,
        ("cause",),
    )
    _model(out, source, state, now)
    _merge_queue(out, source, state)
    _provider(out, source)
    return "\n".join(out) + "\n"


def _histogram(out: list[str], source: Source, runs: Iterable[AgentRun]) -> None:
    name = "cpe_run_duration_seconds"
    out.append(f"# HELP {name} how long ended agent runs took, from start to end")
    out.append(f"# TYPE {name} histogram")
    for role in AGENT_ROLES:
        durations = [
            (run.ended_at - run.started_at).total_seconds()
            for run in runs
            if run.role == role and run.started_at and run.ended_at
        ]
        labels = f'role="{role}",runtime="{_escape(source.runtime(role))}"'
        for bound in DURATION_BUCKETS:
            count = sum(1 for d in durations if d <= bound)
            out.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {count}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {len(durations)}')
        out.append(f"{name}_sum{{{labels}}} {_number(sum(durations))}")
        out.append(f"{name}_count{{{labels}}} {len(durations)}")


def _model(out: list[str], source: Source, state: EngineState, now: datetime) -> None:
    """The model accounts' usage windows and holds, and the live runs retrying the model API."""
    used: dict[tuple[str, str], float] = {}
    resets: dict[tuple[str, str], float] = {}
    for account, quota in state.quota.items():
        for window in quota.windows:
            if window.utilization is not None:
                used[(account, window.name)] = window.utilization
            if window.resets_at is not None:
                resets[(account, window.name)] = window.resets_at.timestamp()
    _family(
        out,
        "cpe_model_quota_utilization",
        "gauge",
        "how much of a model account's usage window is used (0..1), as its runs last reported it",
        used,
        ("account", "window"),
    )
    _family(
        out,
        "cpe_model_quota_resets_at_seconds",
        "gauge",
        "when a model account's usage window resets (unix time), as its runs last reported it",
        resets,
        ("account", "window"),
    )
    holds = source.holds(state, now)
    _family(
        out,
        "cpe_model_quota_held",
        "gauge",
        "1 while no run starts on a model account (a spent usage window until its reset, or "
        "[runtime.quota] pause_at reached)",
        {(account,): int(account in holds) for account in source.accounts(state)},
        ("account",),
    )
    retrying = Counter({(cause,): 0 for cause in get_args(RetryCause)})
    retrying.update(
        (run.signal.cause or "other",)
        for run in state.agent_runs.values()
        if run.is_active and run.signal is not None and run.signal.kind == "retrying"
    )
    _family(
        out,
        "cpe_agent_runs_retrying",
        "gauge",
        "live agent runs whose CLI is retrying the model API (their last word on it), by cause",
        retrying,
        ("cause",),
    )


def _merge_queue(out: list[str], source: Source, state: EngineState) -> None:
    _family(
        out,
        "cpe_merge_queue_length",
        "gauge",
        "approved revisions in the merge queue, held ones included",
        {(): len(queue_entries(source, state))},
        (),
    )
    _family(
        out,
        "cpe_merge_queue_held",
        "gauge",
        "merges the provider holds for now (branch protection, a checkout in the way)",
        {(): len(state.merge_waits)},
        (),
    )
    _family(
        out,
        "cpe_landings_total",
        "counter",
        "revisions cpe merged",
        {(): state.landings_total},
        (),
    )
    back = Counter({("conflict",): 0, ("failed",): 0})
    back.update(
        (report.problem,)
        for wid, report in state.sent_back.items()
        if wid in state.work_items and state.work_items[wid].status != "done"
    )
    _family(
        out,
        "cpe_merge_queue_sent_back_items",
        "gauge",
        "items not done whose latest send-back by the merge queue stands, by problem",
        back,
        ("problem",),
    )
    kept = state.landed
    _summary(
        out,
        "cpe_merge_queue_wait_seconds",
        "time from approval to merge, over the last landings the state keeps (50 at most)",
        [(x.at - x.approved_at).total_seconds() for x in kept if x.at and x.approved_at],
    )
    _summary(
        out,
        "cpe_merge_queue_tests_per_landing",
        "pipeline runs the merge queue spent on a landing (0: it was up to date already), over "
        "the last landings the state keeps (50 at most)",
        [float(x.tests) for x in kept],
    )


def _summary(out: list[str], name: str, text: str, values: list[float]) -> None:
    """A summary over ``values``: nearest-rank quantiles (none without a value), sum, count."""
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} summary")
    ranked = sorted(values)
    if ranked:
        for q in QUANTILES:
            value = ranked[max(0, math.ceil(q * len(ranked)) - 1)]
            out.append(f'{name}{{quantile="{q:g}"}} {_number(value)}')
    out.append(f"{name}_sum {_number(sum(ranked))}")
    out.append(f"{name}_count {len(ranked)}")


def _provider(out: list[str], source: Source) -> None:
    out.extend(provider_metrics(source.meter))


def provider_metrics(meter: ProviderMeter) -> list[str]:
    """The provider's families: the engine's calls and their errors, and what went over the wire
    to each remote system (``system`` label), GitHub's also under the names it had alone."""
    out: list[str] = []
    calls, errors = meter.snapshot()
    _family(
        out,
        "cpe_provider_requests_total",
        "counter",
        "calls the engine made to its provider, by port and method",
        calls,
        ("port", "method"),
    )
    _family(
        out,
        "cpe_provider_errors_total",
        "counter",
        "provider calls that failed, by kind (rate-limited, not-found, conflict, transient, "
        "permanent)",
        errors,
        ("port", "method", "kind"),
    )
    limited = sum(count for (_, _, kind), count in errors.items() if kind == "rate-limited")
    wire = meter.wire() if meter.wire is not None else None
    if wire is not None:
        limited = max(limited, wire.rate_limited)
    _family(
        out,
        "cpe_provider_rate_limited_total",
        "counter",
        "provider answers that said the rate limit was hit",
        {(): limited},
        (),
    )
    wires = {system: stats() for system, stats in meter.wires.items()}
    for name, kind, text, field in (
        ("cpe_provider_http_requests_total", "counter", "HTTP requests sent", "requests"),
        ("cpe_provider_not_modified_total", "counter", "of them answered 304", "not_modified"),
        ("cpe_provider_retries_total", "counter", "reads retried after a wait", "retries"),
        (
            "cpe_provider_rate_limit_remaining",
            "gauge",
            "requests left in the system's rate limit window",
            "rate_remaining",
        ),
    ):
        samples = {
            (system,): getattr(stats, field)
            for system, stats in sorted(wires.items())
            if getattr(stats, field) is not None
        }
        if samples:
            _family(out, name, kind, f"{text}, by remote system", samples, ("system",))
    github = wires.get("github")
    if github is None:
        return out
    # The names these figures had when GitHub was the only remote system, kept for dashboards
    # built on them: GitHub's own figures, never another system's.
    for name, kind, text, value in (
        (
            "cpe_github_http_requests_total",
            "counter",
            "HTTP requests sent to GitHub",
            github.requests,
        ),
        (
            "cpe_github_not_modified_total",
            "counter",
            "of them answered 304 (free)",
            github.not_modified,
        ),
        ("cpe_github_retries_total", "counter", "reads retried after a wait", github.retries),
    ):
        _family(out, name, kind, text, {(): value}, ())
    if github.rate_remaining is not None:
        _family(
            out,
            "cpe_github_rate_limit_remaining",
            "gauge",
            "requests left in GitHub's rate limit window",
            {(): github.rate_remaining},
            (),
        )
    return out


def _family(  # noqa: PLR0917 - one line per metric family reads best positionally
    out: list[str],
    name: str,
    kind: str,
    text: str,
    samples: Mapping[Any, float],
    labels: tuple[str, ...],
) -> None:
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} {kind}")
    for values, value in sorted(samples.items()):
        pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in zip(labels, values, strict=True))
        out.append(f"{name}{{{pairs}}} {_number(value)}" if pairs else f"{name} {_number(value)}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
