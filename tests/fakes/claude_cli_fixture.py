"""Install the fake ``claude`` CLI (``claude_cli.py``) where a test can point ``cli_path`` at it.

pytest-free, so any test module or conftest can build its own fixture on it::

    fake = FakeClaude.install(tmp_path / "fake")
    options = ClaudeAgentOptions(cli_path=fake.path, env=fake.env("hang"))
    try:
        ...
    finally:
        fake.reap()  # kill whatever the fake (or its grandchild) left running

``install_fake_cli(directory)`` alone writes the wrapper and returns its path. The wrapper
``exec``s the fake with this interpreter, so the pid the SDK spawned is the fake's pid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.fakes.wrapper import install_wrapper

FAKE_CLI = Path(__file__).with_name("claude_cli.py")
GRANDCHILD_MARKER = "fake-claude-grandchild"  # claude_cli.GRANDCHILD_MARKER


def install_fake_cli(directory: Path) -> Path:
    """Write an executable ``claude`` wrapper in ``directory`` and return its path."""
    return install_wrapper(directory, "claude", FAKE_CLI)


@dataclass(frozen=True)
class FakeClaude:
    """An installed fake CLI and the directory its processes report to."""

    path: Path
    state: Path

    @classmethod
    def install(cls, directory: Path) -> FakeClaude:
        path = install_fake_cli(directory / "bin")
        state = directory / "state"
        (state / "pids").mkdir(parents=True, exist_ok=True)
        return cls(path=path, state=state)

    @property
    def pid_file(self) -> Path:
        return self.state / "cli.pid"

    @property
    def grandchild_pid_file(self) -> Path:
        return self.state / "grandchild.pid"

    @property
    def record_file(self) -> Path:
        return self.state / "record.jsonl"

    def env(
        self,
        mode: str = "ok",
        *,
        output: Any = None,
        text: str | None = None,
        bash: str | None = None,
        exit_code: int | None = None,
        hang_seconds: float | None = None,
        bash_run: bool = False,
        hook_on_failure: bool = True,
    ) -> dict[str, str]:
        """The environment selecting ``mode``; ``output`` is the structured output (JSON).
        ``bash_run``: the Bash command really runs when the hooks allow it;
        ``hook_on_failure=False``: answer ``initialize`` like a CLI without ``onFailure``."""
        env = {
            "FAKE_CLAUDE_MODE": mode,
            "FAKE_CLAUDE_PID_FILE": str(self.pid_file),
            "FAKE_CLAUDE_GRANDCHILD_PID_FILE": str(self.grandchild_pid_file),
            "FAKE_CLAUDE_PID_DIR": str(self.state / "pids"),
            "FAKE_CLAUDE_RECORD": str(self.record_file),
        }
        if output is not None:
            output_file = self.state / "output.json"
            output_file.write_text(json.dumps(output))
            env["FAKE_CLAUDE_OUTPUT"] = str(output_file)
        if text is not None:
            env["FAKE_CLAUDE_TEXT"] = text
        if bash is not None:
            env["FAKE_CLAUDE_BASH"] = bash
        if exit_code is not None:
            env["FAKE_CLAUDE_EXIT_CODE"] = str(exit_code)
        if hang_seconds is not None:
            env["FAKE_CLAUDE_HANG_SECONDS"] = str(hang_seconds)
        if bash_run:
            env["FAKE_CLAUDE_BASH_RUN"] = "1"
        if not hook_on_failure:
            env["FAKE_CLAUDE_NO_HOOK_ON_FAILURE"] = "1"
        return env

    def pid(self) -> int:
        return int(self.pid_file.read_text())

    def grandchild_pid(self) -> int:
        return int(self.grandchild_pid_file.read_text())

    def records(self) -> list[dict[str, Any]]:
        """What the fake processes recorded: their argv and cwd, then each stdin message."""
        if not self.record_file.exists():
            return []
        return [json.loads(line) for line in self.record_file.read_text().splitlines()]

    def recorded_pids(self) -> list[int]:
        pid_dir = self.state / "pids"
        return sorted(int(p.name) for p in pid_dir.iterdir() if p.name.isdigit())

    def live_processes(self) -> list[psutil.Process]:
        """Recorded processes still running (zombies count as ended) that are really ours."""
        live = []
        for pid in self.recorded_pids():
            try:
                process = psutil.Process(pid)
                if process.status() == psutil.STATUS_ZOMBIE:
                    continue
                if _is_ours(process.cmdline()):
                    live.append(process)
            except psutil.NoSuchProcess:
                continue
        return live

    def reap(self, timeout: float = 10.0) -> list[int]:
        """SIGKILL every recorded process still running; return their pids.

        Raises AssertionError when one survives ``timeout`` seconds.
        """
        live = self.live_processes()
        for process in live:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                continue
        _, alive = psutil.wait_procs(live, timeout=timeout)
        survivors = [p.pid for p in alive if _running(p)]
        assert not survivors, f"fake claude processes survived SIGKILL: {survivors}"
        return [p.pid for p in live]


def _is_ours(cmdline: list[str]) -> bool:
    """Whether a recorded pid still names a fake process (pids are reused)."""
    return str(FAKE_CLI) in cmdline or GRANDCHILD_MARKER in cmdline


def _running(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
