"""A live run followed as ``cpe runs show --follow`` follows it: its activity, line by line.

The engine's ``follow`` over the control socket says while the run goes on (and carries the
output a remote run streams back); what the run does is read from its transcript as it grows
(``TranscriptTail`` of ``<state_dir>/runs/<session>``: text, tool calls, their results' first
lines), from its start. A remote run's transcript comes back when it ends: its streamed output
meanwhile. Every line passes through the log redaction, as the dashboard's views do.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from adapters.runtime.artifacts.activity import TranscriptTail
from adapters.runtime.remote.placement import REMOTE_FILE
from adapters.support.redaction import redact_value
from adapters.tui.feed import Refused

POLL = 0.2  # seconds between two reads of the followed run's transcript

Read = Callable[[], dict[str, Any] | None]


class EngineSide:
    """The engine's ``follow`` replies (after its ``{"ok": true}``), read by a thread of its
    own until the run's output ends (``{"end": true}``) or the connection does (``read``
    returns None or raises ``Refused``): ``done``; the prose of a remote run kept."""

    def __init__(self, read: Read):
        self.done = threading.Event()
        self._prose: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._read, args=(read,), daemon=True)
        self._thread.start()

    def prose(self) -> list[str]:
        chunks = []
        while not self._prose.empty():
            chunks.append(self._prose.get_nowait())
        return chunks

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _read(self, read: Read) -> None:
        try:
            while (reply := read()) is not None:
                output = reply.get("output")
                if isinstance(output, str):
                    self._prose.put(output)
                elif reply.get("end"):
                    return
        except Refused:  # the connection broke, or was shut: the follow ends
            return
        finally:
            self.done.set()


def activity(
    state_dir: Path, session_id: str, engine: EngineSide, closed: threading.Event
) -> Iterator[str]:
    """The run's activity lines (each ending in a newline) from its start, as it grows, until
    its output ends, the engine goes away, or ``closed``."""
    run_dir = state_dir / "runs" / session_id
    tail = TranscriptTail(run_dir)
    remote = False
    while not closed.is_set():
        remote = remote or (run_dir / REMOTE_FILE).exists()
        yield from _lines(engine.prose() if remote else tail.read())
        if tail.finished or engine.done.is_set():
            break
        engine.done.wait(POLL)
    if not closed.is_set():  # what was written as it ended
        yield from _lines(engine.prose() if remote else tail.read())


def _lines(chunks: Iterable[str]) -> Iterator[str]:
    for chunk in chunks:
        text = str(redact_value(chunk))
        yield text if text.endswith("\n") else text + "\n"
