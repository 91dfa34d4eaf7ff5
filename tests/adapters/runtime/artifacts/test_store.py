"""The run artifact store: layout, manifest, metadata before and after a run, failures that
never raise, idempotent finish (seed 004 §5-§9; seed 003 for the prompt)."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.runtime.artifacts.native_messages import RESULT_CHARS
from adapters.runtime.artifacts.store import (
    CANONICAL_FILES,
    REQUIRED_ROLES,
    ArtifactLookupError,
    load_manifest,
    read_prompt,
    resolve_artifact,
)
from domain.models import RunUsage
from tests.adapters.runtime.artifact_streams import (
    INIT,
    PROMPT,
    RESULT,
    SESSION,
    STREAM,
    TEXT,
    TOOL,
    metadata,
    open_run,
    play,
    read_json,
)

# ----------------------------------------------------------------------------- layout


@pytest.mark.spec("S004-06")
def test_open_creates_the_three_normalized_artifacts_and_a_manifest(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)

    assert artifacts.run_dir == tmp_path / "state" / "runs" / SESSION
    names = {p.name for p in artifacts.run_dir.iterdir()}
    assert {*CANONICAL_FILES.values(), "transcript.log", "manifest.json"} <= names
    manifest = load_manifest(artifacts.run_dir)
    assert manifest["state"] == "running"
    roles = {entry["role"]: entry for entry in manifest["artifacts"]}
    assert set(REQUIRED_ROLES) <= set(roles)
    assert all(roles[role]["required"] and roles[role]["present"] for role in REQUIRED_ROLES)
    assert not roles["transcript_log"]["required"]
    assert artifacts.missing_required() == ()


@pytest.mark.spec("S004-07")
@pytest.mark.spec("S003-05")
def test_metadata_holds_the_invocation_and_the_prompt_before_the_run_starts(
    tmp_path: Path,
) -> None:
    artifacts = open_run(tmp_path)

    meta = metadata(artifacts)
    assert meta["agent_family"] == "claude_cli"
    assert meta["invocation_mode"] == "sdk_stream_json"
    assert meta["command"] == ["claude", "--output-format", "stream-json", "--verbose"]
    assert meta["working_directory"] == str(tmp_path / "worktree")
    assert meta["prompt_reference"] == "agents/implementor.md@abc123"
    assert read_prompt(artifacts.run_dir) == PROMPT
    assert meta["prompt_sha256"] == hashlib.sha256(PROMPT.encode()).hexdigest()
    assert "prompt" not in meta  # the text is in its own file, not in every run's metadata
    assert meta["capture_format"] == "claude_stream_json"
    assert meta["started_at"] == "2026-11-05T10:00:00.250+00:00"
    assert meta["requested_policy"] == {
        "workspace": "writable",
        "network": False,
        "bash": "guarded",
    }
    assert meta["state"] == "running"
    assert (meta["ended_at"], meta["exit_code"], meta["termination"]) == (None, None, None)
    final = read_json(artifacts.run_dir / CANONICAL_FILES["runner_final_response"])
    assert final == {"available": False, "text": None, "structured_output": None}


@pytest.mark.spec("S004-07")
@pytest.mark.spec("S004-16")
def test_finish_records_outcome_usage_denials_and_effective_policy(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)
    artifacts.set_effective_policy({"workspace": "writable", "bash": "hook"})

    finished = artifacts.finish("completed", 0)

    meta = metadata(artifacts)
    assert meta["state"] == "finished"
    assert meta["termination"] == finished.termination == "completed"
    assert meta["exit_code"] == 0
    assert meta["started_at"] < meta["ended_at"]
    assert meta["cost_usd"] == 0.001
    assert meta["num_turns"] == 2
    assert meta["usage"] == {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3}
    assert meta["permission_denials"][0]["tool_name"] == "Bash"
    assert meta["native"] == {
        "session_id": "s-1",
        "model": "fake",
        "claude_code_version": "2.1.330",
    }
    assert meta["message_count"] == len(STREAM)
    assert meta["artifact_errors"] == []
    provenance = finished.provenance()
    assert provenance["agent_family"] == "claude_cli"
    assert provenance["prompt_reference"] == "agents/implementor.md@abc123"
    assert provenance["exit_code"] == 0
    assert provenance["termination"] == "completed"
    assert provenance["requested_policy"]["bash"] == "guarded"
    assert provenance["effective_policy"] == {"workspace": "writable", "bash": "hook"}
    assert set(provenance["artifacts"]) >= set(REQUIRED_ROLES)
    assert provenance["started_at"] == meta["started_at"]


def test_explicit_usage_overrides_what_the_result_said(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)

    artifacts.finish("completed", 0, usage=RunUsage(cost_usd=0.5, turns=7, output_tokens=99))

    meta = metadata(artifacts)
    assert (meta["cost_usd"], meta["num_turns"]) == (0.5, 7)
    assert meta["usage"]["output_tokens"] == 99
    assert meta["usage"]["input_tokens"] == 10


@pytest.mark.spec("S004-06")
def test_runner_transcript_keeps_every_native_message_in_order(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)
    artifacts.finish("completed", 0)

    lines = (artifacts.run_dir / "runner_transcript.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == STREAM


@pytest.mark.spec("S004-05")
def test_final_response_holds_the_result_text_and_structured_output(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)

    finished = artifacts.finish("completed", 0)

    final_path = finished.path("runner_final_response")
    assert final_path is not None
    final = read_json(final_path)
    assert final["available"]
    assert final["text"] == '{"outcome": "completed"}'
    assert final["structured_output"] == {"outcome": "completed", "summary": "done"}
    assert (final["subtype"], final["is_error"]) == ("success", False)
    assert final["native"] == RESULT


def test_without_a_result_the_final_response_is_the_last_assistant_text(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts, [INIT, TEXT, TOOL])

    artifacts.finish("killed_timeout", -15)

    final = read_json(artifacts.run_dir / "runner_final_response.json")
    assert final == {"available": True, "text": "Running\nthe listing", "structured_output": None}
    assert metadata(artifacts)["termination"] == "killed_timeout"


def test_a_final_text_given_to_finish_is_the_final_response(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path, agent_family="codex_cli", invocation_mode="codex_exec")

    artifacts.finish("completed", 0, final_response='{"ok": true, "summary": "done"}')

    final = read_json(artifacts.run_dir / "runner_final_response.json")
    assert final["text"] == '{"ok": true, "summary": "done"}'


def test_without_the_transcript_log_the_normalized_artifacts_are_still_written(
    tmp_path: Path,
) -> None:
    # seed 001: the human-readable transcript only when session logging is on; seed 004 §5:
    # the normalized set always
    artifacts = open_run(tmp_path, transcript_log=False)
    play(artifacts)
    artifacts.note("a note nobody asked for")
    finished = artifacts.finish("completed", 0)

    assert artifacts.log_file_path is None
    assert not artifacts.transcript_log.exists()
    assert finished.termination == "completed"
    assert set(finished.paths) == set(REQUIRED_ROLES)
    assert finished.missing == ()
    roles = {entry["role"] for entry in load_manifest(artifacts.run_dir)["artifacts"]}
    assert roles == set(REQUIRED_ROLES)
    lines = (artifacts.run_dir / "runner_transcript.jsonl").read_text().splitlines()
    assert len(lines) == len(STREAM)
    assert metadata(artifacts)["num_turns"] == 2


def test_a_reused_run_directory_keeps_no_earlier_transcript_log(tmp_path: Path) -> None:
    first = open_run(tmp_path)
    first.finish("completed", 0)
    assert first.log_file_path == str(first.transcript_log)
    assert first.transcript_log.exists()

    second = open_run(tmp_path, transcript_log=False)
    assert not second.transcript_log.exists()


def test_transcript_log_is_a_timestamped_human_readable_account(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)
    artifacts.note("wall-clock timeout in 300 s")
    artifacts.finish("completed", 0)

    assert artifacts.transcript_log == artifacts.run_dir / "transcript.log"
    log_lines = artifacts.transcript_log.read_text().splitlines()
    assert log_lines[0].startswith("2026-11-05T10:00:00.500Z run started: session=" + SESSION)
    assert f"prompt ({len(PROMPT)} chars, reference agents/implementor.md@abc123)" in log_lines[1]
    text = "\n".join(log_lines)
    assert "system init: model=fake" in text
    assert "Z assistant: Running\n" in text  # continuation lines are indented
    assert "   the listing" in text
    assert "Z tool Bash: ls -la" in text
    result_line = next(line for line in log_lines if " tool result: " in line)
    assert result_line.endswith("…")
    assert len(result_line.split(" tool result: ", 1)[1]) == RESULT_CHARS
    assert "result success: turns=2 cost_usd=0.001 tokens=10/5 denials=1" in text
    assert "note: wall-clock timeout in 300 s" in text
    assert log_lines[-1].endswith(
        "run finished: termination=completed exit_code=0 cost_usd=0.001 turns=2"
    )


# ----------------------------------------------------------------------------- manifest


@pytest.mark.spec("S004-06")
@pytest.mark.spec("S004-14")
def test_the_manifest_resolves_each_role_to_its_file_with_size_and_digest(
    tmp_path: Path,
) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)
    finished = artifacts.finish("completed", 0)

    manifest = load_manifest(artifacts.run_dir)
    assert manifest["state"] == "finished"
    assert manifest["session_id"] == SESSION
    for entry in manifest["artifacts"]:
        path = resolve_artifact(artifacts.run_dir, entry["role"])
        assert path == finished.paths[entry["role"]]
        data = path.read_bytes()
        assert entry["bytes"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert not Path(entry["path"]).is_absolute()  # the run directory can move


@pytest.mark.spec("S004-14")
def test_resolving_goes_through_the_manifest_only(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    artifacts.finish("completed", 0)
    run_dir = artifacts.run_dir

    with pytest.raises(ArtifactLookupError, match="no workspace_diff"):
        resolve_artifact(run_dir, "workspace_diff")
    manifest = load_manifest(run_dir)
    manifest["artifacts"][0]["path"] = "../../outside.json"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactLookupError, match="outside"):
        resolve_artifact(run_dir, manifest["artifacts"][0]["role"])
    (run_dir / "manifest.json").unlink()
    with pytest.raises(ArtifactLookupError, match="no readable manifest"):
        resolve_artifact(run_dir, "runner_metadata")


@pytest.mark.spec("S004-08")
def test_optional_artifacts_sit_beside_the_normalized_set_and_never_replace_it(
    tmp_path: Path,
) -> None:
    artifacts = open_run(tmp_path)
    artifacts.attach("raw_stderr", "stderr.log", "warning: deprecated flag\n")
    artifacts.attach("raw_stderr", "stderr.log", "second line\n")

    with pytest.raises(ValueError, match="normalized"):
        artifacts.attach("runner_transcript", "other.jsonl", "x")
    with pytest.raises(ValueError, match="normalized"):
        artifacts.attach("native_capture", "runner_metadata.json", "{}")
    with pytest.raises(ValueError, match="plain file name"):
        artifacts.attach("native_capture", "../escape.txt", "x")
    finished = artifacts.finish("completed", 0)

    stderr = resolve_artifact(artifacts.run_dir, "raw_stderr")
    assert stderr.read_text() == "warning: deprecated flag\nsecond line\n"
    assert set(finished.paths) == {*REQUIRED_ROLES, "transcript_log", "raw_stderr"}
    assert finished.missing == ()


# ----------------------------------------------------------------------------- failures


def _warnings(logs: Sequence[MutableMapping[str, Any]], file: str) -> list[Any]:
    return [e for e in logs if e["log_level"] == "warning" and e.get("file") == file]


@pytest.mark.spec("S004-12")
def test_a_broken_transcript_log_is_logged_once_and_changes_nothing_else(
    tmp_path: Path,
) -> None:
    artifacts = open_run(tmp_path)
    log_file = artifacts.run_dir / "transcript.log"
    log_file.unlink()
    log_file.mkdir()  # every append now fails, even as root

    with capture_logs() as logs:
        play(artifacts)
        artifacts.note("still going")
        finished = artifacts.finish("completed", 0)

    assert len(_warnings(logs, "transcript.log")) == 1
    assert finished.termination == "completed"
    assert finished.missing == ()
    assert "transcript_log" not in finished.paths
    lines = (artifacts.run_dir / "runner_transcript.jsonl").read_text().splitlines()
    assert len(lines) == len(STREAM)
    assert metadata(artifacts)["artifact_errors"][0]["file"] == "transcript.log"
    entry = next(
        e for e in load_manifest(artifacts.run_dir)["artifacts"] if e["role"] == "transcript_log"
    )
    assert not entry["present"]


@pytest.mark.spec("S004-12")
def test_a_lost_runner_transcript_turns_a_completed_run_into_an_error(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    artifacts.record_native(INIT)
    jsonl = artifacts.run_dir / "runner_transcript.jsonl"
    jsonl.unlink()
    jsonl.mkdir()

    with capture_logs() as logs:
        play(artifacts, [TEXT, TOOL, RESULT])
        finished = artifacts.finish("completed", 0)

    assert len(_warnings(logs, "runner_transcript.jsonl")) == 1
    assert finished.termination == "error"
    assert finished.missing == ("runner_transcript",)
    meta = metadata(artifacts)
    assert meta["termination"] == "error"
    assert meta["termination_reason"] == "required artifacts missing: runner_transcript"
    with pytest.raises(ArtifactLookupError, match="missing"):
        resolve_artifact(artifacts.run_dir, "runner_transcript")


@pytest.mark.spec("S004-12")
def test_a_failing_optional_attachment_does_not_fail_the_run(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    (artifacts.run_dir / "stderr.log").mkdir()

    artifacts.attach("raw_stderr", "stderr.log", "boom\n")
    play(artifacts)
    finished = artifacts.finish("completed", 0)

    assert finished.termination == "completed"
    assert "raw_stderr" not in finished.paths
    assert finished.missing == ()


@pytest.mark.spec("S004-12")
def test_a_state_dir_under_a_regular_file_never_raises_and_ends_in_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file")

    with capture_logs():
        artifacts = open_run(tmp_path, state_dir=blocker / "state")
        assert set(artifacts.missing_required()) == set(REQUIRED_ROLES)
        assert artifacts.errors
        play(artifacts)
        artifacts.note("nothing can be written")
        artifacts.attach("raw_stderr", "stderr.log", "x")
        finished = artifacts.finish("completed", 0)

    assert finished.termination == "error"
    assert set(finished.missing) == set(REQUIRED_ROLES)
    assert finished.paths == {}


def test_finish_never_raises_when_the_run_directory_vanished(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)
    shutil.rmtree(artifacts.run_dir)

    with capture_logs():
        finished = artifacts.finish("completed", 0)

    assert finished.termination == "error"
    assert "runner_transcript" in finished.missing


def test_an_unknown_termination_is_recorded_as_an_error(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)

    finished = artifacts.finish("exploded", 1)  # type: ignore[arg-type]  # a caller's bug

    assert finished.termination == "error"
    assert metadata(artifacts)["termination_reason"] == "unknown termination 'exploded'"


def test_finish_is_idempotent_and_later_records_are_dropped(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    play(artifacts)
    first = artifacts.finish("completed", 0)
    files = {p.name: p.read_bytes() for p in artifacts.run_dir.iterdir()}

    with capture_logs() as logs:
        second = artifacts.finish("killed_timeout", -9)
        artifacts.record_native(TEXT)
        artifacts.note("late")
        artifacts.annotate(pid=1)

    assert second is first
    assert {p.name: p.read_bytes() for p in artifacts.run_dir.iterdir()} == files
    assert sum(1 for e in logs if e["event"].startswith("run artifacts already finished")) == 1


def test_a_reused_session_id_starts_the_run_directory_afresh(tmp_path: Path) -> None:
    first = open_run(tmp_path)
    play(first)
    first.finish("completed", 0)

    with capture_logs() as logs:
        second = open_run(tmp_path)

    assert second.run_dir == first.run_dir
    assert (second.run_dir / "runner_transcript.jsonl").read_text() == ""
    assert metadata(second)["state"] == "running"
    assert any(e["event"].startswith("run directory exists") for e in logs)


@pytest.mark.parametrize("session_id", ["", ".", "..", "a/b", "../escape"])
def test_a_session_id_that_is_not_one_directory_name_is_refused(
    tmp_path: Path, session_id: str
) -> None:
    with pytest.raises(ValueError, match="cannot name a directory"):
        open_run(tmp_path, session_id=session_id)


def test_concurrent_records_each_land_as_one_whole_line(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path)
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        start.wait(timeout=10)
        for i in range(50):
            artifacts.record_native({"type": "assistant", "message": {"content": [
                {"type": "text", "text": f"writer {n} line {i}"}]}})  # fmt: skip

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    artifacts.finish("completed", 0)

    lines = (artifacts.run_dir / "runner_transcript.jsonl").read_text().splitlines()
    texts = {json.loads(line)["message"]["content"][0]["text"] for line in lines}
    assert len(texts) == 200


def test_a_prompt_is_stored_once_however_many_runs_share_it(tmp_path: Path) -> None:
    """A planner retried on a large spec: its prompt goes to disk once, each run's metadata
    holds its hash and where it is; another prompt gets a file of its own."""
    large = "# spec\n" + "x" * 2_000_000
    runs = [open_run(tmp_path, session_id=f"planner-{n}", prompt=large) for n in range(3)]
    other = open_run(tmp_path, session_id="planner-3", prompt="a different prompt")
    for run in [*runs, other]:
        run.finish("completed", 0)
    stored = sorted((tmp_path / "state" / "prompts").iterdir())
    assert len(stored) == 2
    digest = hashlib.sha256(large.encode()).hexdigest()
    assert (tmp_path / "state" / "prompts" / f"{digest}.txt").read_text() == large
    for run in runs:
        meta = metadata(run)
        assert meta["prompt_sha256"] == digest
        assert meta["prompt_chars"] == len(large)
        assert len(json.dumps(meta)) < 10_000  # the metadata does not carry the prompt
        assert read_prompt(run.run_dir) == large
    assert read_prompt(other.run_dir) == "a different prompt"


def test_a_prompt_that_cannot_be_stored_is_listed_and_the_run_goes_on(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "prompts").write_text("a file where the directory should be\n")
    artifacts = open_run(tmp_path)
    finished = artifacts.finish("completed", 0)
    assert finished.termination == "completed"
    assert [e["file"] for e in metadata(artifacts)["artifact_errors"]] == ["prompts"]
    assert read_prompt(artifacts.run_dir) is None
