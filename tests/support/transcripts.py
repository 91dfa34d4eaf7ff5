"""A run's record as a claude-sdk runtime writes it, for the tests that read a run's activity
back (``cpe runs show``, the dashboard): its artifact store opened as the runtime opens it,
and the native transcript's messages (``assistant`` with ``text`` and ``tool`` blocks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.runtime.artifacts.store import RunArtifacts


def open_record(
    state_dir: Path, session_id: str, worktree: str, *, transcript_log: bool = True
) -> RunArtifacts:
    """The run's artifact store under ``state_dir``, opened as its runtime opens it: a claude
    run in ``worktree`` asked to add greet(name)."""
    return RunArtifacts.open(
        state_dir,
        session_id,
        agent_family="claude_sdk",
        invocation_mode="sdk",
        command=["claude"],
        working_directory=Path(worktree),
        prompt="Add greet(name).",
        prompt_reference=None,
        transcript_log=transcript_log,
    )


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": list(blocks)}}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def tool(name: str, **given: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": given}
