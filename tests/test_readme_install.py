"""The README's install advice: the first line installs what the demo needs and shows its
progress, the second what the tests need; cpe goes on a user's PATH without its interpreter."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_blocks() -> list[list[str]]:
    """Each fenced block of the README, as its non-blank lines."""
    text = (ROOT / "README.md").read_text()
    return [
        [line for line in block.splitlines() if line.strip()]
        for block in re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", text)
    ]


def pip_installs(line: str) -> list[list[str]]:
    """The arguments of each ``pip install`` in a shell line."""
    commands = [shlex.split(part) for part in line.split("&&")]
    return [words[2:] for words in commands if words[0].endswith("/pip") and words[1] == "install"]


def test_the_first_line_installs_the_base_alone_with_its_progress_and_runs_the_demo() -> None:
    demo, _ = code_blocks()[0]
    assert pip_installs(demo) == [["-e", "."]]  # no extra, no -q
    assert demo.endswith(".venv/bin/cpe demo")


def test_the_second_line_installs_the_dev_extra_and_runs_the_tests() -> None:
    _, tests = code_blocks()[0]
    (arguments,) = pip_installs(tests)
    assert arguments[-2:] == ["-e", ".[dev]"]
    assert ".venv/bin/python -m pytest" in tests


def test_running_it_on_a_repository_puts_no_venv_bin_on_path() -> None:
    """The old advice, ``export PATH=/path/to/cpe/.venv/bin:$PATH``, made cpe's python the
    pipeline's: the README links the command alone."""
    (block,) = [b for b in code_blocks() if any(line.startswith("cd your-repo") for line in b)]
    assert not [line for line in block if "PATH=" in line and ".venv/bin" in line]
    assert block[0].split("#")[0].strip().endswith("ln -s /path/to/cpe/.venv/bin/cpe ~/.local/bin/")
