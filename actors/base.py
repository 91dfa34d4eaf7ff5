"""The base of every cpe actor: failures from every pykka path reach the supervisor.

pykka has several failure paths that bypass ``on_failure`` (checked on pykka 4.5): an exception in
an ``ask`` goes back to the caller and the actor keeps running; an exception in ``on_start`` calls
neither; a ``BaseException`` stops every actor in the process. ``SupervisedActor`` replaces the loop
so that each of these is one thing, a *crash*: the caller of an ``ask`` still gets the exception,
the actor stops (its queued asks fail with ``ActorDeadError``), ``release()`` runs, and the crash is
reported to the supervisor, which decides about a restart. Nothing ever reaches
``ActorRegistry.stop_all``.

An actor that ends without crashing (it stopped itself, or someone stopped it) reports that too,
with ``None`` for the exception: the supervisor restarts a ``permanent`` child whatever the
reason it ended, and tells a normal exit (no restart for ``transient``) from a crash. A
``release()`` that raises during a normal stop makes the exit abnormal.

The loop relies on pykka 4's ``_actor_loop_setup``/``_actor_loop_running``/
``_actor_loop_teardown`` and envelope shape; pyproject pins pykka below 5, and
tests/actors/test_supervision.py covers each failure path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka
import structlog

CrashReport = Callable[[str, int, BaseException | None], None]
"""``(child_id, generation, exception)``, the exception None for a normal exit; must not
block."""


class SupervisedActor(pykka.ThreadingActor):
    def __init__(
        self, *, child_id: str, generation: int = 0, report: CrashReport | None = None
    ) -> None:
        super().__init__()
        self.child_id = child_id
        self.generation = generation
        self._report = report
        self._crashed = False
        self._stop_error: BaseException | None = None
        self.log = structlog.get_logger("cpe.actor").bind(actor=child_id)

    # -- hooks for subclasses
    def release(self) -> None:
        """Free what the actor holds (timers, threads, handles): after a stop *and* a crash."""

    def on_crash(self, exc: BaseException) -> None:
        """Runs in the actor's thread when it crashed, before the supervisor hears of it."""

    # -- pykka's loop, with every failure path turned into a crash
    def on_stop(self) -> None:
        try:
            self.release()
        except Exception as exc:  # an exit that did not clean up is not a normal one
            self.log.exception("release failed while stopping")
            self._stop_error = exc

    def _actor_loop_setup(self) -> None:
        try:
            self.on_start()
        except BaseException as exc:  # every failure is a crash, reported below
            self._crash(exc)

    def _actor_loop_running(self) -> None:
        while not self.actor_stopped.is_set():
            envelope = self.actor_inbox.get()
            try:
                response = self._handle_receive(envelope.message)
            except BaseException as exc:  # see the module docstring
                if envelope.reply_to is not None:
                    envelope.reply_to.set_exception(exc_info=(type(exc), exc, exc.__traceback__))
                self._crash(exc)
                continue
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)

    def _actor_loop_teardown(self) -> None:
        super()._actor_loop_teardown()
        # A crash was reported by _crash; any other end of the loop is a stop.
        if not self._crashed and self._report is not None:
            self._report(self.child_id, self.generation, self._stop_error)

    def _crash(self, exc: BaseException) -> None:
        self._crashed = True
        self.log.error("actor crashed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
        pykka.ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        try:
            self.on_crash(exc)
        except Exception:
            self.log.exception("on_crash failed")
        try:
            self.release()
        except Exception:
            self.log.exception("release after a crash failed")
        if self._report is not None:
            self._report(self.child_id, self.generation, exc)


def tell(ref: pykka.ActorRef[Any] | None, message: object) -> bool:
    """Tell ``message`` to ``ref``; False (instead of an exception) when it is not alive."""
    if ref is None:
        return False
    try:
        ref.tell(message)
    except pykka.ActorDeadError:
        return False
    return True
