"""The bash-guard hooks, in process: the CLI's command hook and the SDK's callback, their
verdicts, and failing closed."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.bash_guard import BashGuardConfig, BashVerdict
from adapters.runtime.sandbox.guard_hook import (
    SdkHook,
    decide,
    denial_reason,
    hook_command,
    hook_settings,
    main,
    sdk_hook,
)


def run_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stdin: str, *argv: str
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_push_is_denied_and_a_plain_command_allowed(tmp_path: Path) -> None:
    config = BashGuardConfig()
    denied = decide({"tool_input": {"command": "git push origin main"}}, tmp_path, config)
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert decide({"tool_input": {"command": "ls"}}, tmp_path, config) == {}


def test_main_prints_the_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hook_input = json.dumps({"tool_input": {"command": "git push"}, "cwd": str(tmp_path)})
    config = BashGuardConfig().model_dump_json()
    code, out, _ = run_main(
        monkeypatch, capsys, hook_input, "--worktree", str(tmp_path), "--config", config
    )
    assert code == 0
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize(
    ("stdin", "config"),
    [("not json", "{}"), ("[1]", "{}"), ("{}", "not json"), ("{}", '{"deny_commands": 3}')],
)
def test_anything_unexpected_fails_closed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdin: str,
    config: str,
) -> None:
    code, out, err = run_main(
        monkeypatch, capsys, stdin, "--worktree", str(tmp_path), "--config", config
    )
    assert code == 2  # a blocking error: the tool does not run
    assert out == ""
    assert "cannot check" in err


def test_the_settings_run_this_module_with_quoted_words(tmp_path: Path) -> None:
    worktree = tmp_path / "a tree; rm -rf x"
    settings = hook_settings(worktree, BashGuardConfig())
    hook = settings["hooks"]["PreToolUse"][0]
    assert hook["matcher"] == "Bash"
    words = shlex.split(hook["hooks"][0]["command"])
    assert words[2:4] == ["-m", "adapters.runtime.sandbox.guard_hook"]
    assert str(worktree) in words
    # the module is found from any worktree: PYTHONPATH names the directory holding adapters/
    variable, _, root = words[0].partition("=")
    assert variable == "PYTHONPATH"
    assert (Path(root) / "adapters" / "runtime" / "sandbox" / "guard_hook.py").is_file()
    assert hook["hooks"][0]["command"] == hook_command(worktree, BashGuardConfig())


# ---------------------------------------------------------------------------- the SDK's callback


def exploding_check(
    command: str, *, worktree: Path | None, config: BashGuardConfig, cwd: Path | None
) -> BashVerdict:
    raise RuntimeError("the guard exploded")


def call(hook: SdkHook, hook_input: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        return await hook(hook_input, "toolu_1", {"signal": None})

    return anyio.run(main)


def test_the_sdk_hook_denies_when_the_check_raises(tmp_path: Path) -> None:
    notes: list[str] = []
    hook = sdk_hook(tmp_path, BashGuardConfig(), notes.append, check=exploding_check)
    answer = call(hook, {"tool_input": {"command": "ls"}, "cwd": str(tmp_path)})
    decision = answer["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "RuntimeError: the guard exploded" in decision["permissionDecisionReason"]
    assert notes == [f"denied Bash: {decision['permissionDecisionReason']}"]


@pytest.mark.parametrize(
    "hook_input",
    [None, "ls", ["ls"], {}, {"tool_input": "ls"}, {"tool_input": {"command": ["ls"]}}],
)
def test_the_sdk_hook_denies_an_input_it_cannot_read(tmp_path: Path, hook_input: Any) -> None:
    hook = sdk_hook(tmp_path, BashGuardConfig(), lambda _: None)
    assert denial_reason(call(hook, hook_input)) is not None


def test_the_sdk_hook_denies_a_push_and_allows_a_plain_command(tmp_path: Path) -> None:
    notes: list[str] = []
    hook = sdk_hook(tmp_path, BashGuardConfig(), notes.append)
    assert call(hook, {"tool_input": {"command": "ls -la"}}) == {}
    assert notes == []
    denied = call(hook, {"tool_input": {"command": "git push origin main"}})
    assert "push" in (denial_reason(denied) or "")
    assert len(notes) == 1


def test_a_failing_note_does_not_undo_the_denial(tmp_path: Path) -> None:
    def broken_note(text: str) -> None:
        raise OSError("disk full")

    hook = sdk_hook(tmp_path, BashGuardConfig(), broken_note)
    assert denial_reason(call(hook, {"tool_input": {"command": "sudo ls"}})) is not None
