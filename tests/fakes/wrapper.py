"""An executable named like a CLI that runs one of the fake CLIs with this interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fakes.executable import write_executable

_WRAPPER = """\
#!{python}
# Written by tests/fakes/wrapper.py: run {fake_name} in this process.
import os
import sys

os.execv(sys.executable, [sys.executable, {fake!r}, *sys.argv[1:]])
"""


def install_wrapper(directory: Path, name: str, fake: Path) -> Path:
    """Write an executable ``name`` in ``directory`` that ``exec``s ``fake`` with this
    interpreter (so the pid a runner spawned is the fake's pid); return its path."""
    python = sys.executable
    if len(python) > 120 or any(c.isspace() for c in python):
        # A shebang line is cut at 127 bytes on older kernels and split on blanks.
        raise ValueError(f"cannot use {python!r} in a shebang line")
    text = _WRAPPER.format(python=python, fake=str(fake), fake_name=fake.name)
    return write_executable(directory / name, text)
