"""What each ``cpe`` subcommand does (the parser lives in ``adapters/cli/parser.py``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from actors.journal import Journal
from adapters.cli.build import App, build_app
from adapters.cli.landing_view import print_queue
from adapters.cli.liveness import EngineStatus, alive, engine_status, read_lock
from adapters.cli.repository import CONFIG_NAME, default_branch, git_toplevel, resolve_config
from adapters.cli.services import prepare_services
from adapters.cli.settings import load_config, parse_config
from adapters.defaults import CLAUDE_DIR, SUPERVISOR_TOML
from adapters.runtime.records.activity import TRANSCRIPT, run_activity
from adapters.runtime.remote.placement import describe_node, read_placement
from domain.errors import ConfigError
from domain.events import ENGINE_LIFE_EVENTS, USER_EVENTS
from domain.models import ACTIVE_RUN_STATUSES, AgentRun, EngineState, SessionId, WorkItemId
from domain.selectors import natural_key, open_blockers, ordered
from domain.signals import clock, describe_signal, describe_windows
from domain.state import apply_event

if TYPE_CHECKING:  # the engine's modules are cpe run's own import (keeps cpe status quick)
    from actors.logs import LogFormat
    from actors.services import Services

WORKTREES_IGNORED = ".worktrees/"


def fail(message: str, code: int = os.EX_CONFIG) -> int:
    """One line on stderr (a journal or a terminal shows it whole), then ``code``."""
    print("cpe: " + " ".join(message.split()), file=sys.stderr)
    return code


# ---------------------------------------------------------------------------- run


def run(
    config_path: Path | None,
    repo: Path | None,
    *,
    new_journal: bool = False,
    stop_requested: threading.Event | None = None,
    log_format: LogFormat | None = None,
    agent_env: Mapping[str, str] | None = None,
    isolated_home: bool = False,
    codex_overrides: Sequence[str] = (),
) -> int:
    """``agent_env``, ``isolated_home``, ``codex_overrides``: as ``build_app`` takes them
    (``cpe run --scripted`` points every runtime at its scripted model)."""
    from actors.process import Watchdog, run_engine  # noqa: PLC0415
    from adapters.notify import notify  # noqa: PLC0415

    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    named = config.dashboard.token_env
    if config.dashboard.listen and named and not os.environ.get(named):
        return fail(
            f"configuration error: dashboard.token_env: the environment variable {named} is "
            "not set; expected a token in it, or token_env empty for a random one"
        )
    fmt, log_file = _start_logging(config, root, log_format)
    if (own_python := _own_python(config)) is not None:
        structlog.get_logger("cpe.cli").warning(own_python)
    apps: list[App] = []
    starters: list[Callable[[], Services]] = []
    services: list[Services] = []

    def build() -> Any:
        app = build_app(
            config_path,
            repo,
            new_journal=new_journal,
            agent_env=agent_env,
            isolated_home=isolated_home,
            codex_overrides=codex_overrides,
        )
        apps.append(app)
        try:  # a ConfigError: the dashboard's address cannot be used (exit 78)
            starters.append(prepare_services(app, human=fmt == "human"))
        except BaseException:
            app.engine.stop(reason="its services cannot start")  # never started: closes
            raise
        if fmt == "human":  # a person watches: the engine's decisions in words
            from adapters.console import Console  # noqa: PLC0415

            app.engine.watch(Console(sys.stderr, app.engine.queued))
        return app.engine

    health = Watchdog(config.engine.stall_timeout)

    def watchdog(engine: Any) -> None:
        alive(apps[-1].state_dir)  # after a kill -9, cpe status tells when it was last alive
        if health.healthy(engine):
            notify("WATCHDOG=1")

    def ready(engine: Any) -> None:
        services.append(starters[-1]())
        # once it runs (a refused start says one thing): where the whole log goes, and what
        # the agents will not see
        if log_file is not None:
            structlog.get_logger("cpe.cli").info("log file", path=str(log_file))
        _warn_uncommitted(root)
        notify("READY=1")

    def stopping() -> None:
        notify("STOPPING=1")

    def reload() -> None:
        notify("RELOADING=1")
        try:
            apps[-1].reload()
        finally:
            notify("READY=1")

    try:
        return run_engine(
            build,
            on_ready=ready,
            on_tick=watchdog,
            on_stopping=stopping,
            stop_requested=stop_requested,
            on_reload=reload,
        )
    finally:
        for service in services:
            service.stop()
        for app in apps:
            app.close()


# ---------------------------------------------------------------------------- init


def init(repo: Path) -> int:
    try:
        root = git_toplevel(repo.resolve(), "--repo PATH")
        existing = root / CONFIG_NAME  # its [engine] state_dir is the one to ignore
        config = load_config(existing) if existing.exists() else parse_config({})
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    ignored = [WORKTREES_IGNORED, _ignore_entry(root, config.engine.state_dir)]
    written: list[str] = []
    for source, target in _defaults(root):
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(str(target.relative_to(root)))
    gitignore = root / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    present = {line.strip().strip("/") for line in lines}
    missing = [entry for entry in ignored if entry.strip("/") not in present]
    if missing:
        with gitignore.open("a") as out:
            if lines and lines[-1].strip():
                out.write("\n")
            out.write("# cpe: agent worktrees and the engine's state\n")
            out.write("".join(f"{entry}\n" for entry in missing))
        written.append(".gitignore")
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("nothing to do: the repository is already set up")
    tops = dict.fromkeys(Path(path).parts[0] for path in written)  # .claude/…: .claude
    print(_NEXT_STEPS.format(paths=" ".join(tops) or "supervisor.toml .claude .gitignore"))
    b = config.budget
    print(
        f"\nbudgets ([budget] in supervisor.toml; 0 is none): ${b.per_run_usd:g} a run, "
        f"${b.per_item_usd:g} a work item, ${b.per_spec_usd:g} planning a spec version, "
        f"${b.per_day_usd:g} a day"
    )
    if (own_python := _own_python(config)) is not None:
        print(f"cpe: warning: {own_python}", file=sys.stderr)
    return 0


def _own_python(config: Any) -> str | None:
    """Why the local pipeline's command would fail on its PATH or run cpe's own Python, or None."""
    local = config.provider.local
    if config.provider.kind != "local" or not local.pipeline_command:
        return None
    from adapters.providers.local.pipeline import (  # noqa: PLC0415
        missing_program_warning,
        own_python_warning,
    )

    command = local.pipeline_command
    return missing_program_warning(command) or own_python_warning(command)


_NEXT_STEPS = """
next steps:
  1. read supervisor.toml (pipeline_command: your test command; auto_merge; concurrency)
  2. git add {paths} && git commit -m "cpe"   (agents see the committed default branch)
  3. give the agents a model: export ANTHROPIC_API_KEY=... (or a Claude login: claude login);
     for codex-cli roles, OPENAI_API_KEY or codex login
  4. cpe work add "a title" --body "what to do"   (or write specs under specs/)
  5. cpe run   (Ctrl-C stops it; cpe status shows where things are)"""


def _ignore_entry(root: Path, state_dir: str) -> str:
    """The ``.gitignore`` line for the state dir (inside the repository: the config says so)."""
    relative = Path(os.path.normpath(root / state_dir)).relative_to(root)
    return f"{relative.as_posix()}/"


def _defaults(root: Path) -> list[tuple[Path, Path]]:
    pairs = [(SUPERVISOR_TOML, root / CONFIG_NAME)]
    claude = CLAUDE_DIR
    for source in sorted(claude.rglob("*.md")):
        pairs.append((source, root / ".claude" / source.relative_to(claude)))
    missing = [str(s) for s, _ in pairs if not s.exists()]
    if missing:
        raise FileNotFoundError(f"the shipped defaults are missing: {', '.join(missing)}")
    return pairs


# ---------------------------------------------------------------------------- status


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


def _status(config: Any, root: Path, branch: str) -> None:
    state_dir = root / config.engine.state_dir
    lock = read_lock(state_dir)  # before the journal: a stop meanwhile is in what it reads
    state, last_event = read_journal(state_dir)
    engine = engine_status(lock, state.engine, last_event)
    print(engine.line)
    print(f"repository {root} (default branch {branch}), state in {state_dir}")
    _print_pause(state, config)
    _print_costs(state, config)
    _print_baseline(state, config)
    _print_merge_waits(state)
    print_queue(state, config)
    if config.provider.kind == "local":
        from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

        provider = LocalProvider(root, state_dir, branch)
        try:
            _print_items(provider.work_item_reader.list_work_items(), state)
            _print_revisions(provider.revision_reader.list_revisions())
        finally:
            provider.close()
    else:  # no token needed to look: the engine's last view of GitHub, from its journal
        github = config.provider.github
        print(f"\n(GitHub {github.repository if github else ''}: as the engine last saw it)")
        _print_items(state.work_items.values(), state)
        _print_revisions(list(state.revisions.values()))
    _print_ignored(state)
    _print_retries(state, config)
    _print_skipped_specs(state)
    _print_planner_waits(state, config)
    _print_runs(state, state_dir, engine)
    _print_quota(state, config)


def _print_pause(state: Any, config: Any) -> None:
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


def _print_baseline(state: Any, config: Any) -> None:
    """The default branch's pipeline, when it is red: revisions are judged against it (the
    dashboard's banner says the same: ``domain.landing.describe_baseline``)."""
    from domain.landing import describe_baseline  # noqa: PLC0415

    red = describe_baseline(state, charge_baseline=config.workflow.charge_baseline_failures)
    if red is None:
        return
    print(f"\n{red.headline}")
    for line in (*red.failure, *([f"log: {red.url}"] if red.url else []), *red.means):
        print(f"  {line}")


