"""``cpe tui``: the terminal console (``adapters.tui.app``) on the engine of a repository.

It reads the configuration as ``cpe status`` does, finds the state directory, and opens the
console on the running engine's control socket, or on its journal's last state when none runs
(read-only; it reconnects once one answers). Where no engine has ever run there is nothing to
show: it says so, and how to start one.
"""

from __future__ import annotations

from pathlib import Path

from adapters.cli.common import fail
from adapters.cli.repository import default_branch, resolve_config
from domain.errors import ConfigError
from domain.models import WorkItemId

EXIT_NOTHING = 1  # no engine has run on this repository: no state to show


def tui(config_path: Path | None, repo: Path | None) -> int:
    from actors.journal import JOURNAL_NAME  # noqa: PLC0415
    from adapters.cli.providers import open_local_tracker  # noqa: PLC0415
    from adapters.cli.services import dashboard_settings  # noqa: PLC0415

    try:
        config, root = resolve_config(config_path, repo)
        branch = default_branch(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    state_dir = root / config.engine.state_dir
    if not (state_dir / JOURNAL_NAME).exists():
        return fail(
            f"no engine has run here (no journal in {state_dir}): start one with cpe run",
            EXIT_NOTHING,
        )
    settings = dashboard_settings(config)

    def body(item_id: WorkItemId) -> str:
        """An item's body as ``cpe work show`` reads it while no engine runs."""
        tracker = open_local_tracker(config, root, branch)
        if tracker is None:  # kept elsewhere: the page says where (settings)
            return "(kept on the tracker)"
        try:
            return tracker.work_item_reader.get_work_item_body(item_id)
        finally:
            tracker.close()

    from adapters.tui.app import Console  # noqa: PLC0415 - Textual: cpe tui's own
    from adapters.tui.connect import open_feed  # noqa: PLC0415
    from adapters.tui.feed import Feed  # noqa: PLC0415

    def reopen() -> Feed:
        return open_feed(state_dir, settings, body=body, title=str(root))

    code = Console(reopen(), reopen).run()
    return code or 0
