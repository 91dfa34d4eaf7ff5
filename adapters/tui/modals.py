"""The console's dialogs: a confirmation (y/Enter yes, n/Esc no), a choice among statuses, a
pause's reason, and the keys' help. Each is a modal screen answering through ``dismiss``."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option


def modal_css(name: str, width: int = 70) -> str:
    """A dialog's style, centred with a border (a screen's CSS is scoped to it: by its name)."""
    return f"""
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: {width}; max-width: 100%; height: auto; max-height: 100%;
    border: round $accent; padding: 0 1; background: $surface;
}}
{name} .hint {{ color: $text-muted; }}
"""


class Confirm(ModalScreen[bool]):
    """``question``: y or Enter says yes, n or Esc no."""

    DEFAULT_CSS = modal_css("Confirm")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question), id="question")
            yield Static(Text("y/Enter: yes · n/Esc: no"), classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class Choose(ModalScreen[str | None]):
    """One of ``choices`` (arrows or j/k, Enter), or none (Esc)."""

    DEFAULT_CSS = modal_css("Choose")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "give_up", "back"),
        Binding("j", "move(1)", show=False),
        Binding("k", "move(-1)", show=False),
    ]

    def __init__(self, title: str, choices: list[str], current: str | None = None):
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text))
            yield OptionList(*(Option(Text(c), id=c) for c in self.choices), id="choices")
            yield Static(Text("Enter: choose · Esc: back"), classes="hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.choices:
            options.highlighted = self.choices.index(self.current)
        options.focus()

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        options.action_cursor_down() if step > 0 else options.action_cursor_up()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_give_up(self) -> None:
        self.dismiss(None)


class Reason(ModalScreen[str | None]):
    """A line of text (Enter), or none (Esc): why dispatch is paused."""

    DEFAULT_CSS = modal_css("Reason")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "give_up", "back")]

    def __init__(self, prompt: str):
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.prompt))
            yield Input(placeholder="why (may be empty)", id="reason")
            yield Static(Text("Enter: go on · Esc: back"), classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_give_up(self) -> None:
        self.dismiss(None)


KEYS = """\
The board
  up/down, j/k    move between the work items (or the runs)
  Tab             from the work items to the runs and back
  Enter           open the item (its detail and runs), or the run
  r               retry the item (run its implementor now)
  c               cancel the item's running agent
  s               set the item's status (a choice)
  p               pause dispatch (a reason asked)
  u, P            resume dispatch
  f, R            refresh: the engine polls its tracker and forge now
  d               the recent decisions
  a               the model accounts' headroom
  ?               this help
  q, Ctrl-C       quit (Ctrl-Z suspends: fg comes back)
An item
  up/down, j/k    move between its runs; Enter opens one
  PgUp/PgDn       scroll its detail (Tab: to the detail and back)
  r, c, s         retry, cancel, set status, as on the board
  Esc, Backspace  back
A run
  up/down, PgUp/PgDn, Home/End  scroll its output (End: follow it)
  Esc, Backspace  back
Every action asks first (y/Enter yes, n/Esc no); the engine's answer,
or why it refused, is shown at the bottom. A stopped engine's state is
read-only: an action says so at once."""


class Help(ModalScreen[None]):
    DEFAULT_CSS = modal_css("Help", 78) + "Help VerticalScroll { height: auto; max-height: 18; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "close", "close")
    ]

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield Static(Text(KEYS), id="keys")
            yield Static(Text("Esc: close · up/down: scroll"), classes="hint")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
