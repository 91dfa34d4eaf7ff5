"""The check every runtime's ``[logging] agent_transcripts`` test makes on a finished run."""

from __future__ import annotations

from pathlib import Path

from adapters.runtime.artifacts.store import load_manifest


def assert_transcript_switch(
    run_dir: Path, log_file_path: str | None, enabled: bool, said: str
) -> None:
    """With the switch on, ``transcript.log`` exists, holds ``said`` and is the handle's log
    path; off, neither. The normalized artifacts (seed 004 §5) are written either way."""
    transcript = run_dir / "transcript.log"
    roles = {entry["role"] for entry in load_manifest(run_dir)["artifacts"]}
    if enabled:
        assert log_file_path == str(transcript)
        assert said in transcript.read_text()
        assert "transcript_log" in roles
    else:
        assert log_file_path is None  # seed 000: logFilePath is null when logging is off
        assert not transcript.exists()
        assert "transcript_log" not in roles
    assert {"runner_transcript", "runner_final_response", "runner_metadata"} <= roles
    assert (run_dir / "runner_transcript.jsonl").read_text().strip()