def _print_retries(state: Any, config: Any) -> None:
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
            lines.append(f"  #{wid:<4} retry at {when} (attempt {retry.attempt} failed)")
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
        print(f"  revision {rid} (work item #{wait.work_item_id}) since {since}, {tries}")
        print(f"    {' '.join(wait.reason.split())[:300]}")


def _print_ignored(state: Any) -> None:
    """Tracker items that are not work (not trusted, a required label missing), and why."""
    from domain.selectors import ordered  # noqa: PLC0415

    if not state.ignored:
        return
    print("\nignored on the tracker (never worked on; see docs/security.md)")
    for wid in ordered(state.ignored):
        item = state.ignored[wid]
        print(f"  #{item.id} {item.title[:80]!r}: ignored: {item.reason}")


def _print_skipped_specs(state: Any) -> None:
    skipped = [spec for spec in state.specs.values() if spec.problem]
    if skipped:
        print("\nspecs skipped (planned again once they change)")
        for spec in skipped:
            print(f"  {spec.path}\n    {spec.problem}")


def _print_planner_waits(state: Any, config: Any) -> None:
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


def _print_items(items: Any, state: EngineState) -> None:
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
    for wid in ordered(by_id):
        item = by_id[wid]
        blockers = ", ".join(b if "#" in b else f"#{b}" for b in open_blockers(item, by_id))
        blocked = f"  blocked by {blockers}" if blockers else ""
        runs = costs.get(item.id, [])
        cost = f"${sum(c or 0.0 for c in runs):.2f}{'?' if None in runs else ''}"
        print(f"  #{item.id:<4} {item.status:<17} {cost:<8} {item.title}{blocked}")


