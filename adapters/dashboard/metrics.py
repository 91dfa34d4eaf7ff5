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

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import get_args

from adapters.dashboard.exposition import escape, family, number, summary
from adapters.dashboard.source import Source
from adapters.dashboard.views import queue_entries
from adapters.host.metering import ProviderMeter
from adapters.host.webhooks.stats import Snapshot as WebhookSnapshot
from adapters.host.webhooks.verify import VENDORS
from domain.models import AGENT_ROLES, STATUSES, AgentRun, EngineState, RetryCause

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DURATION_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)


def render_metrics(
    source: Source, now: datetime | None = None, *, webhooks: WebhookSnapshot | None = None
) -> str:
    now = now or datetime.now(UTC)
    state = source.state()
    runs = list(state.agent_runs.values())
    out: list[str] = []

    started = Counter((run.role, source.runtime(run.role)) for run in runs)
    family(
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
    family(
        out,
        "cpe_runs_ended_total",
        "counter",
        "agent runs ended, by outcome (their terminal status)",
        ended,
        ("role", "runtime", "outcome"),
    )
    active = Counter({(role, source.runtime(role)): 0 for role in AGENT_ROLES})
    active.update((run.role, source.runtime(run.role)) for run in runs if run.is_active)
    family(out, "cpe_runs_active", "gauge", "agent runs under way", active, ("role", "runtime"))
    _histogram(out, source, runs)
    cost: dict[tuple[str], float] = {(role,): 0.0 for role in AGENT_ROLES}
    for run in runs:
        cost[(run.role,)] += run.cost_usd or 0.0
    family(
        out,
        "cpe_run_cost_usd_total",
        "counter",
        "what agent runs cost, as reported",
        cost,
        ("role",),
    )

    items = Counter({(status,): 0 for status in STATUSES})
    items.update((item.status,) for item in state.work_items.values())
    family(out, "cpe_work_items", "gauge", "work items by status", items, ("status",))
    family(
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
    family(
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
    if webhooks is not None:
        out.extend(webhook_metrics(webhooks))
    return "\n".join(out) + "\n"


def webhook_metrics(stats: WebhookSnapshot) -> list[str]:
    """The webhook receiver's families: deliveries by vendor and outcome (accepted, duplicate,
    ignored, refused), refusals by reason, the polls deliveries asked for, and the delay from a
    delivery to the engine's first event from the poll it triggered (over the last 1000)."""
    out: list[str] = []
    deliveries: Counter[tuple[str, str]] = Counter({(v, "accepted"): 0 for v in VENDORS})
    deliveries.update(stats.deliveries)
    family(
        out,
        "cpe_webhook_deliveries_total",
        "counter",
        "webhook deliveries received, by vendor and outcome",
        deliveries,
        ("vendor", "outcome"),
    )
    family(
        out,
        "cpe_webhook_refusals_total",
        "counter",
        "webhook deliveries refused, by vendor and reason (signature, stale, size, type, "
        "unconfigured, malformed)",
        stats.refusals,
        ("vendor", "reason"),
    )
    family(
        out,
        "cpe_webhook_polls_total",
        "counter",
        "polls webhook deliveries asked of the engine, by poller (coalesced)",
        {(name,): count for name, count in stats.polls.items()},
        ("poller",),
    )
    summary(
        out,
        "cpe_webhook_dispatch_delay_seconds",
        "from a webhook delivery to the engine's first event from the poll it triggered "
        "(quantiles over the last 1000)",
        stats.delays,
        total=(stats.delay_sum, stats.delay_count),
    )
    return out


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
        labels = f'role="{role}",runtime="{escape(source.runtime(role))}"'
        for bound in DURATION_BUCKETS:
            count = sum(1 for d in durations if d <= bound)
            out.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {count}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {len(durations)}')
        out.append(f"{name}_sum{{{labels}}} {number(sum(durations))}")
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
    family(
        out,
        "cpe_model_quota_utilization",
        "gauge",
        "how much of a model account's usage window is used (0..1), as its runs last reported it",
        used,
        ("account", "window"),
    )
    family(
        out,
        "cpe_model_quota_resets_at_seconds",
        "gauge",
        "when a model account's usage window resets (unix time), as its runs last reported it",
        resets,
        ("account", "window"),
    )
    holds = source.holds(state, now)
    family(
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
    family(
        out,
        "cpe_agent_runs_retrying",
        "gauge",
        "live agent runs whose CLI is retrying the model API (their last word on it), by cause",
        retrying,
        ("cause",),
    )


def _merge_queue(out: list[str], source: Source, state: EngineState) -> None:
    family(
        out,
        "cpe_merge_queue_length",
        "gauge",
        "approved revisions in the merge queue, held ones included",
        {(): len(queue_entries(source, state))},
        (),
    )
    family(
        out,
        "cpe_merge_queue_held",
        "gauge",
        "merges the provider holds for now (branch protection, a checkout in the way)",
        {(): len(state.merge_waits)},
        (),
    )
    family(
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
    family(
        out,
        "cpe_merge_queue_sent_back_items",
        "gauge",
        "items not done whose latest send-back by the merge queue stands, by problem",
        back,
        ("problem",),
    )
    kept = state.landed
    summary(
        out,
        "cpe_merge_queue_wait_seconds",
        "time from approval to merge, over the last landings the state keeps (50 at most)",
        [(x.at - x.approved_at).total_seconds() for x in kept if x.at and x.approved_at],
    )
    summary(
        out,
        "cpe_merge_queue_tests_per_landing",
        "pipeline runs the merge queue spent on a landing (0: it was up to date already), over "
        "the last landings the state keeps (50 at most)",
        [float(x.tests) for x in kept],
    )


def _provider(out: list[str], source: Source) -> None:
    out.extend(provider_metrics(source.meter))


def provider_metrics(meter: ProviderMeter) -> list[str]:
    """The provider's families: the engine's calls and their errors, and what went over the wire
    to each remote system (``system`` label), GitHub's also under the names it had alone."""
    out: list[str] = []
    calls, errors = meter.snapshot()
    family(
        out,
        "cpe_provider_requests_total",
        "counter",
        "calls the engine made to its provider, by port and method",
        calls,
        ("port", "method"),
    )
    family(
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
    family(
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
            family(out, name, kind, f"{text}, by remote system", samples, ("system",))
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
        family(out, name, kind, text, {(): value}, ())
    if github.rate_remaining is not None:
        family(
            out,
            "cpe_github_rate_limit_remaining",
            "gauge",
            "requests left in GitHub's rate limit window",
            {(): github.rate_remaining},
            (),
        )
    return out
