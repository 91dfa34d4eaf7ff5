"""A run's files under ``<logs_dir>/<session_id>/``: the human-readable transcript, the
launcher's pidfile, and the normalized artifacts (``artifacts.RunArtifacts``).

Writing a transcript line or an artifact never affects the run (seed 000: log failures are
non-fatal): the first failure is logged, later ones are dropped.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from domain.models import RunUsage

log = structlog.get_logger("cpe.runtime.files")


class RunFiles:
    def __init__(self, directory: Path):
        self.directory = directory
        self.transcript_path = directory / "transcript.log"
        self.pidfile = directory / "cli.pid"
        self._lock = threading.Lock()
        self._broken = False
        self._native = directory / "runner_transcript"

    @classmethod
    def create(cls, logs_dir: Path, session_id: str, config: object = None) -> RunFiles:
        directory = logs_dir / session_id
        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory)

    def record_prompt(self, prompt: str, *, role: str) -> None:
        self._write("prompt.md", prompt)
        self.note(f"{role} run started")

    def record(self, message: object) -> None:
        """A native SDK message: kept as JSON lines, and summarised in the transcript."""
        data = _plain(message)
        self._append(self._native, json.dumps(data, default=str) + "\n")
        if type(message).__name__ == "AssistantMessage":
            for block in data.get("content", []):
                if isinstance(block, dict) and block.get("text"):
                    self.note(f"assistant: {block['text']}")

    def note(self, text: str) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        self._append(self.transcript_path, f"{stamp} {text}\n")

    def finish(
        self,
        termination: str,
        exit_code: int | None,
        final: object,
        usage: RunUsage,
        denials: Sequence[Any],
    ) -> None:
        self._write("runner_final_response", json.dumps(_plain(final), default=str, indent=2))
        metadata = {
            "termination": termination,
            "exit_code": exit_code,
            "ended_at": datetime.now(UTC).isoformat(),
            "usage": usage.model_dump(),
            "permission_denials": _plain(list(denials)),
        }
        self._write("runner_metadata", json.dumps(metadata, default=str, indent=2))
        self.note(f"run ended: {termination}")

    def _write(self, name: str, text: str) -> None:
        self._guarded(lambda: (self.directory / name).write_text(text))

    def _append(self, path: Path, text: str) -> None:
        def append() -> None:
            with path.open("a", encoding="utf-8") as out:
                out.write(text)

        self._guarded(append)

    def _guarded(self, action: Any) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                action()
            except OSError as exc:
                self._broken = True
                log.warning("cannot write the run's files; going on without", error=str(exc))


def _plain(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = dataclasses.asdict(value)
        data["_type"] = type(value).__name__
        return data
    return value
