"""The loopback HTTP server: answers the ``claude`` CLI from a book of scenarios, records all.

It also plays the API's bad days on demand: a ``Fault`` answering every model request
(``fail``/``heal``), a dead address (``refuse_connections``/``accept_connections``) and a
subscription's headroom on good answers (``set_quota``). Each request is read, played and
recorded by ``handler.RequestHandler`` on one of the server's threads.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Self

from adapters.scripted_model.faults import Fault
from adapters.scripted_model.handler import ModelHTTPServer, RecordedRequest, RequestHandler
from adapters.scripted_model.quota import Quota, Wire
from adapters.scripted_model.scenario import Scenario


class ScriptedModelServer:
    """A Messages API on ``127.0.0.1`` that plays ``book``; a context manager that starts it.

    The port is bound on construction (``port=0``: any free port), so ``base_url`` is known
    before ``start()``. ``close()`` stops serving, ends held (``hang``) responses and open
    connections, and joins every handler thread; it is idempotent, in every state (refusing
    connections too).

    ``report_usage=False``: every answer reports 0 tokens, so the claude CLI (and cpe's pricing
    of codex runs, where the model has a price) counts a cost of $0: what ``cpe scripted-model
    serve`` and ``cpe run --scripted`` use, so that a scripted run never looks like money spent.
    By default answers report a rough estimate (four bytes a token), which keeps the CLIs'
    bookkeeping plausible.
    """

    def __init__(
        self,
        book: Scenario | Sequence[Scenario],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        report_usage: bool = True,
    ) -> None:
        self.book: tuple[Scenario, ...] = (book,) if isinstance(book, Scenario) else tuple(book)
        self.report_usage = report_usage
        self._changed = threading.Condition()  # guards everything below; notified on change
        self._records: list[RecordedRequest] = []
        self._hanging = 0
        self._connections: set[socket.socket] = set()
        self._closed = False
        self._started = False
        self._listening = True
        self._fault: Fault | None = None
        self._fault_left: int | None = None  # answers left before the fault heals itself
        self._quota: Quota | None = None
        self._thread: threading.Thread | None = None
        self._holder: socket.socket | None = None  # the port, held while refusing
        # Serialises start, close, refuse_connections and accept_connections (which block on
        # the serving thread, so they cannot hold ``_changed``, which the handlers need).
        self._control = threading.Lock()
        # Held responses wait on this socket pair as well as their connection: ``close()``
        # writes one byte and never drains it, so every hang, now or later, sees it readable.
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._httpd = ModelHTTPServer((host, port), RequestHandler, owner=self)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def client_env(self) -> dict[str, str]:
        """The environment the ``claude`` CLI needs to talk to this server (no vendor traffic)."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "scripted-model",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def start(self) -> Self:
        with self._control:
            with self._changed:
                if self._closed:
                    raise RuntimeError("the scripted model server is closed")
                self._started = True
                serve = self._thread is None and self._listening
            if serve:
                self._serve()
        return self

    def close(self) -> None:
        with self._control:
            with self._changed:
                if self._closed:
                    return
                self._closed = True
                connections = list(self._connections)
                thread, self._thread = self._thread, None
            if thread is not None:
                self._httpd.shutdown()
            self._wake_writer.send(b"x")
            for connection in connections:
                _hang_up(connection)
            # Closes the listening socket (again, when refusing: harmless) and joins the
            # handler threads (block_on_close).
            self._httpd.server_close()
            holder, self._holder = self._holder, None
            if holder is not None:
                holder.close()
            if thread is not None:
                thread.join()
            self._wake_reader.close()
            self._wake_writer.close()
            with self._changed:
                self._changed.notify_all()

    # -- bad days

    def fail(self, fault: Fault) -> None:
        """Answer every model request with ``fault`` from now on: ``fault.times`` of them, or
        all until ``heal()``. Replaces the fault in place, if any."""
        with self._changed:
            self._fault, self._fault_left = fault, fault.times
            self._changed.notify_all()

    def heal(self) -> None:
        """Answer model requests from the book again."""
        with self._changed:
            self._fault = self._fault_left = None
            self._changed.notify_all()

    @property
    def fault(self) -> Fault | None:
        """The fault answering model requests now (None once healed, by itself too)."""
        with self._changed:
            return self._fault

    def set_quota(self, quota: Quota | None) -> None:
        """Report ``quota``'s headroom in the headers of every good model answer (the
        Anthropic unified rate-limit headers, codex's ``x-codex-*``); None: report none."""
        with self._changed:
            self._quota = quota

    @property
    def quota(self) -> Quota | None:
        with self._changed:
            return self._quota

    def refuse_connections(self) -> None:
        """Stop listening, as a dead model address: connecting to the port is refused
        (ECONNREFUSED) until ``accept_connections()``. Open connections are hung up (idle
        keep-alive ones and held responses too), so no client is answered meanwhile."""
        with self._control:
            with self._changed:
                if self._closed:
                    raise RuntimeError("the scripted model server is closed")
                if not self._listening:
                    return
                self._listening = False
                connections = list(self._connections)
                thread, self._thread = self._thread, None
            if thread is not None:
                self._httpd.shutdown()  # serve_forever returns; it can run again later
                thread.join()
            # The port stays this server's: a socket bound to it but not listening (connects
            # are refused all the same), taken before the listener goes, so that no other
            # process (another test binding port 0) gets it meanwhile.
            self._holder = _hold_port(self._httpd)
            self._httpd.socket.close()
            for connection in connections:
                _hang_up(connection)

    def accept_connections(self) -> None:
        """Listen again on the same address (``base_url`` is unchanged), and serve if started.

        Raises ``OSError`` if the port was taken meanwhile (the server then stays refusing)."""
        with self._control:
            with self._changed:
                if self._closed:
                    raise RuntimeError("the scripted model server is closed")
                if self._listening:
                    return
            httpd = self._httpd
            httpd.socket = socket.socket(httpd.address_family, httpd.socket_type)
            try:
                # SO_REUSEADDR: the hung-up connections' TIME_WAIT is fine; SO_REUSEPORT: the
                # port's holder is still bound, and goes once this one listens.
                httpd.server_bind()
                httpd.server_activate()
            except OSError:
                httpd.socket.close()
                raise
            holder, self._holder = self._holder, None
            if holder is not None:
                holder.close()
            with self._changed:
                self._listening = True
                serve = self._started
            if serve:
                self._serve()

    @property
    def listening(self) -> bool:
        """False while refusing connections, or once closed."""
        with self._changed:
            return self._listening and not self._closed

    def _serve(self) -> None:
        # Called with ``_control`` held.
        thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model:{self._httpd.server_address[1]}",
            daemon=True,
        )
        with self._changed:
            self._thread = thread
        thread.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        with self._changed:
            return tuple(self._records)

    @property
    def hanging(self) -> int:
        """How many responses are being held open right now."""
        with self._changed:
            return self._hanging

    def wait_until(self, condition: Callable[[ScriptedModelServer], bool], timeout: float) -> bool:
        """Block until ``condition(self)`` holds (re-checked on every request and hang end)."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), timeout)

    # -- called by the handler threads

    def _record(self, record: RecordedRequest) -> None:
        with self._changed:
            self._records.append(record)
            self._changed.notify_all()

    def _track(self, connection: socket.socket, opened: bool) -> None:
        with self._changed:
            if not opened:
                self._connections.discard(connection)
                return
            self._connections.add(connection)
            gone = self._closed or not self._listening
        if gone:  # accepted while closing or refusing, after the snapshot of connections
            _hang_up(connection)

    def _take_fault(self) -> Fault | None:
        """The fault answering this request, counting it against ``times``."""
        with self._changed:
            fault = self._fault
            if fault is not None and self._fault_left is not None:
                self._fault_left -= 1
                if self._fault_left <= 0:
                    self._fault = self._fault_left = None
            return fault

    def _headroom(self, wire_name: Wire) -> dict[str, str]:
        with self._changed:
            quota = self._quota
        return {} if quota is None else quota.headers(wire_name, datetime.now(UTC))

    def _hold(self, connection: socket.socket) -> None:
        """Send nothing until the client disconnects or the server closes."""
        with self._changed:
            self._hanging += 1
            self._changed.notify_all()
        try:
            while True:
                readable, _, _ = select.select([connection, self._wake_reader], [], [])
                if self._wake_reader in readable:
                    return
                try:
                    if not connection.recv(65536):
                        return  # the client hung up
                except OSError:
                    return
        finally:
            with self._changed:
                self._hanging -= 1
                self._changed.notify_all()


def _hold_port(httpd: ModelHTTPServer) -> socket.socket:
    """A socket bound to ``httpd``'s address and not listening: the port cannot be taken by
    anyone else, and a connect to it is refused (no listener), as at a dead address."""
    holder = socket.socket(httpd.address_family, httpd.socket_type)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(httpd.server_address[:2])
    return holder


def _hang_up(connection: socket.socket) -> None:
    # shutdown() wakes a handler blocked reading the next request on a keep-alive connection;
    # close() alone would not.
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
