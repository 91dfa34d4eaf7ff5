"""The bash guard for the ``claude`` CLI run headless: a ``PreToolUse`` command hook.

The SDK runtime checks every Bash command in a Python hook callback; a ``claude -p`` run has no
such channel, so the runner passes ``--settings`` with a command hook that runs this module::

    <python> -m adapters.runtime.runners.bash_hook --worktree DIR --config '<json>'

It reads the hook input (JSON) on stdin and, for a command the guard refuses, prints the
``deny`` decision the CLI understands. Anything unexpected fails closed: exit 2, which the CLI
treats as a blocking error (the tool does not run, stderr goes to the model).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.runtime.bash_guard import BashGuardConfig, check_bash

__all__ = ["decide", "hook_command", "hook_settings", "main"]

_PROJECT_ROOT = Path(__file__).resolve().parents[3]


def hook_command(worktree: Path, config: BashGuardConfig) -> str:
    """The shell command the CLI runs for each Bash call (every word quoted)."""
    words = [
        f"PYTHONPATH={_PROJECT_ROOT}",
        sys.executable,
        "-m",
        "adapters.runtime.runners.bash_hook",
        "--worktree",
        str(worktree),
        "--config",
        config.model_dump_json(),
    ]
    return " ".join(shlex.quote(w) for w in words)


def hook_settings(worktree: Path, config: BashGuardConfig) -> dict[str, Any]:
    """The ``--settings`` JSON that installs the hook."""
    hook = {"type": "command", "command": hook_command(worktree, config)}
    return {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}}


def decide(hook_input: dict[str, Any], worktree: Path, config: BashGuardConfig) -> dict[str, Any]:
    """The hook's answer: ``{}`` lets the command run; otherwise a ``deny`` decision."""
    tool_input = hook_input.get("tool_input") or {}
    command = str(tool_input.get("command", ""))
    cwd = hook_input.get("cwd")
    verdict = check_bash(command, worktree=worktree, config=config, cwd=Path(cwd) if cwd else None)
    if verdict.allowed:
        return {}
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": verdict.reason,
        }
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bash_hook")
    parser.add_argument("--worktree", required=True)
    parser.add_argument("--config", required=True)
    try:
        args = parser.parse_args(argv)
        config = BashGuardConfig.model_validate_json(args.config)
        hook_input = json.loads(sys.stdin.read() or "{}")
        answer = decide(dict(hook_input), Path(args.worktree), config)
    except (Exception, SystemExit) as exc:  # fail closed: a blocking error
        sys.stderr.write(f"cpe bash guard: cannot check the command: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
