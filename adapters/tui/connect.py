"""The console's feed: the running engine's, or its journal's.

``open_feed`` asks the control socket of ``state_dir`` for the board: an engine that answers is
followed through its socket (``SocketFeed``); otherwise (no socket, a socket a killed engine
left, or an engine still starting whose socket does not answer yet) the journal's last state is
shown, read-only (``JournalFeed``). The console calls it again to reconnect when a feed's watch
ends: a journal's watch ends once an engine answers, a socket's once its engine goes.
"""

from __future__ import annotations

from pathlib import Path

from adapters.dashboard.source import DashboardSettings
from adapters.tui.feed import Feed, Refused
from adapters.tui.journal_feed import Body, JournalFeed
from adapters.tui.socket_feed import SocketFeed

CONNECT_TIMEOUT = 2.0  # seconds to reach the socket
PROBE_ANSWER = 10.0  # seconds for its first answer (a board, on a loaded machine)


def open_feed(
    state_dir: Path,
    settings: DashboardSettings,
    *,
    body: Body | None = None,
    title: str = "",
    timeout: float = CONNECT_TIMEOUT,
) -> Feed:
    """The running engine's feed if one answers on ``state_dir``'s control socket within
    ``timeout``, else the journal's (``settings``: what the dashboard reads of the configuration;
    ``body``: a work item's body read offline, as ``cpe work show`` does; ``title``: the
    board's)."""
    answer = max(timeout, PROBE_ANSWER)
    probe = SocketFeed(state_dir, connect_timeout=timeout, answer_timeout=answer)
    try:
        probe.board()
    except Refused:
        return JournalFeed(state_dir, settings, body=body, title=title)
    finally:
        probe.close()
    return SocketFeed(state_dir)