def _print_revisions(revisions: Any) -> None:
    print("\nrevisions")
    if not revisions:
        print("  (none)")
    for r in revisions:
        print(
            f"  {r.id:<6} {r.state:<7} pipeline {r.pipeline.status:<8} head {r.head_sha[:10]}  "
            f"work item #{r.work_item_id}  {r.title}"
        )


RECENT_RUNS = 20


def _print_quota(state: EngineState, config: Any) -> None:
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
                print(f"      {label}: {' '.join(run.failure_reason.split())}")


LOG_FILE = "cpe.log"  # in the state directory: cpe run's whole log when a person watches


def _start_logging(
    config: Any, root: Path, log_format: LogFormat | None
) -> tuple[LogFormat, Path | None]:
    """The log as ``--log-format`` or ``[logging] format`` asks, and the file it also goes
    to: a person's terminal says decisions and warnings, everything is kept in
    ``<state>/cpe.log``."""
    from actors.logs import configure_logging  # noqa: PLC0415 - the engine: cpe run's import

    wanted = log_format or config.logging.format
    human = wanted == "human" or (wanted == "auto" and sys.stderr.isatty())
    log_file = root / config.engine.state_dir / LOG_FILE if human else None
    try:
        return configure_logging(config.engine.log_level, wanted, log_file=log_file), log_file
    except OSError:  # the state directory cannot be written: the journal's check says so
        return configure_logging(config.engine.log_level, wanted), None


