"""``cpe replay``: the engine state rebuilt from the journal, as JSON."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from actors.journal import Journal
from adapters.cli.common import fail
from adapters.cli.repository import resolve_config
from domain.errors import ConfigError


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


def _jsonable(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)
