"""``cpe tui``: the terminal console, a Textual app over a ``Feed``.

It draws the board from the feed's views as they change (a worker thread iterates
``feed.watch()`` and hands each view to the UI thread), opens an item's and a run's screens,
and sends a person's actions, each confirmed first, through ``feed.act`` in a worker thread
(the engine answers once it has processed them), showing the answer or why it was refused.

When the watch ends (the engine stopped, or was killed) the console says so, keeps showing the
last state (read-only, from the journal: ``reopen`` gives a stopped engine's feed), and asks
``reopen`` again every ``RECONNECT_EVERY`` seconds until an engine answers: then it says
"reconnected" and is live again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType

from adapters.tui.board import BoardScreen
from adapters.tui.detail import ItemScreen, RunScreen
from adapters.tui.feed import Feed, Refused
from adapters.tui.modals import Choose, Confirm, Help, Reason
from adapters.tui.text import plain, plain_view
from domain.models import item_ref

RECONNECT_EVERY = 1.0  # seconds between two tries to reach an engine again
SAID_FOR = 10.0  # seconds a notification stays
NOT_RUNNING = "the engine is not running: its last state, read-only; waiting for one…"
STOPPED = "the engine is not running: its last state, read-only"
CONNECTED = "the engine runs: live"
READ_ONLY = "the engine is not running: its last state is read-only (start it with cpe run)"


class Console(App[int]):
    """The console over ``feed``; ``reopen`` (None: never) gives a feed again once the watch
    ended: a running engine's when one answers, else the journal's; ``starting`` says, while
    the feed is not live, whether an engine holds the state without answering yet (None: no)."""

    TITLE = "cpe"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_console", "quit"),
        Binding("ctrl+c", "quit_console", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help"),
        Binding("ctrl+z", "suspend_process", show=False),  # as any terminal program: fg
    ]

    def __init__(
        self,
        feed: Feed,
        reopen: Callable[[], Feed] | None = None,
        *,
        starting: Callable[[], str | None] = lambda: None,
    ):
        super().__init__()
        self.feed = feed
        self.reopen = reopen
        self.starting = starting
        self.view: dict[str, Any] | None = None
        self.connection = ""
        self.said = ""
        self.closing = threading.Event()
        self.board = BoardScreen()

    # ------------------------------------------------------------------ life

    def on_mount(self) -> None:
        self.push_screen(self.board)
        self.watch_engine()

    def action_quit_console(self) -> None:
        self.closing.set()
        self.feed.close()
        self.exit(0)

    def on_unmount(self) -> None:
        self.closing.set()
        self.feed.close()

    def action_help(self) -> None:
        if not isinstance(self.screen, Help):
            self.push_screen(Help())

    # ------------------------------------------------------------------ the feed

    @work(thread=True, group="watch", exclusive=True, exit_on_error=False)
    def watch_engine(self) -> None:
        """Draw each view the feed gives. A running engine's watch ends when it goes: the
        console says so and opens the feed again (the journal's last state, read-only, until
        an engine answers); a stopped engine's ends once one answers (or at once: then it is
        asked again every ``RECONNECT_EVERY`` seconds)."""
        stopped_at: str | None = None  # the line saying when the engine went away
        down = False  # the console shows a stopped engine's state
        while not self.closing.is_set():
            feed = self.feed
            live = feed.live
            if not live:
                down = True
                waiting = NOT_RUNNING if self.reopen is not None else STOPPED
                waiting = stopped_at or self._starting() or waiting
                self._call(self._connected, waiting)
            try:
                for view in feed.watch():
                    self._call(self.show, plain_view(view))
                    if self.closing.is_set():
                        return
                    if live and down:  # its first view is drawn: live again
                        said = "reconnected" if stopped_at is not None else CONNECTED
                        self._call(self._connected, said, True)
                        stopped_at, down = None, False
            except Exception as exc:  # a broken connection is an engine gone away
                self._call(self.tell, f"the engine's feed broke: {exc}", True)
            if self.closing.is_set() or self.reopen is None:
                return
            if live:
                down = True
                at = datetime.now(UTC).strftime("%H:%M:%S")
                stopped_at = f"engine stopped at {at} UTC; showing its last state; reconnecting…"
                self._call(self._connected, stopped_at)
            else:  # not the engine yet: a condition wait, then ask again
                self.closing.wait(RECONNECT_EVERY)
            self._reopen()

    def _starting(self) -> str | None:
        """The connection line while an engine holds the state but does not answer yet."""
        try:
            said = self.starting()
        except Exception:  # a state directory that cannot be read: the usual line
            return None
        return f"{said}; its last state meanwhile, read-only; waiting…" if said else None

    def _reopen(self) -> None:
        """The feed again: a running engine's if one answers, else the journal's."""
        assert self.reopen is not None
        try:
            feed = self.reopen()
        except Exception as exc:  # the journal unreadable for a moment: tried again
            self._call(self.tell, f"cannot read the engine's state: {exc}", True)
            self.closing.wait(RECONNECT_EVERY)
            return
        self._swap(feed)

    def _swap(self, feed: Feed) -> None:
        old, self.feed = self.feed, feed
        if old is not feed:
            old.close()
        if self.closing.is_set():
            feed.close()

    def _call(self, function: Callable[..., Any], *args: Any) -> None:
        """``function(*args)`` on the UI thread; nothing once the app has gone."""
        try:
            self.call_from_thread(function, *args)
        except RuntimeError:  # the app is no longer running
            pass
        except Exception:  # a drawing that failed must not end the watch: logged
            self.log.error("the console could not draw", function=repr(function))

    def show(self, view: dict[str, Any]) -> None:
        """A new board view: every screen that draws from it redraws."""
        self.view = view
        for screen in self.screen_stack:
            show = getattr(screen, "show", None)
            if show is not None:
                show(view)

    def _connected(self, text: str, flash: bool = False) -> None:
        """The connection line of every screen says ``text`` (empty: live); ``flash``: said
        once in the status line and a notification instead (``reconnected``). The same line
        again changes nothing (a stopped engine's feed asked again every second)."""
        if not flash and text == self.connection:
            return
        self.connection = "" if flash else text
        for screen in self.screen_stack:
            connection = getattr(screen, "connection", None)
            if callable(connection):
                connection(self.connection)
        if flash:
            self.tell(text)
            return
        self._say("")  # what was said before no longer holds
        if text.startswith("engine stopped"):
            self.notify(text, severity="warning", timeout=SAID_FOR, markup=False)

    def tell(self, text: str, error: bool = False, *, toast: bool = True) -> None:
        """An answer, a refusal, a change of connection: in the status line of every screen
        and (``toast``) as a notification (its control characters out: it may quote a title)."""
        text = plain(text)
        self._say(text)
        if toast:
            self.notify(
                text, severity="error" if error else "information", timeout=SAID_FOR, markup=False
            )

    def _say(self, text: str) -> None:
        self.said = text
        for screen in self.screen_stack:
            said = getattr(screen, "said", None)
            if callable(said):
                said(text)

    # ------------------------------------------------------------------ navigation

    def open_item(self, item_id: str) -> None:
        self.push_screen(ItemScreen(item_id))

    def open_run(self, session_id: str) -> None:
        self.push_screen(RunScreen(session_id))

    def _read_only(self) -> bool:
        """True, said at once, when no engine runs to take an action (none is asked)."""
        if self.feed.live:
            return False
        self.tell(READ_ONLY, True)
        return True

    def _item(self) -> str | None:
        """The item the actions are about: the item screen's, or the board's cursor's; None
        (said) when there is none, or no engine to act."""
        if self._read_only():
            return None
        selected = getattr(self.screen, "selected", None)
        item_id = selected() if callable(selected) else None
        if item_id is None:
            self.tell("no work item is selected", True)
        return item_id

    def _title(self, item_id: str) -> str:
        for item in (self.view or {}).get("work_items", []):
            if item["id"] == item_id:
                return f"{item_ref(item_id)} {item['title']}"
        return item_ref(item_id)

    # ------------------------------------------------------------------ actions

    def action_retry(self) -> None:
        item_id = self._item()
        if item_id is not None:
            self.ask(
                f"Retry {self._title(item_id)}? Its implementor runs now.",
                {"op": "retry", "work_item_id": item_id},
            )

    def action_cancel(self) -> None:
        item_id = self._item()
        if item_id is not None:
            self.ask(
                f"Cancel the running agent of {self._title(item_id)}? The item goes to blocked.",
                {"op": "cancel", "work_item_id": item_id},
            )

    def action_set_status(self) -> None:
        item_id = self._item()
        if item_id is None:
            return
        statuses = (self.view or {}).get("statuses", [])
        current = next(
            (i["status"] for i in (self.view or {}).get("work_items", []) if i["id"] == item_id),
            None,
        )

        def chosen(status: str | None) -> None:
            if status is not None:
                self.ask(
                    f"Set the status of {self._title(item_id)} to {status}?",
                    {"op": "set-status", "work_item_id": item_id, "to": status},
                )

        self.push_screen(Choose(f"Status of {self._title(item_id)}:", statuses, current), chosen)

    def action_pause(self) -> None:
        if self._read_only():
            return

        def reasoned(reason: str | None) -> None:
            if reason is not None:
                said = f" ({reason})" if reason else ""
                self.ask(
                    f"Pause dispatch{said}? No agent run starts until resumed; runs go on.",
                    {"op": "pause", "reason": reason},
                )

        self.push_screen(Reason("Pause dispatch: why? (for cpe status and the board)"), reasoned)

    def action_resume(self) -> None:
        if not self._read_only():
            self.ask("Resume dispatch?", {"op": "resume"})

    def action_refresh_engine(self) -> None:
        if not self._read_only():
            self.ask("Refresh: the engine polls its tracker and forge now?", None)

    def ask(self, question: str, request: dict[str, Any] | None) -> None:
        """Confirm, then send ``request`` (None: a refresh) in a worker."""

        def answered(yes: bool | None) -> None:
            if yes:
                self.tell("asking the engine…", toast=False)
                self.act(request)
            else:
                self.tell("nothing done")

        self.push_screen(Confirm(question), answered)

    @work(thread=True, group="act", exit_on_error=False)
    def act(self, request: dict[str, Any] | None) -> None:
        feed = self.feed
        try:
            answer = feed.refresh() if request is None else feed.act(request)
        except Refused as exc:
            self._call(self.tell, f"refused: {exc}", True)
        except Exception as exc:  # the engine went away while asked
            self._call(self.tell, f"not done: {exc}", True)
        else:
            self._call(self.tell, answer)