def _with_defaults(config_path: Path | None, repo: Path | None, error: ConfigError) -> Any:
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


def _warn_uncommitted(root: Path) -> None:
    """Agents work in worktrees of the default branch: a supervisor.toml or .claude/ that
    ``cpe init`` wrote and nobody committed is not in them (the agents lack their definitions)."""
    import subprocess  # noqa: PLC0415

    names = [n for n in ("supervisor.toml", ".claude") if (root / n).exists()]
    if not names:
        return
    done = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", *names],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    changed = sorted({line[3:].split("/")[0] for line in done.stdout.splitlines() if line})
    if done.returncode == 0 and changed:
        structlog.get_logger("cpe.cli").warning(
            "not committed: agents work on the default branch and will not see it; commit it "
            "(git add supervisor.toml .claude .gitignore && git commit)",
            paths=", ".join(changed),
        )


def runs_list(config_path: Path | None, repo: Path | None, *, limit: int = 50) -> int:
    """The agent runs the journal holds, newest first, one line each (as cpe status shows
    them)."""
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if limit < 0:
        return fail(f"--limit {limit}: expected a number of runs, 0 for all", 2)
    state_dir = root / config.engine.state_dir
    state = journal_state(state_dir)
    never = datetime.min.replace(tzinfo=UTC)
    runs = sorted(state.agent_runs.values(), key=lambda r: r.requested_at or never, reverse=True)
    shown = runs if limit == 0 else runs[:limit]
    if not shown:
        print("no agent runs yet")
        return 0
    now = datetime.now(UTC)
    for run in shown:
        print(describe_run(run, run_where(state_dir, run.session_id), now=now))
    if len(shown) < len(runs):
        print(f"({len(runs) - len(shown)} older runs: --limit 0 lists them all)")
    return 0


def read_body(body: str, body_file: Path | None) -> str | None:
    """A work item's body: ``--body``, or ``--body-file`` (``-``: standard input); None, said
    on stderr, when the file cannot be read."""
    if body_file is None:
        return body
    try:
        if str(body_file) == "-":
            return sys.stdin.read()
        return body_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"cpe: work add: --body-file {body_file}: cannot read it: {exc}", file=sys.stderr)
        return None


def describe_run(
    run: AgentRun,
    runtime: str = "",
    *,
    now: datetime | None = None,
    stopped_at: datetime | None = None,
) -> str:
    """One line: session, role, runtime, subject, status, duration, cost, outcome. A run that
    has not ended shows its duration so far (until ``now``) when ``now`` is given; one the
    engine left active when it stopped (at ``stopped_at``) says so, with its duration up to
    then, which no longer grows."""
    duration, status = "", str(run.status)
    active = run.status in ACTIVE_RUN_STATUSES
    end = run.ended_at or ((stopped_at or now) if active else None)
    if run.started_at and end:
        duration = _duration(max(0.0, (end - run.started_at).total_seconds()))
    if active and stopped_at is not None:
        status = f"{run.status} when the engine stopped" + (f" ({duration})" if duration else "")
        duration = ""
    cost = f"${run.cost_usd:.4f}" if run.cost_usd is not None else ""
    outcome = run.outcome or run.failure_reason or ""
    return (
        f"{run.session_id:<26} {run.role:<12} {runtime:<10} {run.subject:<12} {status:<10} "
        f"{duration:>7} {cost:>9}  {outcome[:60]}"
    )


