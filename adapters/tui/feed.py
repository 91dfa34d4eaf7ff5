"""What the terminal console reads and acts through: a ``Feed``.

The console (``cpe tui``) never holds the engine. It reads the same views the web dashboard
serves (``adapters.dashboard.views.state_view``, ``adapters.dashboard.pages.item_detail`` and
``run_detail``: JSON-ready dicts) and sends a person's requests as the dashboard and ``cpe work``
do (``domain.requests``). Two feeds give them:

- a running engine's, over its control socket (``<state_dir>/control.sock``, this user's only):
  the views asked for or watched as they change, a run's output followed, requests judged by
  the live state, a refresh;
- a stopped engine's, from its journal: the last state, read-only (every action is refused,
  saying the engine is not running).

Every view is a plain dict, so one console draws both, and a test can assert on what it drew.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class Refused(Exception):
    """A request the engine (or the feed) did not take: ``kind`` as ``domain.requests`` names
    it (``not-found``, ``conflict``, ``invalid``), or ``read-only`` (a stopped engine's feed),
    or ``gone`` (the engine went away while asked); the message says why in one line."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Feed(Protocol):
    """One engine, seen and steered."""

    @property
    def live(self) -> bool:
        """True while this feed talks to a running engine (actions can be taken)."""
        ...

    def board(self) -> dict[str, Any]:
        """The board's view now: ``state_view``'s dict (items, runs, merge queue, pauses,
        accounts, decisions, ``engine``: running or stopped)."""
        ...

    def watch(self) -> Iterator[dict[str, Any]]:
        """The board's view now, then again at each change (a burst coalesced); ends when the
        engine goes away (stops, is killed) or the feed is closed: open the feed again then
        (``adapters.tui.connect.open_feed``; a journal's watch ends once an engine answers).
        ``Refused("gone")`` at the first ``next`` when no engine answers at all."""
        ...

    def item(self, item_id: str) -> dict[str, Any] | None:
        """``item_detail``'s dict for one work item (what ``cpe work show`` says, as sections);
        None: no such item."""
        ...

    def run(self, session_id: str) -> dict[str, Any] | None:
        """``run_detail``'s dict for one agent run (its ``output``: the activity so far, or in
        all once ended); None: no such run."""
        ...

    def follow(self, session_id: str) -> Iterator[str]:
        """A live run's activity as ``cpe runs show --follow`` gives it, a line at a time
        (each ending in a newline: text, tool calls, their results' first lines; a remote
        run's streamed output until its transcript comes back): from the run's start, then as
        it grows, ending when the run ends (nothing for a run that is not running). The
        activity so far replaces what ``run(session)["output"]`` showed."""
        ...

    def act(self, request: dict[str, Any]) -> str:
        """Send a person's request (``domain.requests``' JSON:
        ``{"op": "retry", "work_item_id": ...}``, ``cancel``, ``{"op": "set-status",
        "work_item_id": ..., "to": ...}``, ``pause`` with a ``reason``, ``resume``); the
        engine's answer in words, or ``Refused`` saying why."""
        ...

    def refresh(self) -> str:
        """Ask the engine to poll its tracker and forge now (``Engine.refresh``)."""
        ...

    def close(self) -> None:
        """Let go: every ``watch`` and ``follow`` ends."""
        ...
