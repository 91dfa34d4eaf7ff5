"""The CLI's bash-guard hook, in process: its verdicts and failing closed."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path

import pytest

from adapters.runtime.bash_guard import BashGuardConfig
from adapters.runtime.runners.bash_hook import decide, hook_command, hook_settings, main


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
    assert words[2:4] == ["-m", "adapters.runtime.runners.bash_hook"]
    assert str(worktree) in words
    assert hook["hooks"][0]["command"] == hook_command(worktree, BashGuardConfig())
