"""``cpe run``: the engine on a repository until stopped, with its services, its log, and what
systemd is told (``adapters.host.notify``). The engine's modules are this command's own import."""

from __future__ import annotations

import errno
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from adapters.cli.build import App, build_app, code_host_remote
from adapters.cli.common import fail
from adapters.cli.init import own_python
from adapters.cli.liveness import alive
from adapters.cli.repository import resolve_config
from adapters.cli.services import prepare_services
from adapters.cli.settings import CpeConfig
from domain.errors import ConfigError, ProviderError

if TYPE_CHECKING:  # the engine's modules are cpe run's own import (keeps cpe status quick)
    from actors.engine import Engine
    from actors.logs import LogFormat
    from actors.services import Services


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
    announce: str | None = None,
) -> int:
    """``agent_env``, ``isolated_home``, ``codex_overrides``: as ``build_app`` takes them
    (``cpe run --scripted`` points every runtime at its scripted model); ``announce``: a line
    said on stderr once this process holds the state directory (a second ``cpe run``, refused,
    never says it)."""
    from actors.process import Watchdog, run_engine  # noqa: PLC0415
    from adapters.host.notify import notify  # noqa: PLC0415

    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if (unset := _unset_token(config)) is not None:
        return fail(unset)
    fmt, log_file = _start_logging(config, root, log_format)
    apps: list[App] = []
    starters: list[Callable[[], Services]] = []
    services: list[Services] = []

    def build() -> Engine:
        app = build_app(
            config_path,
            repo,
            new_journal=new_journal,
            agent_env=agent_env,
            isolated_home=isolated_home,
            codex_overrides=codex_overrides,
        )
        apps.append(app)
        if announce is not None and len(apps) == 1:
            print(announce, file=sys.stderr, flush=True)
        try:  # a ConfigError: the dashboard's address cannot be used (exit 78)
            starters.append(prepare_services(app, human=fmt == "human"))
        except BaseException:
            app.engine.stop(reason="its services cannot start")  # never started: closes
            raise
        if fmt == "human":  # a person watches: the engine's decisions in words
            from adapters.host.console import Console  # noqa: PLC0415

            app.engine.watch(Console(sys.stderr, app.engine.queued))
        return app.engine

    health = Watchdog(config.engine.stall_timeout)

    def watchdog(engine: Engine) -> None:
        alive(apps[-1].state_dir)  # after a kill -9, cpe status tells when it was last alive
        if health.healthy(engine):
            notify("WATCHDOG=1")

    def ready(engine: Engine) -> None:
        # once it runs (a refused start says one thing): where the whole log goes, and what
        # the agents will not see; then its services (their "listening" lines end the start)
        if log_file is not None:
            structlog.get_logger("cpe.cli").info("log file", path=str(log_file))
        _warn_unshared(apps[-1])
        services.append(starters[-1]())
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


def _unset_token(config: CpeConfig) -> str | None:
    """What is wrong when the dashboard's actions' token is named but not in the environment."""
    named = config.dashboard.token_env
    if config.dashboard.listen and named and not os.environ.get(named):
        return (
            f"configuration error: dashboard.token_env: the environment variable {named} is "
            "not set; expected a token in it, or token_env empty for a random one"
        )
    return None


def unavailable(exc: ProviderError) -> int:
    """A provider that cannot be read at start (unreachable, failing) in one line: exit 75
    when trying again may do (a service manager starts cpe again), else 78."""
    from actors.process import EXIT_CONFIG, EXIT_IOERR, EXIT_TEMPFAIL  # noqa: PLC0415

    if exc.transient:
        print(f"cpe: cannot start: {exc}; try again once it answers", file=sys.stderr)
        return EXIT_TEMPFAIL
    if _disk_refused(exc):  # the local tracker's database on a full or read-only disk
        print(f"cpe: cannot start: {exc}; free space or fix the disk, then start cpe again",
              file=sys.stderr)  # fmt: skip
        return EXIT_IOERR
    print(f"cpe: cannot start: {exc}", file=sys.stderr)
    return EXIT_CONFIG


_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EROFS, errno.EDQUOT, errno.EIO})
_SQLITE_DISK = frozenset({10, 13, 8})  # SQLITE_IOERR, SQLITE_FULL, SQLITE_READONLY (primary)


def _disk_refused(exc: BaseException) -> bool:
    """Whether what failed was the disk (full, read-only, over a size limit, an I/O error)
    rather than the provider: its cause is an OS or SQLite error saying so."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in _DISK_ERRNOS:
            return True
        code = getattr(cause, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in _SQLITE_DISK:
            return True
        cause = cause.__cause__
    return False


def _warn_unshared(app: App) -> None:
    """What the agents will not see: files ``cpe init`` wrote and nobody committed, commits the
    forge's default branch lacks."""
    _warn_uncommitted(app.repo)
    _warn_unpushed(app)


def _warn_unpushed(app: App) -> None:
    """With a remote forge the default branch is the one on ``origin``: agents start from it
    and specs are read there (``code_host_remote``). Commits of the local default branch that
    ``origin`` lacks (a ``cpe init`` committed, a spec written, and not pushed) are seen by
    neither; said once at start, after the first fetch."""
    import subprocess  # noqa: PLC0415

    remote = code_host_remote(app.config, app.repo)
    if remote is None:
        return
    branch = app.default_branch
    counted = subprocess.run(
        ["git", "-C", str(app.repo), "rev-list", "--count",
         f"refs/remotes/{remote}/{branch}..refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )  # fmt: skip
    ahead = int(counted.stdout.strip() or 0) if counted.returncode == 0 else 0
    if ahead:
        forge = app.config.provider.revisions_kind
        structlog.get_logger("cpe.cli").warning(
            f"not pushed: {branch} has {ahead} commit(s) that {remote}/{branch} lacks; with "
            f"the revisions on {forge}, agents start from {remote}'s {branch} and specs are "
            f"read there: push them (git push {remote} {branch})",
            branch=branch,
            commits=ahead,
        )


LOG_FILE = "cpe.log"  # in the state directory: cpe run's whole log when a person watches


def _start_logging(
    config: CpeConfig, root: Path, log_format: LogFormat | None
) -> tuple[LogFormat, Path | None]:
    """The log as ``--log-format`` or ``[logging] format`` asks, and the file it also goes
    to: a person's terminal says decisions and warnings, everything is kept in
    ``<state>/cpe.log``. Then the first warning: agents' Python is not the project's."""
    from actors.logs import configure_logging  # noqa: PLC0415 - the engine: cpe run's import

    wanted = log_format or config.logging.format
    human = wanted == "human" or (wanted == "auto" and sys.stderr.isatty())
    log_file = root / config.engine.state_dir / LOG_FILE if human else None
    try:
        fmt = configure_logging(config.engine.log_level, wanted, log_file=log_file)
    except OSError:  # the state directory cannot be written: the journal's check says so
        fmt, log_file = configure_logging(config.engine.log_level, wanted), None
    if (warning := own_python(config)) is not None:
        structlog.get_logger("cpe.cli").warning(warning)
    return fmt, log_file


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
