"""A real terminal for the console's tests: a tmux server of its own, read as a person sees it
(``capture-pane``), and the colours a captured screen uses."""

from __future__ import annotations

import re
import subprocess
import uuid

from tests.e2e.running import wait_for

# SGR codes of a hue (red … cyan, in the foreground or the background, normal or bright), and
# the extended colour forms (38;5;N, 38;2;R;G;B and the background's 48;…): a NO_COLOR screen
# has none (black, white and greys, bold and reverse are not colours).
HUES = {*range(31, 37), *range(41, 47), *range(91, 97), *range(101, 107), 38, 48}


def colours(escaped: str) -> set[int]:
    """The hue codes among the SGR sequences of a captured screen."""
    codes = set()
    for params in re.findall(r"\x1b\[([0-9;]*)m", escaped):
        codes |= {int(p) for p in params.split(";") if p} & HUES
    return codes


class Tmux:
    """A tmux server of its own (``-L``: a parallel run does not share it) with one window."""

    def __init__(self, size: tuple[int, int]):
        self.socket = f"cpe-tui-{uuid.uuid4().hex[:12]}"
        self.size = size

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def start(self, command: str) -> None:
        cols, lines = self.size
        started = self.tmux(
            "new-session", "-d", "-s", "tui", "-x", str(cols), "-y", str(lines), command
        )
        assert started.returncode == 0, started.stderr

    def screen(self, *, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "tui").stdout

    def shows(self, text: str, timeout: float = 60) -> bool:
        return wait_for(lambda: text in self.screen(), timeout)

    def keys(self, *keys: str) -> None:
        assert self.tmux("send-keys", "-t", "tui", *keys).returncode == 0

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "tui").returncode == 0

    def close(self) -> None:
        self.tmux("kill-server")