def _duration(seconds: float) -> str:
    """``12.5s`` under a minute, ``3m05s`` under an hour, ``26h04m`` beyond."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def run_runtime(state_dir: Path, session_id: str) -> str:
    """The runtime a run ran on (``claude-sdk``, ``claude-cli``, ``codex-cli``), from its
    metadata; empty when it has none (never started, or its files are gone)."""
    try:
        metadata = json.loads(
            (state_dir / "runs" / session_id / "runner_metadata.json").read_text()
        )
    except (OSError, ValueError):
        return ""
    family = metadata.get("agent_family") if isinstance(metadata, dict) else None
    return family.replace("_", "-") if isinstance(family, str) else ""


def run_where(state_dir: Path, session_id: str) -> str:
    """The runtime a run ran on and, for a remote run, its node (``claude-sdk@ADDRESS/NODE``,
    from its ``remote.json``), as a run's line shows it."""
    runtime = run_runtime(state_dir, session_id)
    node = describe_node(read_placement(state_dir, session_id))
    return f"{runtime}@{node}" if node else runtime


def journal_state(state_dir: Path) -> EngineState:
    """The state after the events the engine processed, with a person's requests it has not
    processed yet applied too (journaled while no engine ran, the next one processes them
    first: a pause shows at once), and the engine's own starts and stops (its stop is its last
    event, which it never processes). Other unprocessed events are left for the engine to
    judge."""
    return read_journal(state_dir)[0]


def read_journal(state_dir: Path) -> tuple[EngineState, datetime | None]:
    """``journal_state``, and when the last event an engine journaled was written (a person's
    requests journaled while none ran left out; None: no journal)."""
    path = state_dir / "journal.sqlite3"
    if not path.exists():
        return EngineState(), None
    journal = Journal(path)
    try:
        state = journal.replay()
        processed = journal.processed_seq()
        last = next(iter(journal.entries(after=processed - 1, until=processed)), None)
        for entry in journal.entries(after=processed):
            if isinstance(entry.event, (*USER_EVENTS, *ENGINE_LIFE_EVENTS)):
                state = apply_event(state, entry.event)
            if not isinstance(entry.event, USER_EVENTS):
                last = entry
        return state, None if last is None else datetime.fromtimestamp(last.at, UTC)
    finally:
        journal.close()


# ---------------------------------------------------------------------------- small commands


def runs_show(
    session_id: str, config_path: Path | None, repo: Path | None, *, follow: bool = False
) -> int:
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    state_dir = root / config.engine.state_dir
    if Path(session_id).name != session_id or session_id in ("", ".", ".."):
        return fail(f"{session_id!r} is not a session id; expected one cpe status lists", 1)
    run = journal_state(state_dir).agent_runs.get(SessionId(session_id))
    run_dir = state_dir / "runs" / session_id
    transcript = run_dir / "transcript.log"
    if run is not None and run.log_file_path:
        transcript = root / run.log_file_path  # absolute as journaled; else under the repo
    if run is None and not run_dir.is_dir() and not transcript.exists():
        return fail(
            f"unknown session {session_id!r}: no such agent run in {state_dir}; "
            "expected a session id that cpe status lists",
            1,
        )
    if follow and run is not None and run.is_active:
        from adapters.follow import follow_run  # noqa: PLC0415

        if follow_run(state_dir, run):
            return 0
        run = journal_state(state_dir).agent_runs.get(SessionId(session_id), run)
    # What the run did, from its normalized transcript (as --follow and the dashboard show
    # it); a run from before those has its transcript.log only.
    activity = run_activity(run_dir)
    if activity is None and not transcript.is_file():
        why = "" if run is None else f" (the run is {run.status})"
        return fail(f"session {session_id}: no transcript at {run_dir / TRANSCRIPT}{why}", 1)
    if run is not None:
        print("run " + " ".join(describe_run(run, run_where(state_dir, session_id)).split()))
    if activity is None:
        print(transcript.read_text(encoding="utf-8", errors="replace"), end="")
        return 0
    for line in activity:
        print(line)
    if transcript.is_file():
        print(f"(with times and the runner's notes: {transcript})")
    return 0


