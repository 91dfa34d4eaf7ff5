"""Install the fake ``codex`` CLI (``codex_cli.py``) where a runner under test can run it.

pytest-free, so any test module or conftest can build its own fixture on it::

    fake = FakeCodex.install(tmp_path / "fake")
    env = {**os.environ, **fake.env("hang")}
    argv = [str(fake.path), "exec", "--json", "-c", 'approval_policy="never"', prompt]
    ...  # run the codex runner with argv and env; then assert on fake.records()

``install_fake_codex(directory)`` alone writes the wrapper and returns its path. The wrapper
``exec``s the fake with this interpreter, so the pid the runner spawned is the fake's pid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.wrapper import install_wrapper

FAKE_CODEX = Path(__file__).with_name("codex_cli.py")


def install_fake_codex(directory: Path) -> Path:
    """Write an executable ``codex`` wrapper in ``directory`` and return its path."""
    return install_wrapper(directory, "codex", FAKE_CODEX)


@dataclass(frozen=True)
class FakeCodex:
    """An installed fake codex and the directory it reports to."""

    path: Path
    state: Path

    @classmethod
    def install(cls, directory: Path) -> FakeCodex:
        path = install_fake_codex(directory / "bin")
        state = directory / "state"
        state.mkdir(parents=True, exist_ok=True)
        return cls(path=path, state=state)

    @property
    def pid_file(self) -> Path:
        return self.state / "codex.pid"

    @property
    def record_file(self) -> Path:
        return self.state / "record.jsonl"

    def env(
        self,
        mode: str = "ok",
        *,
        output: Any = None,
        hang_seconds: float | None = None,
        **settings: str,
    ) -> dict[str, str]:
        """The environment selecting ``mode``; ``output`` is the final message's JSON.

        ``settings`` are the other ``FAKE_CODEX_*`` variables by lower-case suffix:
        ``text``, ``final``, ``command``, ``command_output``, ``command_exit``, ``file``,
        ``file_content``, ``error``, ``exit_code``.
        """
        env = {
            "FAKE_CODEX_MODE": mode,
            "FAKE_CODEX_PID_FILE": str(self.pid_file),
            "FAKE_CODEX_RECORD": str(self.record_file),
        }
        if output is not None:
            output_file = self.state / "output.json"
            output_file.write_text(json.dumps(output))
            env["FAKE_CODEX_OUTPUT"] = str(output_file)
        if hang_seconds is not None:
            env["FAKE_CODEX_HANG_SECONDS"] = str(hang_seconds)
        env.update({f"FAKE_CODEX_{key.upper()}": value for key, value in settings.items()})
        return env

    def pid(self) -> int:
        return int(self.pid_file.read_text())

    def records(self) -> list[dict[str, Any]]:
        """One entry per run whose command line parsed: argv, cwd, prompt, config, schema …"""
        if not self.record_file.exists():
            return []
        return [json.loads(line) for line in self.record_file.read_text().splitlines()]
