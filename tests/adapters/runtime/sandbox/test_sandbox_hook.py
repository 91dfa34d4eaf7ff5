"""The hook with a sandbox: an allowed Bash command comes back rewritten to run in it, and the
CLI's own file tools (which run outside it) have their paths checked."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.bash_guard import BashGuardConfig
from adapters.bash_guard.files import check_file_tool
from adapters.runtime.codex.runner import installation
from adapters.runtime.sandbox import RunSandbox
from adapters.runtime.sandbox.guard_hook import FILE_MATCHER, decide, hook_settings, main
from tests.adapters.runtime.sandbox.sandbox_place import CREDENTIAL, Place, place_root

GUARD = BashGuardConfig()


@pytest.fixture
def place() -> Iterator[Place]:
    with place_root() as root:
        yield Place(root)


@pytest.fixture
def sandbox(place: Place) -> RunSandbox:
    return place.open()


def bash(place: Place, command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command, "description": "x"}}


def test_an_allowed_command_comes_back_to_run_in_the_sandbox(
    place: Place, sandbox: RunSandbox
) -> None:
    command = f"echo in > in.txt; python3 -c \"open('{place.outside}/escaped.txt', 'w')\""
    answer = decide(bash(place, command), place.worktree, GUARD, sandbox=sandbox)
    specific = answer["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"
    assert specific["updatedInput"]["description"] == "x"  # the rest of the input is kept
    wrapped = specific["updatedInput"]["command"]
    assert shlex.split(wrapped)[0] == sandbox.sandbox.bwrap
    assert f" bash {shlex.quote(command)}; " in wrapped
    done = subprocess.run(
        ["bash", "-c", wrapped],
        cwd=place.worktree,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (place.worktree / "in.txt").read_text() == "in\n"
    assert "Read-only file system" in done.stderr
    assert place.escaped() == []


def test_a_denied_command_stays_denied_with_a_sandbox(place: Place, sandbox: RunSandbox) -> None:
    answer = decide(bash(place, "git push"), place.worktree, GUARD, sandbox=sandbox)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "updatedInput" not in answer["hookSpecificOutput"]


def test_the_command_hook_takes_the_sandbox_as_json(
    place: Place,
    sandbox: RunSandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hook_input = {**bash(place, "ls"), "cwd": str(place.worktree / "src")}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(hook_input)))
    argv = ["--worktree", str(place.worktree), "--config", GUARD.model_dump_json()]
    assert main([*argv, "--sandbox", sandbox.model_dump_json()]) == 0
    wrapped = json.loads(capsys.readouterr().out)["hookSpecificOutput"]["updatedInput"]["command"]
    words = shlex.split(wrapped)
    assert words[words.index("--chdir") + 1] == str(place.worktree / "src")


def test_the_settings_hook_bash_and_the_file_tools(place: Place, sandbox: RunSandbox) -> None:
    settings = hook_settings(place.worktree, GUARD, sandbox)
    matchers = settings["hooks"]["PreToolUse"]
    assert [m["matcher"] for m in matchers] == ["Bash", FILE_MATCHER]
    assert "--sandbox" in shlex.split(matchers[0]["hooks"][0]["command"])


# ---------------------------------------------------------------------------- the file tools


def file_cases(place: Place) -> list[tuple[str, dict[str, Any], str | None]]:
    """(tool, input, a fragment of the denial, or None: allowed)."""
    wt, home, common = place.worktree, place.home, place.repo / ".git"
    return [
        ("Write", {"file_path": str(wt / "src" / "new.py"), "content": "x"}, None),
        ("Write", {"file_path": "src/relative.py", "content": "x"}, None),
        (
            "Edit",
            {"file_path": str(wt / "src" / "a.py"), "old_string": "x", "new_string": "y"},
            None,
        ),
        ("Read", {"file_path": "/etc/hosts"}, None),
        ("Read", {"file_path": str(wt / "README.md")}, None),
        ("Grep", {"pattern": "x", "path": str(wt)}, None),
        ("Grep", {"pattern": "x"}, None),
        ("Glob", {"pattern": "**/*.py"}, None),
        (
            "Write",
            {"file_path": str(place.outside / "x.txt"), "content": "x"},
            "outside the worktree",
        ),
        ("Write", {"file_path": "../../../x.txt", "content": "x"}, "outside the worktree"),
        (
            "Edit",
            {"file_path": str(common / "config"), "old_string": "a", "new_string": "b"},
            ".git",
        ),
        ("MultiEdit", {"file_path": str(wt / ".git"), "edits": []}, ".git, shared"),
        ("NotebookEdit", {"notebook_path": "/tmp/x.ipynb", "new_source": ""}, "outside"),
        ("Read", {"file_path": str(home / CREDENTIAL)}, ".claude/.credentials.json"),
        ("Read", {"file_path": "~/.ssh/id_ed25519"}, ".ssh"),
        ("Read", {"file_path": str(common / "config")}, "main repository's .git"),
        ("Read", {"file_path": "../../../.git/config"}, "main repository's .git"),
        ("Grep", {"pattern": "token", "path": str(home)}, "protected"),
        ("Grep", {"pattern": "token", "path": "/"}, "protected"),
        ("Glob", {"pattern": ".aws/*", "path": str(home)}, "protected"),
        ("Glob", {"pattern": str(home / ".aws" / "*")}, ".aws"),
        ("Glob", {"pattern": f"{home}/.*/*"}, "protected"),
        ("Read", {}, "no usable file_path"),
    ]


def test_the_file_tools_act_inside_the_worktree_and_never_on_a_secret(place: Place) -> None:
    os.symlink(place.home / ".npmrc", place.worktree / "link")
    cases = [*file_cases(place), ("Read", {"file_path": "link"}, ".npmrc")]
    for tool, tool_input, denied in cases:
        verdict = check_file_tool(
            tool, tool_input, worktree=place.worktree, config=GUARD, homes=[str(place.home)]
        )
        if denied is None:
            assert verdict.allowed, (tool, tool_input, verdict.reason)
        else:
            assert not verdict.allowed, (tool, tool_input)
            assert denied in verdict.reason, (tool, tool_input, verdict.reason)
            assert verdict.reason.startswith(tool)


def test_the_hook_denies_a_file_tool_outside_the_worktree(place: Place) -> None:
    hook_input = {
        "tool_name": "Write",
        "tool_input": {"file_path": str(place.outside / "x"), "content": "x"},
        "cwd": str(place.worktree),
    }
    answer = decide(hook_input, place.worktree, GUARD)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    inside = {**hook_input, "tool_input": {"file_path": "x.txt", "content": "x"}}
    assert decide(inside, place.worktree, GUARD) == {}


def test_codex_is_shown_in_its_sandbox_wherever_it_is_installed(tmp_path: Path) -> None:
    """An npm install finds its native binary in a sibling package: the whole node_modules."""
    bin_dir = tmp_path / "node_modules" / ".bin"
    package = tmp_path / "node_modules" / "@openai" / "codex" / "bin"
    package.mkdir(parents=True)
    bin_dir.mkdir(parents=True)
    (package / "codex.js").write_text("#!/usr/bin/env node\n")
    (package / "codex.js").chmod(0o755)
    (bin_dir / "codex").symlink_to(package / "codex.js")
    assert installation(str(bin_dir / "codex")) == (str(tmp_path / "node_modules"),)
    assert installation("no-such-codex-anywhere") == ()
