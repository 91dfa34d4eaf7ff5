"""A running engine's ``Feed``: its control socket (``adapters.host.control``).

Every call is a short connection of its own (a view, a request, a refresh), waited for no longer
than its timeouts; a ``watch`` and a ``follow`` each hold one open until the engine ends them,
the engine goes away, or ``close()`` shuts them. An engine that does not answer (none listening,
killed, a stale socket) is ``Refused("gone", ...)``; an answer ``{"ok": false, ...}`` is
``Refused`` with its kind and words.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapters.host.control import (
    FOLLOW_START_WAIT,
    PROCESS_TIMEOUT,
    SOCKET_NAME,
    NoEngine,
    connect,
)
from adapters.tui.feed import Refused
from adapters.tui.following import EngineSide, activity

CONNECT_TIMEOUT = 2.0  # seconds to reach the engine's socket
ANSWER_TIMEOUT = 30.0  # seconds for a view's answer (an item's body may come from the tracker)
ACT_TIMEOUT = PROCESS_TIMEOUT + 15.0  # the engine waits for a request to be processed first
FOLLOW_ANSWER = FOLLOW_START_WAIT + 15.0  # the engine waits for a requested run to start
WATCH_SILENCE = 60.0  # seconds without a line (the engine beats every 15) before a watch ends
_MAX_LINE = 64 * 1024 * 1024  # a run's view carries up to 200,000 characters of output


class SocketFeed:
    """The engine listening on ``state_dir``'s control socket."""

    live = True

    def __init__(
        self,
        state_dir: Path,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        answer_timeout: float = ANSWER_TIMEOUT,
        act_timeout: float = ACT_TIMEOUT,
        watch_silence: float = WATCH_SILENCE,
    ):
        self.state_dir = state_dir
        self.connect_timeout = connect_timeout
        self.answer_timeout = answer_timeout
        self.act_timeout = act_timeout
        self.watch_silence = watch_silence
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closing = threading.Event()

    # ------------------------------------------------------------------ the Feed

    def board(self) -> dict[str, Any]:
        board: dict[str, Any] = self._ask({"view": "board"}, self.answer_timeout)["board"]
        return board

    def item(self, item_id: str) -> dict[str, Any] | None:
        try:
            item: dict[str, Any] = self._ask({"view": "item", "item": item_id})["item"]
        except Refused as refused:
            if refused.kind == "not-found":
                return None
            raise
        return item

    def run(self, session_id: str) -> dict[str, Any] | None:
        try:
            run: dict[str, Any] = self._ask({"view": "run", "session": session_id})["run"]
        except Refused as refused:
            if refused.kind == "not-found":
                return None
            raise
        return run

    def watch(self) -> Iterator[dict[str, Any]]:
        for line in self._stream({"watch": "board"}, self.answer_timeout, self.watch_silence):
            if "board" in line:
                yield line["board"]
            elif line.get("end"):
                return

    def follow(self, session_id: str) -> Iterator[str]:
        """The run's activity lines from its start, as ``cpe runs show --follow`` gives them
        (``adapters.tui.following``), while the engine says it runs; nothing for a run that
        is not running."""
        with self._connection({"follow": session_id}, FOLLOW_ANSWER) as replies:
            try:
                first = _read(replies, self._where)
                if first is None:
                    return
                _ok(first)
            except Refused as refused:
                if refused.kind == "not-found":  # not running: nothing to follow
                    return
                raise
            replies.sock.settimeout(None)  # a run may be quiet for long
            engine = EngineSide(lambda: _read(replies, self._where))
            try:
                yield from activity(self.state_dir, session_id, engine, self._closing)
            finally:
                replies.shut()
                engine.join(5)

    def act(self, request: dict[str, Any]) -> str:
        return str(self._ask({"request": request}, self.act_timeout).get("message", ""))

    def refresh(self) -> str:
        return str(self._ask({"refresh": True}).get("message", "polling now"))

    def close(self) -> None:
        with self._lock:
            self._closing.set()
            held = list(self._open)
        for sock in held:
            with contextlib.suppress(OSError):  # already gone
                sock.shutdown(socket.SHUT_RDWR)

    # ------------------------------------------------------------------ the wire

    def _ask(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """One connection, one answer: its first line, ``Refused`` when it says no."""
        with self._connection(message, timeout or self.answer_timeout) as replies:
            reply = _read(replies, self._where)
        if reply is None:
            raise Refused("gone", f"the engine closed {self._where} without an answer")
        return _ok(reply)

    def _stream(
        self, message: dict[str, Any], answer: float, silence: float | None
    ) -> Iterator[dict[str, Any]]:
        """The answer ``{"ok": true}`` (waited for ``answer`` seconds), then each line after it
        (``silence``: seconds at most between two; None, for ever) until the engine ends them,
        goes away (the stream just ends), or ``close()``."""
        with self._connection(message, answer) as replies:
            first = _read(replies, self._where)
            if first is None:
                return
            _ok(first)
            replies.sock.settimeout(silence)
            while True:
                try:
                    line = _read(replies, self._where)
                except Refused:
                    return  # silent too long, or cut off: the engine is gone for this watch
                if line is None:
                    return
                yield line

    def _connection(self, message: dict[str, Any], timeout: float) -> _Connection:
        try:
            sock = connect(self.state_dir, self.connect_timeout)
        except NoEngine:
            raise Refused("gone", f"no engine answers on {self._where}") from None
        except OSError as exc:
            raise Refused("gone", f"cannot reach the engine on {self._where}: {exc}") from None
        with self._lock:
            if self._closing.is_set():
                sock.close()
                raise Refused("gone", "this feed is closed")
            self._open.add(sock)
        try:
            sock.settimeout(timeout)
            sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            self._forget(sock)
            raise Refused("gone", f"the engine went away ({self._where}): {exc}") from None
        return _Connection(self, sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        sock.close()

    @property
    def _where(self) -> str:
        return str(self.state_dir / SOCKET_NAME)


class _Connection:
    """An open connection's reply lines, and its socket let go of on leaving."""

    def __init__(self, feed: SocketFeed, sock: socket.socket):
        self.feed = feed
        self.sock = sock
        self.file = sock.makefile("rb")

    def __enter__(self) -> _Connection:
        return self

    def shut(self) -> None:
        """Wake a thread reading it: the end of its input."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def __exit__(self, *exc: object) -> None:
        self.shut()
        self.file.close()
        self.feed._forget(self.sock)


def _read(replies: _Connection, where: str) -> dict[str, Any] | None:
    """The next reply line; None at the end (the engine closed it); ``Refused("gone")`` when
    it does not come in time or the connection breaks."""
    try:
        while True:
            line = replies.file.readline(_MAX_LINE)
            if not line:
                return None
            if line.strip():
                break
    except TimeoutError:
        raise Refused("gone", f"the engine did not answer in time ({where})") from None
    except (OSError, ValueError) as exc:  # ValueError: closed meanwhile
        raise Refused("gone", f"the connection to the engine broke ({where}): {exc}") from None
    try:
        reply = json.loads(line)
    except ValueError:
        raise Refused("gone", f"the engine answered what is not JSON ({where})") from None
    if not isinstance(reply, dict):
        raise Refused("gone", f"the engine answered what is not a JSON object ({where})")
    return reply


def _ok(reply: dict[str, Any]) -> dict[str, Any]:
    if reply.get("ok") is False:
        raise Refused(str(reply.get("kind", "invalid")), str(reply.get("error", "refused")))
    return reply
