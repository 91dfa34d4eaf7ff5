"""``cpe status [--watch]``: where things are, from the journal and the tracker, without an
engine: the engine's life, the pause, costs, the baseline, the merge queue, items, revisions,
retries, planner waits, runs and model accounts."""

from __future__ import annotations

import contextlib
import io
import signal
import sys
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from adapters.cli.common import fail, read_journal
from adapters.cli.liveness import EngineStatus, engine_status, read_lock
from adapters.cli.provider_settings import NAMES, ProviderKind
from adapters.cli.providers import local_forge_revisions, open_local_tracker
from adapters.cli.repository import CONFIG_NAME, default_branch, git_toplevel, resolve_config
from adapters.cli.settings import CpeConfig, parse_config
from adapters.describe.landing import print_queue
from adapters.describe.plain import plain
from adapters.describe.runs import describe_run, run_where
from domain.errors import ConfigError
from domain.models import ACTIVE_RUN_STATUSES, EngineState, Revision, WorkItem, item_ref
from domain.selectors import open_blockers, ordered
from domain.signals import clock, describe_signal, describe_windows

WATCH_INTERVAL = 1.0  # seconds between two frames of cpe status --watch


def status(config_path: Path | None, repo: Path | None, *, watch: bool = False) -> int:
    try:
        try:
            config, root = resolve_config(config_path, repo)
        except ConfigError as exc:
            # Read-only: a broken supervisor.toml (being edited) must not hide the state.
            config, root = _with_defaults(config_path, repo, exc)
        branch = default_branch(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if not watch:
        _status(config, root, branch)
        return 0
    # Each frame is made whole, then drawn at once: on a terminal over the last one (cursor
    # home, clear), elsewhere one after the other with a line of its own between them.
    tty = sys.stdout.isatty()
    # Ctrl-C asks the loop to end after the frame it is drawing, rather than raising
    # KeyboardInterrupt wherever it lands: one that lands in a library's callback (pydantic
    # building a validator) is printed as "ignored" and lost, and the watch went on for ever.
    # A second Ctrl-C interrupts at once.
    stop = threading.Event()

    def interrupted(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        while not stop.is_set():
            frame = io.StringIO()
            with contextlib.redirect_stdout(frame):
                _status(config, root, branch)
            stamp = datetime.now(UTC).strftime("%H:%M:%S")
            head = "\x1b[H\x1b[2J" if tty else ""
            sys.stdout.write(
                f"{head}{frame.getvalue()}\n-- {stamp}, every {WATCH_INTERVAL:g} s; Ctrl-C ends\n"
            )
            sys.stdout.flush()
            stop.wait(WATCH_INTERVAL)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    return 0


def _status(config: CpeConfig, root: Path, branch: str) -> None:
    state_dir = root / config.engine.state_dir
    lock = read_lock(state_dir)  # before the journal: a stop meanwhile is in what it reads
    state, last_event = read_journal(state_dir)
    engine = engine_status(lock, state.engine, last_event)
    print(engine.line)
    print(f"repository {root} (default branch {branch}), state in {state_dir}")
    print(config.provider.describe())
    _print_pause(state, config)
    _print_costs(state, config)
    _print_baseline(state, config)
    _print_merge_waits(state)
    print_queue(state, config.workflow)
    _print_tracked(config, root, branch, state)
    _print_ignored(state)
    _print_retries(state, config)
    _print_skipped_specs(state)
    _print_planner_waits(state, config)
    _print_runs(state, state_dir, engine)
    _print_quota(state, config)


def _print_tracked(config: CpeConfig, root: Path, branch: str, state: EngineState) -> None:
    """The work items and the revisions: the local tracker's and the local forge's as they
    are; on GitHub, GitLab, Linear or Jira, as the engine last saw them (its journal: no token
    needed)."""
    section = config.provider
    revisions: list[Revision] | None = None
    tracker = open_local_tracker(config, root, branch)
    if tracker is None:
        _print_seen(section.work_items_kind, section.where(section.work_items_kind))
        _print_items(state.work_items.values(), state)
        revisions = local_forge_revisions(config, root, branch)  # the local forge's, as they are
    else:
        try:
            _print_items(tracker.work_item_reader.list_work_items(), state)
            if tracker.revision_reader is not None:
                revisions = list(tracker.revision_reader.list_revisions())
        finally:
            tracker.close()
    if revisions is None:
        if tracker is not None:  # the items are here, the revisions on the forge
            _print_seen(section.revisions_kind, section.where(section.revisions_kind))
        revisions = list(state.revisions.values())
    _print_revisions(revisions)


def _print_seen(kind: ProviderKind, where: str) -> None:
    print(f"\n({NAMES[kind]} {where}: as the engine last saw it)")


def _print_costs(state: EngineState, config: CpeConfig) -> None:
    """Cost today (in the budget's time zone) and in all, against the budgets."""
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    from domain.decisions import spent_since  # noqa: PLC0415

    budget = config.budget
    now = datetime.now(ZoneInfo(budget.timezone))
    today = spent_since(state, now.replace(hour=0, minute=0, second=0, microsecond=0))
    total = sum(run.cost_usd or 0.0 for run in state.agent_runs.values())
    limit = f" of ${budget.per_day_usd:.2f} a day" if budget.per_day_usd else ""
    print(f"\ncost: ${today:.2f} today{limit}, ${total:.2f} in all (cpe costs: the details)")


def _print_pause(state: EngineState, config: CpeConfig) -> None:
    """A person's pause, and the breaker's as the engine judges it (``breaker_pause``): runs
    failing under the agent, or the model API down as live runs report it."""
    from domain.requests import describe_pause  # noqa: PLC0415

    if state.manual_pause is not None:
        print(f"\ndispatch paused {describe_pause(state)}")
        print("  no agent run starts until cpe resume; runs under way go on")

    pause = config.breaker.pause(state)
    if pause is None:
        return
    reason = " ".join(pause.reason.split())[:500]
    if pause.outage:
        print(f"\ndispatch paused: {reason}")
        print(f"  {pause.failures} retries by live runs with no answer in between")
    else:
        print(f"\ndispatch paused: {pause.failures} agent runs in a row failed under the agent")
        print(f"  last reason: {reason}")
    when = pause.until.strftime("%Y-%m-%d %H:%M:%S UTC")
    if pause.until > datetime.now(UTC):
        print(f"  probing at {when} (no attempt is spent meanwhile)")
    else:
        print(f"  the pause ended at {when}: the next run is a probe, and decides")


def _print_baseline(state: EngineState, config: CpeConfig) -> None:
    """The default branch's pipeline, when it is red: revisions are judged against it (the
    dashboard's banner says the same: ``domain.landing.describe_baseline``)."""
    from domain.landing import describe_baseline  # noqa: PLC0415

    red = describe_baseline(state, charge_baseline=config.workflow.charge_baseline_failures)
    if red is None:
        return
    print(f"\n{red.headline}")
    for line in (*red.failure, *([f"log: {red.url}"] if red.url else []), *red.means):
        print(f"  {line}")


def _print_retries(state: EngineState, config: CpeConfig) -> None:
    """Items whose last run failed, waiting for their retry (domain.decisions
    .implementor_backoff), with the time and why."""
    from domain.decisions import implementor_backoff  # noqa: PLC0415

    w, now = config.workflow, datetime.now(UTC)
    lines = []
    for wid in ordered(state.work_items):
        if state.work_items[wid].status not in ("pending", "needs-refinement"):
            continue
        retry = implementor_backoff(
            state, wid, initial=w.retry_backoff_initial, maximum=w.retry_backoff_max
        )
        if retry is not None and retry.until > now:
            when = retry.until.strftime("%Y-%m-%d %H:%M:%S UTC")
            lines.append(f"  {item_ref(wid):<5} retry at {when} (attempt {retry.attempt} failed)")
            lines.append(f"      why: {' '.join(retry.reason.split())[:500]}")
    if lines:
        print("\nretries waiting (a failed attempt backs off before the next)")
        print("\n".join(lines))


def _print_merge_waits(state: EngineState) -> None:
    """Approved revisions whose merge the provider refused for now (branch protection, a
    checkout in the way)."""
    if not state.merge_waits:
        return
    print("\nmerges held by the provider (tried again on every poll)")
    for rid, wait in sorted(state.merge_waits.items()):
        since = wait.since.strftime("%Y-%m-%d %H:%M:%S UTC") if wait.since else "?"
        tries = f"{wait.tries} {'try' if wait.tries == 1 else 'tries'}"
        print(f"  revision {rid} (work item {item_ref(wait.work_item_id)}) since {since}, {tries}")
        print(f"    {' '.join(wait.reason.split())[:300]}")


def _print_ignored(state: EngineState) -> None:
    """Tracker items that are not work (not trusted, a required label missing), and why."""
    from domain.selectors import ordered  # noqa: PLC0415

    if not state.ignored:
        return
    print("\nignored on the tracker (never worked on; see docs/security.md)")
    for wid in ordered(state.ignored):
        item = state.ignored[wid]
        print(f"  {item_ref(item.id)} {item.title[:80]!r}: ignored: {item.reason}")


def _print_skipped_specs(state: EngineState) -> None:
    skipped = [spec for spec in state.specs.values() if spec.problem]
    if skipped:
        print("\nspecs skipped (planned again once they change)")
        for spec in skipped:
            print(f"  {spec.path}\n    {spec.problem}")


def _print_planner_waits(state: EngineState, config: CpeConfig) -> None:
    """Specs whose planner runs failed: when the next run is due, or that they wait for a new
    version after ``max_attempts`` failures (domain.decisions.planner_backoff)."""
    from domain.decisions import planner_backoff  # noqa: PLC0415
    from domain.selectors import planner_failures, specs_to_plan, spent_on_spec  # noqa: PLC0415

    w = config.workflow
    lines = []
    budget = config.budget.per_spec_usd
    for path, sha in specs_to_plan(state).items():
        spent = spent_on_spec(state, path, sha)
        if budget and spent >= budget:
            why = (
                f"its planner runs spent [budget] per_spec_usd (${spent:.2f} of ${budget:g}): "
                "planned again once it changes"
            )
            lines.append(f"  {path}\n    {why}")
            continue
        failures = planner_failures(state, path, sha)
        if not failures:
            continue
        if failures >= w.max_attempts:
            why = f"{failures} planner runs failed on this version: planned again once it changes"
            lines.append(f"  {path}\n    {why}")
            continue
        wait = planner_backoff(
            state, {path: sha}, initial=w.retry_backoff_initial, maximum=w.retry_backoff_max
        )
        when = wait.until.strftime("%Y-%m-%d %H:%M:%S UTC") if wait else "now"
        lines.append(f"  {path}\n    {failures} planner run(s) failed; next try at {when}")
    if lines:
        print("\nspecs the planner failed on (last failure under recent agent runs)")
        print("\n".join(lines))


def _print_items(items: Iterable[WorkItem], state: EngineState) -> None:
    """Each item with its status, what its ended runs cost (``?``: a run's cost is unknown)
    and its open blockers."""
    print("\nwork items")
    by_id = {item.id: item for item in items}
    if not by_id:
        print("  (none)")
    costs: dict[str, list[float | None]] = {}
    for run in state.agent_runs.values():
        if run.work_item_id is not None and run.ended_at is not None:
            costs.setdefault(run.work_item_id, []).append(run.cost_usd)
    width = max([5, *(len(item_ref(wid)) for wid in by_id)])  # #7, ENG-12, PROJ-1234
    for wid in ordered(by_id):
        item = by_id[wid]
        blockers = ", ".join(b if "#" in b else item_ref(b) for b in open_blockers(item, by_id))
        blocked = f"  blocked by {blockers}" if blockers else ""
        runs = costs.get(item.id, [])
        cost = f"${sum(c or 0.0 for c in runs):.2f}{'?' if None in runs else ''}"
        title = plain(item.title)
        print(f"  {item_ref(item.id):<{width}} {item.status:<17} {cost:<8} {title}{blocked}")


def _print_revisions(revisions: Sequence[Revision]) -> None:
    print("\nrevisions")
    if not revisions:
        print("  (none)")
    for r in revisions:
        item = f"work item {item_ref(r.work_item_id)}" if r.work_item_id else "no work item"
        print(
            f"  {r.id:<6} {r.state:<7} pipeline {r.pipeline.status:<8} head {r.head_sha[:10]}  "
            f"{item}  {plain(r.title)}"
        )


RECENT_RUNS = 20


def _print_quota(state: EngineState, config: CpeConfig) -> None:
    """Each model account's headroom as its runs last reported it, and a hold on it: a spent
    usage window until its reset, or ``[runtime.quota] pause_at`` reached."""
    from domain.decisions import quota_hold  # noqa: PLC0415

    if not state.quota:
        return
    now = datetime.now(UTC)
    quota = config.runtime.quota
    print("\nmodel accounts (usage as their runs last reported it)")
    for account, held in sorted(state.quota.items()):
        seen = f", reported {clock(held.reported_at)}" if held.reported_at else ""
        print(f"  {account}: {describe_windows(held.windows)}{seen}")
        hold = quota_hold(state, account, now, margin=quota.margin, pause_at=quota.pause_at)
        if hold is not None:
            resumes = clock(hold.until)
            print(f"      dispatch paused for {account}: {hold.reason}; resumes at {resumes}")


def _print_runs(state: EngineState, state_dir: Path, engine: EngineStatus) -> None:
    """Runs still active last (their duration so far), the recent ones before them. With no
    engine running, runs the journal leaves active are shown as the engine left them, each
    with its duration up to the stop."""
    runs = list(state.agent_runs.values())
    active = [run for run in runs if run.status in ACTIVE_RUN_STATUSES]
    ended = [run for run in runs if run.status not in ACTIVE_RUN_STATUSES]
    now = datetime.now(UTC)
    stopped = None if engine.running else (engine.stopped_at or now)
    left = "agent runs left active when the engine stopped (the next start ends them)"
    for title, shown in (
        ("active agent runs (duration so far)" if stopped is None or not active else left, active),
        (f"recent agent runs (the last {RECENT_RUNS}, newest last)", ended[-RECENT_RUNS:]),
    ):
        print(f"\n{title}")
        if not shown:
            print("  (none)")
        for run in shown:
            where = run_where(state_dir, run.session_id)
            print("  " + describe_run(run, where, now=now, stopped_at=stopped))
            if run.signal is not None and run.status in ACTIVE_RUN_STATUSES and stopped is None:
                print(f"      {describe_signal(run.signal)}")  # retrying …, rate-limited …
            if run.failure_reason:  # the whole reason, on its own line
                label = "infrastructure failure" if run.failure_class == "infrastructure" else "why"
                print(f"      {label}: {plain(' '.join(run.failure_reason.split()))}")


def _with_defaults(
    config_path: Path | None, repo: Path | None, error: ConfigError
) -> tuple[CpeConfig, Path]:
    """The default settings on the repository a configuration that cannot be read was for,
    said on stderr in one line; ``error`` itself when there is no repository to read."""
    try:
        root = git_toplevel((repo or (config_path or Path.cwd() / CONFIG_NAME).parent).resolve())
    except ConfigError:
        raise error from None
    config = parse_config({})
    print(
        f"cpe: warning: configuration error: {error}; shown with the default settings "
        f"(state in {root / config.engine.state_dir})",
        file=sys.stderr,
    )
    return config, root
