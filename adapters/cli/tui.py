"""``cpe tui``: the terminal console (``adapters.tui.app``) on the engine of a repository.

It reads the configuration as ``cpe status`` does, finds the state directory, and opens the
console on the running engine's control socket, or on its journal's last state when none runs
(read-only; it reconnects once one answers). Where no engine has ever run there is nothing to
show: it says so, and how to start one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.cli.common import fail
from adapters.cli.repository import default_branch, resolve_config
from adapters.cli.settings import CpeConfig
from domain.errors import ConfigError
from domain.models import WorkItemId

if TYPE_CHECKING:
    from adapters.tui.feed import Feed

EXIT_NOTHING = 1  # no engine has run on this repository: no state to show
EXIT_USAGE = 2  # not on a terminal that can draw a screen


def tui(config_path: Path | None, repo: Path | None) -> int:
    from actors.journal import JOURNAL_NAME  # noqa: PLC0415

    try:
        config, root = resolve_config(config_path, repo)
        opener = feed_opener(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    state_dir = root / config.engine.state_dir
    # An engine starting holds the state's lock (or has its socket) before its journal exists:
    # the console opens on it (an empty board) and attaches once it answers.
    if not (state_dir / JOURNAL_NAME).exists() and not engine_here(state_dir):
        return fail(
            f"no engine has run here (no journal in {state_dir}): start one with cpe run",
            EXIT_NOTHING,
        )
    problem = terminal_problem()
    if problem is not None:
        return fail(f"the console needs a terminal: {problem}", EXIT_USAGE)
    from adapters.tui.app import Console  # noqa: PLC0415 - Textual: cpe tui's own

    # No mouse: over SSH the terminal's own selection (a session id, a refusal) stays usable.
    code = Console(opener(), opener, starting=lambda: starting(state_dir)).run(mouse=False)
    return code or 0


def engine_here(state_dir: Path) -> bool:
    """An engine holds ``state_dir`` (its lock), or its control socket is there."""
    from adapters.cli.liveness import read_lock  # noqa: PLC0415
    from adapters.host.control import SOCKET_NAME  # noqa: PLC0415

    lock = read_lock(state_dir)
    return (lock is not None and lock.held) or (state_dir / SOCKET_NAME).exists()


def starting(state_dir: Path) -> str | None:
    """While the console reads the journal: an engine holding the state's lock without
    answering on its socket is starting (or stuck), said with its pid; None when none holds
    it (the lock file's flock, as ``cpe status`` reads it: nothing replayed)."""
    from adapters.cli.liveness import read_lock  # noqa: PLC0415

    lock = read_lock(state_dir)
    if lock is None or not lock.held:
        return None
    pid = "?" if lock.pid is None else str(lock.pid)
    return f"an engine (pid {pid}) holds the state but does not answer yet: starting?"


def terminal_problem() -> str | None:
    """Why this process cannot draw the console (it reads keys on standard input and draws on
    standard error), or None."""
    if not sys.stdin.isatty():
        return "standard input is not one (the console reads its keys there)"
    if sys.__stderr__ is None or not sys.__stderr__.isatty():
        return "standard error is not one (the console is drawn there)"
    term = os.environ.get("TERM", "")
    if term in ("", "dumb"):
        return f"TERM={term or '(unset)'} cannot draw a screen; use cpe status --watch"
    return None


def feed_opener(config: CpeConfig, root: Path) -> Callable[[], Feed]:
    """How ``cpe tui`` opens its feed, at its start and again to reconnect: the running
    engine's (its control socket), else the journal's last state, with the work items' bodies
    read as ``cpe work show`` reads them while no engine runs."""
    from adapters.cli.providers import open_local_tracker  # noqa: PLC0415
    from adapters.cli.services import dashboard_settings  # noqa: PLC0415
    from adapters.tui.connect import open_feed  # noqa: PLC0415

    branch = default_branch(config, root)
    settings = dashboard_settings(config)
    state_dir = root / config.engine.state_dir

    def body(item_id: WorkItemId) -> str:
        tracker = open_local_tracker(config, root, branch)
        assert tracker is not None  # the items are local (else no body is read here)
        try:
            return tracker.work_item_reader.get_work_item_body(item_id)
        finally:
            tracker.close()

    # On GitHub, GitLab, Linear or Jira the item's page says where its body is (the settings'
    # issue pages), as cpe work show says it.
    local = config.provider.work_items_kind == "local"

    def opener() -> Feed:
        return open_feed(state_dir, settings, body=body if local else None, title=str(root))

    return opener
