"""Services beside the engine (the control socket, the dashboard), supervised apart from it.

A ``Service`` is a blocking ``serve()`` and a ``shutdown()`` that makes it return. A
``ServiceActor`` runs ``serve()`` in a thread of its own; when that thread ends without being
asked to (the server crashed, or returned by itself) the actor crashes, and its supervisor
starts a new instance after a backoff.

Each service has a ``Supervisor`` of its own, ``one_for_one``, and nothing else in it: its crash
never restarts or stops the engine, and when it keeps crashing past the restart intensity only
that service is given up (logged; the engine goes on without it until cpe restarts). A service
that cannot start with its configuration (``serve()`` raised a ``ConfigError``: its address is
in use) is given up at once, not restarted: one error line names why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from actors.base import SupervisedActor, tell
from actors.settings import SupervisorSettings
from actors.supervisor import ChildSpec, Supervisor, permanent_error

log = structlog.get_logger("cpe.services")

STOP_TIMEOUT = 10.0  # seconds a service gets to return from serve() after shutdown()


class Service(Protocol):
    name: str

    def serve(self) -> None:
        """Serve until ``shutdown()``; raise on a failure (the supervisor restarts it), a
        ``ConfigError`` when no restart could fix it (the supervisor gives it up at once)."""

    def shutdown(self) -> None:
        """Make ``serve()`` return soon; callable from any thread, before or during it."""


class ServiceEnded(RuntimeError):
    """The service's thread ended without a stop: a crash of the actor."""


class _Ended:
    def __init__(self, error: BaseException | None):
        self.error = error


class ServiceActor(SupervisedActor):
    def __init__(self, service: Service, **base: Any) -> None:
        super().__init__(**base)
        self.service = service
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def on_start(self) -> None:
        ref = self.actor_ref

        def run() -> None:
            error: BaseException | None = None
            try:
                self.service.serve()
            except BaseException as exc:  # reported to the actor: a crash, restarted
                error = exc
            if not self._stopping.is_set():
                tell(ref, _Ended(error))

        self._thread = threading.Thread(
            target=run, name=f"cpe-service-{self.service.name}", daemon=True
        )
        self._thread.start()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Ended):
            why = f"{type(message.error).__name__}: {message.error}" if message.error else None
            # From the service's error: the supervisor sees a ConfigError behind the crash.
            raise ServiceEnded(
                f"the {self.service.name} stopped" + (f" ({why})" if why else "")
            ) from message.error
        return None

    def release(self) -> None:
        self._stopping.set()
        try:
            self.service.shutdown()
        finally:
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(STOP_TIMEOUT)
                if thread.is_alive():
                    log.error("a service did not stop in time", service=self.service.name)


class Services:
    """The services of one process, each under its own supervisor."""

    def __init__(self, settings: SupervisorSettings | None = None):
        base = settings or SupervisorSettings()
        self.settings = base.model_copy(update={"strategy": "one_for_one"})
        self._supervisors: dict[str, Supervisor] = {}

    def start(self, name: str, build: Callable[[], Service]) -> None:
        """Start the service ``build()`` makes (a new one on every restart)."""

        def give_up(exc: BaseException) -> None:
            permanent = permanent_error(exc)
            if permanent is not None:
                log.error(
                    "a service cannot start; it is off until cpe restarts (the engine goes on)",
                    service=name,
                    error=str(permanent),
                )
                return
            log.error(
                "a service keeps failing; it is off until cpe restarts (the engine goes on)",
                service=name,
                error=f"{type(exc).__name__}: {exc}",
            )

        supervisor = Supervisor(self.settings, on_give_up=give_up)
        self._supervisors[name] = supervisor

        def start(generation: int, report: Any) -> Any:
            return ServiceActor.start(
                build(), child_id=f"service:{name}", generation=generation, report=report
            )

        supervisor.start_child(ChildSpec(f"service:{name}", start))

    def supervisor(self, name: str) -> Supervisor:
        return self._supervisors[name]

    def stop(self) -> None:
        for supervisor in reversed(list(self._supervisors.values())):
            supervisor.stop()
        self._supervisors.clear()
