"""What goes into run artifacts: no secret ever, native streams of both agent families, and
claude-agent-sdk message objects in their wire shape (also through the fake CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from claude_agent_sdk._internal.message_parser import parse_message

from adapters.runtime.artifacts.redaction import REDACTED, redact, redact_argv, redact_text
from adapters.runtime.artifacts.store import RunArtifacts, read_prompt, resolve_artifact
from tests.adapters.runtime.artifact_streams import (
    CODEX_STREAM,
    INIT,
    PROMPT,
    RESULT,
    STREAM,
    TOOL,
    TOOL_RESULT,
    metadata,
    open_run,
    play,
    read_json,
)
from tests.fakes.claude_cli_fixture import FakeClaude

# ----------------------------------------------------------------------------- redaction

# Built at run time so no credential-shaped literal sits in the repository.
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 4
API_KEY = "sk-ant-api03-" + "Zq9Xw8Vu7T" * 3
BEARER = "Qm9ndXNUb2tlblZhbHVlRm9yVGVzdHMxMjM0NQ"
PASSWORD = "hunter2-correct-horse"
SECRETS = (GITHUB_TOKEN, API_KEY, BEARER, PASSWORD)
LEAKY_OUTPUT = f'curl -H "Authorization: Bearer {BEARER}"\n{{"password": "{PASSWORD}"}}'


@pytest.fixture
def leaky_run(tmp_path: Path) -> RunArtifacts:
    artifacts = open_run(
        tmp_path,
        command=["claude", "--api-key", API_KEY, "--max-thinking-tokens", "8000"],
        prompt=f"Use {GITHUB_TOKEN} to push.",
        requested_policy={"token": PASSWORD, "network": False},
    )
    bash = f"GITHUB_TOKEN={GITHUB_TOKEN} git push"
    play(artifacts, [
        INIT,
        {**TOOL, "message": {**TOOL["message"], "content": [
            {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": bash}}]}},
        {**TOOL_RESULT, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "is_error": True,
             "content": LEAKY_OUTPUT}]}},
        {**RESULT, "structured_output": {"summary": "done", "api_key": API_KEY}},
    ])  # fmt: skip
    artifacts.note(f"stderr said: export ANTHROPIC_API_KEY={API_KEY}")
    artifacts.attach("raw_stderr", "stderr.log", f"token {GITHUB_TOKEN}\n")
    artifacts.attach("raw_stdout", "stdout.bin", f"key {API_KEY}\n".encode() + b"\xff\xfe")
    artifacts.annotate(env={"GH_TOKEN": GITHUB_TOKEN})
    return artifacts


def test_no_secret_reaches_any_artifact(leaky_run: RunArtifacts) -> None:
    leaky_run.finish("completed", 0, reason=f"done with {API_KEY}")

    for path in leaky_run.run_dir.iterdir():
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret[:6]}… leaked into {path.name}"
        assert b"[REDACTED]" in data or path.name == "manifest.json", path.name
    assert (leaky_run.run_dir / "stdout.bin").read_bytes().endswith(b"\xff\xfe")


def test_redaction_keeps_what_is_not_secret(leaky_run: RunArtifacts) -> None:
    leaky_run.finish("completed", 0)

    meta = metadata(leaky_run)
    assert meta["command"] == ["claude", "--api-key", "[REDACTED]", "--max-thinking-tokens", "8000"]
    assert read_prompt(leaky_run.run_dir) == "Use [REDACTED] to push."
    assert meta["requested_policy"] == {"token": "[REDACTED]", "network": False}
    assert meta["usage"]["input_tokens"] == 10  # a count under a secret-looking name stays
    assert meta["native"]["session_id"] == "s-1"
    final = read_json(leaky_run.run_dir / "runner_final_response.json")
    assert final["structured_output"] == {"summary": "done", "api_key": "[REDACTED]"}
    log_text = (leaky_run.run_dir / "transcript.log").read_text()
    assert "tool Bash: GITHUB_TOKEN=[REDACTED] git push" in log_text


@pytest.mark.parametrize(
    "text",
    [
        "Run `ls -la` in /work/main/src and update AUTHORS.md",
        "GIT_AUTHOR_NAME=bob git commit -m 'fix: parse tokens'",
        "input_tokens=10 output_tokens=5",
        "see https://github.com/owner/repo/pull/12#issuecomment-1",
    ],
)
def test_redaction_leaves_ordinary_text_alone(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2 make deploy", f"password={REDACTED} make deploy"),
        ("git clone https://bob:s3cretpass@example.com/r.git", f"git clone {REDACTED}"),
        (f"Authorization: Bearer {BEARER}", f"Authorization: Bearer {REDACTED}"),
        (
            '{"client_secret": "abc", "name": "x"}',
            f'{{"client_secret": "{REDACTED}", "name": "x"}}',
        ),
        (f"echo {GITHUB_TOKEN} | gh auth login", f"echo {REDACTED} | gh auth login"),
    ],
)
def test_redaction_replaces_secrets_in_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_redaction_of_structures_and_command_lines() -> None:
    data = {"auth": {"user": "bob", "retries": 3}, "session_id": "s-1", "items": ["ok", API_KEY]}
    assert redact(data) == {
        "auth": {"user": REDACTED, "retries": 3},
        "session_id": "s-1",
        "items": ["ok", REDACTED],
    }
    argv = ["codex", "--token=abc", "-c", f"key={API_KEY}", "--max-thinking-tokens", "8000"]
    assert redact_argv(argv) == [
        "codex",
        f"--token={REDACTED}",
        "-c",
        f"key={REDACTED}",
        "--max-thinking-tokens",
        "8000",
    ]


# ----------------------------------------------------------------------------- other streams


def test_codex_events_are_rendered_and_summed(tmp_path: Path) -> None:
    artifacts = open_run(tmp_path, agent_family="codex_cli", invocation_mode="codex_exec")
    play(artifacts, CODEX_STREAM)

    artifacts.finish("completed", 0)

    meta = metadata(artifacts)
    assert meta["capture_format"] == "codex_exec_jsonl"
    assert meta["native"] == {"session_id": "th-1"}
    assert meta["usage"] == {"input_tokens": 250, "output_tokens": 66}
    final = read_json(artifacts.run_dir / "runner_final_response.json")
    assert final["text"] == "All done."
    log_text = (artifacts.run_dir / "transcript.log").read_text()
    assert "tool command: bash -lc 'make test'" in log_text
    assert "tool result (exit 0): ok" in log_text
    assert "turn completed: tokens=200/60" in log_text


# ----------------------------------------------------------------------------- SDK objects


def test_sdk_message_objects_are_recorded_in_their_wire_shape(tmp_path: Path) -> None:
    # The SDK's own parser (an internal module) is the judge of the wire shape.
    parsed = [parse_message(message) for message in STREAM]
    artifacts = open_run(tmp_path)
    for message in parsed:
        artifacts.record_native(message)
    finished = artifacts.finish("completed", 0, final_response=parsed[-1])

    lines = (artifacts.run_dir / "runner_transcript.jsonl").read_text().splitlines()
    assert [parse_message(json.loads(line)) for line in lines] == parsed
    assert finished.metadata["cost_usd"] == 0.001
    assert finished.metadata["permission_denials"][0]["tool_name"] == "Bash"
    final = read_json(artifacts.run_dir / "runner_final_response.json")
    assert final["structured_output"] == RESULT["structured_output"]
    log_text = (artifacts.run_dir / "transcript.log").read_text()
    assert "tool Bash: ls -la" in log_text


def test_a_session_with_the_fake_cli_through_the_sdk_leaves_complete_artifacts(
    tmp_path: Path,
) -> None:
    fake = FakeClaude.install(tmp_path / "fake")
    options = ClaudeAgentOptions(
        cli_path=fake.path,
        cwd=tmp_path,
        env=fake.env("ok", output={"outcome": "completed", "summary": "done"}),
        setting_sources=[],
    )
    artifacts = open_run(tmp_path)

    async def session() -> ResultMessage | None:
        final = None
        with anyio.fail_after(30):
            async for message in query(prompt=PROMPT, options=options):
                artifacts.record_native(message)
                final = message if isinstance(message, ResultMessage) else final
        return final

    try:
        result = anyio.run(session)
    finally:
        fake.reap()
    finished = artifacts.finish("completed", 0, final_response=result)

    assert finished.termination == "completed"
    assert finished.missing == ()
    meta = finished.metadata
    assert meta["native"]["claude_code_version"] == "2.1.330"
    assert (meta["cost_usd"], meta["num_turns"]) == (0.001, 2)
    final = read_json(resolve_artifact(artifacts.run_dir, "runner_final_response"))
    assert final["structured_output"] == {"outcome": "completed", "summary": "done"}
    kinds = [
        json.loads(line)["type"]
        for line in resolve_artifact(artifacts.run_dir, "runner_transcript")
        .read_text()
        .splitlines()
    ]
    assert kinds == ["system", "assistant", "assistant", "user", "result"]
