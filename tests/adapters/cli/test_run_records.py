"""What a run did and what a review said, from the command line: ``cpe runs show`` prints a
run's activity from its transcript (as ``--follow`` and the dashboard do), and ``cpe work show``
prints each review's inline comments under it. On the fixture of ``test_status`` (real
tracker, real journal), each run's record written by the real artifact store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.runtime.artifacts.store import RunArtifacts
from domain.events import ReviewerCompleted
from domain.results import AgentReview, AgentReviewComment, ReviewerResult
from tests.adapters.cli.test_cli import cpe
from tests.adapters.cli.test_status import IMPLEMENTOR, REVIEWER, T0, Worked, journal, make_worked
from tests.support.transcripts import assistant, open_record, tool

WORKTREE = "/srv/repo/.worktrees/cpe/1-greeting"
SECRET = "ghp_" + "Q1w2E3r4T5" * 4  # a token an agent's command carried


@pytest.fixture
def worked(tmp_path: Path) -> Worked:
    return make_worked(tmp_path)


def record(worked: Worked, session_id: str, *, transcript_log: bool = True) -> RunArtifacts:
    """The run's artifact store, opened as its runtime opens it."""
    return open_record(worked.state_dir, session_id, WORKTREE, transcript_log=transcript_log)


def tool_result(output: str, *, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": "t", "content": output, "is_error": error}
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def record_a_run(files: RunArtifacts) -> None:
    files.record_native({"type": "system", "subtype": "init", "cwd": WORKTREE, "tools": []})
    files.record_native(assistant({"type": "text", "text": "Writing greet.\nThen its test."}))
    files.record_native(assistant(tool("Write", file_path=f"{WORKTREE}/greet.py", content="x\n")))
    files.record_native(assistant(tool("Bash", command="python3 -m unittest -q")))
    files.record_native(tool_result("\nFAILED (failures=1)\nTraceback …", error=True))
    files.record_native(
        {
            "type": "system",
            "subtype": "api_retry",
            "attempt": 2,
            "max_retries": 10,
            "retry_delay_ms": 1200,
            "error_status": 529,
            "error": "overloaded",
        }
    )
    files.record_native(assistant(tool("Edit", file_path=f"{WORKTREE}/greet.py")))
    files.record_native(assistant(tool("Bash", command=f"curl -H 'Authorization: {SECRET}' x")))


def test_runs_show_prints_what_the_run_did_from_its_transcript(worked: Worked) -> None:
    record_a_run(record(worked, IMPLEMENTOR))
    result = cpe("runs", "show", IMPLEMENTOR, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split()[:2] == ["run", IMPLEMENTOR]
    assert lines[1:9] == [
        "assistant: Writing greet.",
        "  Then its test.",
        "tool Write: greet.py (2 chars)",
        "tool Bash: python3 -m unittest -q",
        "tool error: FAILED (failures=1) (+1 line)",
        "retrying: the model API is overloaded (HTTP 529 overloaded), retry 2/10 in 1 s",
        "tool Edit: greet.py",
        "tool Bash: curl -H 'Authorization: [REDACTED]' x",
    ]
    assert lines[0].startswith("system init: ")
    transcript_log = worked.state_dir / "runs" / IMPLEMENTOR / "transcript.log"
    assert lines[-1] == f"(with times and the runner's notes: {transcript_log})"
    assert SECRET not in result.stdout


def test_runs_show_prints_a_runs_activity_without_its_transcript_log(worked: Worked) -> None:
    """Session transcripts off (``[logging] agent_transcripts = false``): the normalized
    transcript is there all the same, and it is what the run did."""
    record_a_run(record(worked, IMPLEMENTOR, transcript_log=False))
    result = cpe("runs", "show", IMPLEMENTOR, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    assert "tool Write: greet.py (2 chars)\n" in result.stdout
    assert "with times" not in result.stdout


def test_runs_show_prints_a_codex_runs_commands_and_their_results(worked: Worked) -> None:
    files = record(worked, IMPLEMENTOR)
    command = {"type": "command_execution", "command": "bash -lc 'pytest -q'"}
    files.record_native({"type": "thread.started", "thread_id": "t-1"})
    files.record_native({"type": "item.started", "item": command})
    ran = {**command, "aggregated_output": "\n1 failed\nE assert 1 == 2\n", "exit_code": 1}
    files.record_native({"type": "item.completed", "item": ran})
    change = {"kind": "update", "path": f"{WORKTREE}/greet.py"}
    files.record_native(
        {"type": "item.completed", "item": {"type": "file_change", "changes": [change]}}
    )
    result = cpe("runs", "show", IMPLEMENTOR, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:5] == [
        "thread started: t-1",
        "tool command: bash -lc 'pytest -q'",
        "tool result (exit 1): 1 failed (+1 line)",
        "file change: update greet.py",
    ]


def test_runs_show_leaves_out_a_record_still_being_written(worked: Worked) -> None:
    files = record(worked, IMPLEMENTOR)
    files.record_native(assistant(tool("Read", file_path=f"{WORKTREE}/greet.py")))
    transcript = worked.state_dir / "runs" / IMPLEMENTOR / "runner_transcript.jsonl"
    with transcript.open("a") as growing:
        growing.write('{"type": "assistant", "message": {"content": [{"type": "te')
    result = cpe("runs", "show", IMPLEMENTOR, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "tool Read: greet.py",
        f"(with times and the runner's notes: {transcript.parent / 'transcript.log'})",
    ]


# ---------------------------------------------------------------------------- cpe work show

COMMENTS = (
    AgentReviewComment(
        path="greetings/greet.py",
        line=5,
        body="Strip the name.\n\nRaise ValueError for a blank one.\nSay so.\nAnd test it.",
    ),
    AgentReviewComment(
        path="tests/test_greet.py", line=None, body="Test \x1b[31ma blank\x1b[0m name."
    ),
)


def test_work_show_prints_each_reviews_inline_comments_under_it(worked: Worked) -> None:
    review = AgentReview(verdict="needs-changes", summary="Two problems.", comments=COMMENTS)
    files = record(worked, REVIEWER)
    output = ReviewerResult(review=review).model_dump(mode="json")
    files.finish("completed", 0, final_response={"type": "result", "structured_output": output})
    completed = ReviewerCompleted(
        session_id=REVIEWER, result=ReviewerResult(review=review), at=T0 + timedelta(seconds=40)
    )
    journal(worked.state_dir, [completed])
    result = cpe("work", "show", worked.greeting, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    reviews = result.stdout.split("\nreviews\n", 1)[1].splitlines()
    assert reviews == [
        f"  {REVIEWER} needs-changes on revision {worked.revision}: Two problems.",
        "    greetings/greet.py:5 — Strip the name.",
        "        Raise ValueError for a blank one.",
        "        Say so. …",
        "    tests/test_greet.py — Test [31ma blank[0m name.",  # no escape sequence gets through
    ]
