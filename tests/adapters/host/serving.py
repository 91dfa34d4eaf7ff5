"""A real engine (the actor tests' fakes, a real journal) with its real control socket serving
the dashboard's views, for the control socket's and the console's feeds' tests."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.engine import Engine
from adapters.cli.services import dashboard_settings
from adapters.cli.settings import parse_config
from adapters.dashboard.feeds import SourceViews
from adapters.dashboard.source import DashboardSettings, Source
from adapters.host.control import (
    SOCKET_NAME,
    Control,
    ControlServer,
    ControlSettings,
    NoEngine,
    connect,
)
from tests.actors.conftest import Harness

SETTINGS: DashboardSettings = dashboard_settings(parse_config({}))


@dataclass
class Served:
    engine: Engine
    source: Source
    server: ControlServer
    state_dir: Path
    thread: threading.Thread

    def stop_serving(self) -> None:
        """The control socket's stop, as ``cpe run`` stops its services."""
        self.server.shutdown()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the control socket did not stop"


def wait_listening(state_dir: Path, thread: threading.Thread, timeout: float = 30.0) -> None:
    """Until the socket answers (its thread binds it, then serves), polled."""
    end = time.monotonic() + timeout
    while True:
        assert thread.is_alive(), "the control socket's thread ended"
        with contextlib.suppress(NoEngine):
            one_reply(state_dir, {"view": "board"})
            return
        assert time.monotonic() < end, "the control socket did not listen in time"
        threading.Event().wait(0.01)  # a poll's pause, not a wait for an outcome


@contextlib.contextmanager
def serving(
    harness: Harness, engine: Engine | None = None, *, watch_beat: float = 15.0
) -> Iterator[Served]:
    """``engine`` (the harness's own by default) started, with a control socket serving the
    views in ``harness.tmp_path`` (its journal's directory: the state directory)."""
    engine = engine or harness.engine()
    config = parse_config({})
    control = Control(engine, ControlSettings(config.breaker, config.workflow.max_concurrent))
    source = Source(engine, SETTINGS, harness.tmp_path, control=control, title="/srv/repo")
    engine.start()
    server = ControlServer(control, harness.tmp_path, SourceViews(source), watch_beat=watch_beat)
    thread = threading.Thread(target=server.serve, name="control", daemon=True)
    thread.start()
    served = Served(engine, source, server, harness.tmp_path, thread)
    try:
        wait_listening(harness.tmp_path, thread)
        yield served
    finally:
        if thread.is_alive():
            served.stop_serving()
        source.close()


class Line:
    """A raw connection to the control socket: lines written, replies read one at a time."""

    def __init__(self, state_dir: Path, timeout: float = 30.0):
        self.sock = connect(state_dir, timeout)
        self.file = self.sock.makefile("rb")

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def ask(self, message: Any) -> None:
        self.send(json.dumps(message).encode() + b"\n")

    def reply(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line, "the engine closed the connection"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def at_end(self) -> bool:
        return self.file.readline() == b""

    def close(self) -> None:
        self.file.close()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def one_reply(state_dir: Path, message: Any) -> dict[str, Any]:
    line = Line(state_dir)
    try:
        line.ask(message)
        return line.reply()
    finally:
        line.close()


__all__ = ["SOCKET_NAME", "Line", "Served", "one_reply", "serving", "wait_listening"]