def work_add(title: str, body: str, config_path: Path | None, repo: Path | None) -> int:
    if not title.strip():
        return fail("work add: the title is empty; expected a few words saying what to do", 2)
    try:
        config, root = resolve_config(config_path, repo)
        branch = default_branch(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if config.provider.kind != "local":
        github = config.provider.github
        where = f" in {github.repository}" if github else ""
        return fail(
            f"work add: provider.kind is {config.provider.kind!r}; expected 'local' "
            f"(on GitHub, open an issue{where} instead)"
        )
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(root, root / config.engine.state_dir, branch)
    try:
        wid: WorkItemId = provider.work_item_writer.create_work_item(title, body)
    finally:
        provider.close()
    from adapters.control import poke  # noqa: PLC0415

    # A running engine reads it now, not at its next poll.
    running = poke(root / config.engine.state_dir, ("work_items",))
    print(f"created work item #{wid}" + (" (the running engine has it)" if running else ""))
    return 0


def replay(until: int | None, config_path: Path | None, repo: Path | None) -> int:
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if until is not None and until < 0:
        return fail(
            f"replay: --until {until}: expected an event's sequence number (1 is the first "
            "event; 0 gives the state before any)",
            2,
        )
    path = root / config.engine.state_dir / "journal.sqlite3"
    if not path.exists():
        return fail(f"no journal at {path}", 1)
    journal = Journal(path)
    try:
        state = journal.replay(until)
    finally:
        journal.close()
    print(json.dumps(state.model_dump(mode="json"), indent=2, default=_jsonable))
    return 0


# ---------------------------------------------------------------------------- costs

COST_GROUPS = ("item", "role", "runtime", "model", "day")


def costs(by: str, since: str | None, config_path: Path | None, repo: Path | None) -> int:
    """What the agent runs cost, from the journal: a table grouped ``by`` item, role, runtime,
    model or day (UTC), of the runs that ended on or after ``since`` (YYYY-MM-DD). A run that
    reported no cost is counted apart (``unknown``), never as 0."""
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    start: datetime | None = None
    if since is not None:
        try:
            start = datetime.strptime(since, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            return fail(f"--since {since!r}: not a date; expected YYYY-MM-DD", 2)
    state_dir = root / config.engine.state_dir
    state = journal_state(state_dir)
    groups: dict[str, list[float | None]] = {}
    for run in state.agent_runs.values():
        if run.ended_at is None or (start is not None and run.ended_at < start):
            continue
        key = {
            "item": f"#{run.work_item_id}" if run.work_item_id else "planning",
            "role": run.role,
            "runtime": run_runtime(state_dir, run.session_id) or "unknown",
            "model": run.model or "unknown",
            "day": run.ended_at.astimezone(UTC).strftime("%Y-%m-%d"),
        }[by]
        groups.setdefault(key, []).append(run.cost_usd)
    import math  # noqa: PLC0415

    print(f"{by:<24} {'runs':>6} {'cost (USD)':>12} {'unknown':>8}")
    # Exact sums (fsum), the total over the runs rather than the rounded groups: the same total
    # whichever grouping is asked for.
    every = [cost for costs_ in groups.values() for cost in costs_]
    for key in sorted(groups, key=natural_key if by == "item" else str):
        known = [cost for cost in groups[key] if cost is not None]
        missing = len(groups[key]) - len(known)
        print(f"{key:<24} {len(groups[key]):>6} {math.fsum(known):>12.4f} {missing:>8}")
    total = math.fsum(sorted(cost for cost in every if cost is not None))
    unknown = sum(1 for cost in every if cost is None)
    print(f"{'total':<24} {len(every):>6} {total:>12.4f} {unknown:>8}")
    return 0


def _print_costs(state: Any, config: Any) -> None:
    """Cost today (in the budget's time zone) and in all, against the budgets."""
    from zoneinfo import ZoneInfo  # noqa: PLC0415

    from domain.decisions import spent_since  # noqa: PLC0415

    budget = config.budget
    now = datetime.now(ZoneInfo(budget.timezone))
    today = spent_since(state, now.replace(hour=0, minute=0, second=0, microsecond=0))
    total = sum(run.cost_usd or 0.0 for run in state.agent_runs.values())
    limit = f" of ${budget.per_day_usd:.2f} a day" if budget.per_day_usd else ""
    print(f"\ncost: ${today:.2f} today{limit}, ${total:.2f} in all (cpe costs: the details)")


def _jsonable(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)
