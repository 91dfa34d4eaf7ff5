"""Live agent output, fanned out to any number of subscribers.

A run's ``OutputBuffer`` keeps every chunk. ``subscribe()`` gives an ``AgentStream`` that yields
the output so far, then live chunks, and ends when the run ends. It is iterable from a thread
(``for chunk in stream``) and from asyncio (``async for chunk in stream``); each subscriber has
its own position, so a slow one never holds back the run or another subscriber.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator

import structlog

from domain.models import SessionId

log = structlog.get_logger("cpe.streams")


class OutputBuffer:
    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._closed = False
        self._cond = threading.Condition()
        self._wakers: set[Callable[[], None]] = set()

    def append(self, chunk: str) -> None:
        with self._cond:
            if self._closed:
                return
            self._chunks.append(chunk)
            self._cond.notify_all()
            wakers = list(self._wakers)
        self._wake(wakers)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            wakers = list(self._wakers)
        self._wake(wakers)

    def _wake(self, wakers: list[Callable[[], None]]) -> None:
        """Wake asyncio subscribers. A subscriber can never break the run that feeds it: one
        whose event loop is gone (closed with a read pending) is dropped."""
        for wake in wakers:
            try:
                wake()
            except Exception:
                log.warning("dropping an output subscriber that cannot be woken", exc_info=True)
                self._remove_waker(wake)

    @property
    def closed(self) -> bool:
        return self._closed

    def text(self) -> str:
        with self._cond:
            return "".join(self._chunks)

    def subscribe(self) -> AgentStream:
        return AgentStream(self)

    # -- for AgentStream
    def _get(self, index: int) -> str | None:
        """The chunk at ``index``, waiting for it; None once the run ended before it."""
        with self._cond:
            self._cond.wait_for(lambda: index < len(self._chunks) or self._closed)
            return self._chunks[index] if index < len(self._chunks) else None

    def _poll(self, index: int) -> tuple[str | None, bool]:
        with self._cond:
            if index < len(self._chunks):
                return self._chunks[index], False
            return None, self._closed

    def _add_waker(self, wake: Callable[[], None]) -> None:
        with self._cond:
            self._wakers.add(wake)

    def _remove_waker(self, wake: Callable[[], None]) -> None:
        with self._cond:
            self._wakers.discard(wake)


class AgentStream:
    """One subscriber's view of a run's output."""

    def __init__(self, buffer: OutputBuffer):
        self._buffer = buffer
        self._index = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        chunk = self._buffer._get(self._index)
        if chunk is None:
            raise StopIteration
        self._index += 1
        return chunk

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        loop = asyncio.get_running_loop()
        while True:
            chunk, ended = self._buffer._poll(self._index)
            if chunk is not None:
                self._index += 1
                return chunk
            if ended:
                raise StopAsyncIteration
            ready = asyncio.Event()

            def wake(ready: asyncio.Event = ready) -> None:
                loop.call_soon_threadsafe(ready.set)

            self._buffer._add_waker(wake)
            try:
                chunk, ended = self._buffer._poll(self._index)  # it may have come meanwhile
                if chunk is None and not ended:
                    await ready.wait()
            finally:
                self._buffer._remove_waker(wake)


class StreamRegistry:
    """The engine's handle map: the output of every run that has started and not ended."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._buffers: dict[SessionId, OutputBuffer] = {}

    def open(self, session_id: SessionId) -> OutputBuffer:
        buffer = OutputBuffer()
        with self._lock:
            self._buffers[session_id] = buffer
            self._lock.notify_all()
        return buffer

    def wait_subscribe(self, session_id: SessionId, timeout: float) -> AgentStream | None:
        """Like ``subscribe``, waiting up to ``timeout`` for the run to start."""
        with self._lock:
            self._lock.wait_for(lambda: session_id in self._buffers, timeout)
        return self.subscribe(session_id)

    def close(self, session_id: SessionId) -> None:
        with self._lock:
            buffer = self._buffers.pop(session_id, None)
        if buffer is not None:
            buffer.close()

    def subscribe(self, session_id: SessionId) -> AgentStream | None:
        buffer = self.buffer(session_id)
        return buffer.subscribe() if buffer is not None else None

    def buffer(self, session_id: SessionId) -> OutputBuffer | None:
        """The output of a run that has started and not ended (None otherwise)."""
        with self._lock:
            return self._buffers.get(session_id)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._buffers
