"""``TextLog``: plain text in a scrolling log, wrapped to the width, written as it comes.

An agent's output arrives in chunks that need not end at a line's end: a chunk's last, partial
line is held until the rest of it comes (or ``flush``). Each line is a ``rich.text.Text``
(never markup), its control characters taken out (``plain``).
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from adapters.tui.text import plain


class TextLog(RichLog):
    def __init__(self, *, id: str | None = None, auto_scroll: bool = True):
        super().__init__(id=id, wrap=True, markup=False, highlight=False, auto_scroll=auto_scroll)
        self._partial = ""
        self.text_lines: list[str] = []  # every whole line written, as written (for a reader)

    def reset(self) -> None:
        self.clear()
        self._partial = ""
        self.text_lines = []

    def feed(self, chunk: str) -> None:
        """Append ``chunk``: its whole lines shown now, a partial last line once it ends."""
        *lines, self._partial = (self._partial + plain(chunk)).split("\n")
        self.put(lines)

    def flush(self) -> None:
        """Show the partial last line, if any (the stream ended)."""
        if self._partial:
            partial, self._partial = self._partial, ""
            self.put([partial])

    def put(self, lines: list[str]) -> None:
        for line in lines:
            self.text_lines.append(line)
            self.write(Text(line.expandtabs(4)))
