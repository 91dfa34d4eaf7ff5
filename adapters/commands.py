"""What each ``cpe`` subcommand does (the parser lives in ``adapters/cli.py``)."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from actors.journal import Journal
from actors.logs import configure_logging
from actors.process import EXIT_CONFIG, run_engine
from adapters.app import CONFIG_NAME, App, build_app, default_branch, resolve_config
from adapters.defaults import CLAUDE_DIR, SUPERVISOR_TOML
from adapters.notify import notify
from domain.errors import ConfigError
from domain.models import AgentRun, EngineState, WorkItemId
from domain.state import ordered

IGNORED = (".worktrees/", ".cpe/")


def fail(message: str, code: int = EXIT_CONFIG) -> int:
    print(f"cpe: {message}", file=sys.stderr)
    return code


# ---------------------------------------------------------------------------- run


def run(config_path: Path | None, repo: Path | None) -> int:
    try:
        config, _ = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    configure_logging(config.engine.log_level, config.logging.format)
    apps: list[App] = []

    def build() -> Any:
        app = build_app(config_path, repo)
        apps.append(app)
        return app.engine

    def watchdog(engine: Any) -> None:
        sup = engine.supervisor
        if sup is not None and sup.ref("engine") is not None and sup.ref("event_queue"):
            notify("WATCHDOG=1")

    def ready(engine: Any) -> None:
        notify("READY=1")

    def stopping() -> None:
        notify("STOPPING=1")

    try:
        return run_engine(build, on_ready=ready, on_tick=watchdog, on_stopping=stopping)
    finally:
        for app in apps:
            app.close()


# ---------------------------------------------------------------------------- init


def init(repo: Path) -> int:
    root = repo.resolve()
    if not (root / ".git").exists():
        return fail(f"{root}: not a git repository (run git init first)")
    written: list[str] = []
    for source, target in _defaults(root):
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(str(target.relative_to(root)))
    gitignore = root / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    missing = [entry for entry in IGNORED if entry not in lines and entry.rstrip("/") not in lines]
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
    return 0


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


def status(config_path: Path | None, repo: Path | None) -> int:
    try:
        config, root = resolve_config(config_path, repo)
        branch = default_branch(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    state_dir = root / config.engine.state_dir
    print(f"repository {root} (default branch {branch}), state in {state_dir}")
    if config.provider.kind == "local":
        from adapters.local.provider import LocalProvider  # noqa: PLC0415

        provider = LocalProvider(root, state_dir, branch)
        try:
            _print_items(provider.work_item_reader.list_work_items())
            _print_revisions(provider.revision_reader.list_revisions())
        finally:
            provider.close()
    state = _journal_state(state_dir)
    _print_runs(state, state_dir)
    return 0


def _print_items(items: Any) -> None:
    print("\nwork items")
    by_id = {item.id: item for item in items}
    if not by_id:
        print("  (none)")
    for wid in ordered(by_id):
        item = by_id[wid]
        blocked = f"  blocked by {', '.join(item.blocked_by)}" if item.blocked_by else ""
        print(f"  #{item.id:<4} {item.status:<17} {item.title}{blocked}")


def _print_revisions(revisions: Any) -> None:
    print("\nrevisions")
    if not revisions:
        print("  (none)")
    for r in revisions:
        print(
            f"  {r.id:<6} {r.state:<7} pipeline {r.pipeline.status:<8} head {r.head_sha[:10]}  "
            f"work item #{r.work_item_id}  {r.title}"
        )


def _print_runs(state: EngineState, state_dir: Path) -> None:
    print("\nagent runs (newest last)")
    runs = list(state.agent_runs.values())
    if not runs:
        print("  (none)")
    for run in runs[-20:]:
        print("  " + describe_run(run, run_runtime(state_dir, run.session_id)))


def describe_run(run: AgentRun, runtime: str = "") -> str:
    duration = ""
    if run.started_at and run.ended_at:
        duration = f"{(run.ended_at - run.started_at).total_seconds():.1f}s"
    cost = f"${run.cost_usd:.4f}" if run.cost_usd is not None else ""
    outcome = run.outcome or run.failure_reason or ""
    return (
        f"{run.session_id:<26} {run.role:<12} {runtime:<10} {run.subject:<12} {run.status:<10} "
        f"{duration:>7} {cost:>9}  {outcome[:60]}"
    )


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


def _journal_state(state_dir: Path) -> EngineState:
    path = state_dir / "journal.sqlite3"
    if not path.exists():
        return EngineState()
    journal = Journal(path)
    try:
        return journal.replay()
    finally:
        journal.close()


# ---------------------------------------------------------------------------- small commands


def runs_show(session_id: str, config_path: Path | None, repo: Path | None) -> int:
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    transcript = root / config.engine.state_dir / "runs" / session_id / "transcript.log"
    if not transcript.exists():
        return fail(f"no transcript for session {session_id} at {transcript}", 1)
    print(transcript.read_text(), end="")
    return 0


def work_add(title: str, body: str, config_path: Path | None, repo: Path | None) -> int:
    try:
        config, root = resolve_config(config_path, repo)
        branch = default_branch(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if config.provider.kind != "local":
        return fail("cpe work add is for the local provider; on GitHub, open an issue", 1)
    from adapters.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(root, root / config.engine.state_dir, branch)
    try:
        wid: WorkItemId = provider.work_item_writer.create_work_item(title, body)
    finally:
        provider.close()
    print(f"created work item #{wid}")
    return 0


def replay(until: int | None, config_path: Path | None, repo: Path | None) -> int:
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
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


def _jsonable(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)
