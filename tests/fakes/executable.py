"""Writing an executable that a test then runs, without the fork/exec race.

``execve`` fails with ``ETXTBSY`` while any process holds the file open for writing, and a
child another thread forks while this process has it open for writing holds a copy of that
descriptor until it execs (see adapters/runtime/process/launcher.py). So the file is written by a
child process: no descriptor of ours ever points at it for writing, and that child and its
own have exited before the file is run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def write_executable(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (mode 0755) from a child process; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["/bin/sh", "-c", 'cat > "$1" && chmod 755 "$1"', "sh", str(path)],
        input=text.encode(),
        check=True,
        timeout=60,
    )
    return path
