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
        self.pinned = True  # the view is at the end: it follows what comes

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """A reader who scrolls back unpins the view; back at the end (End), it follows."""
        super().watch_scroll_y(old_value, new_value)
        self.pinned = new_value >= self.max_scroll_y

    def reset(self) -> None:
        self.clear()
        self._partial = ""
        self.text_lines = []
        self.pinned = True

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
        """Write ``lines``; the log follows them only while the reader is at its end (one who
        scrolled back stays where they are, as ``less +F``; End follows again)."""
        follow = self.auto_scroll and self.pinned
        for line in lines:
            self.text_lines.append(line)
            self.write(Text(line.expandtabs(4)), scroll_end=follow)
