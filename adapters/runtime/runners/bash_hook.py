"""The bash guard as the ``PreToolUse`` hook of both Claude runtimes; it fails closed.

The SDK runtime checks every Bash command in a Python hook callback (:func:`sdk_hook`): any
exception while checking is a ``deny`` with the error as its reason, because under
``bypassPermissions`` a hook that raises would otherwise let the command run. A ``claude -p``
run has no such channel, so the runner passes ``--settings`` with a command hook that runs this
module::

    <python> -m adapters.runtime.runners.bash_hook --worktree DIR --config '<json>'

It reads the hook input (JSON) on stdin and, for a command the guard refuses, prints the
``deny`` decision the CLI understands. Anything unexpected fails closed: exit 2, which the CLI
treats as a blocking error (the tool does not run, stderr goes to the model).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from adapters.runtime.bash_guard import BashGuardConfig, BashVerdict, check_bash

__all__ = [
    "BashCheck",
    "SdkHook",
    "decide",
    "denial_reason",
    "deny",
    "hook_command",
    "hook_settings",
    "main",
    "sdk_hook",
]


class BashCheck(Protocol):
    """The signature of :func:`check_bash`; a runtime may be given another (a test's)."""

    def __call__(
        self, command: str, *, worktree: Path | None, config: BashGuardConfig, cwd: Path | None
    ) -> BashVerdict: ...


SdkHook = Callable[[Any, str | None, Any], Awaitable[dict[str, Any]]]

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


def decide(
    hook_input: object,
    worktree: Path,
    config: BashGuardConfig,
    *,
    check: BashCheck = check_bash,
) -> dict[str, Any]:
    """The hook's answer: ``{}`` lets the command run; otherwise a ``deny`` decision.
    Raises on a malformed ``hook_input`` (no ``tool_input.command`` string) or a failing
    ``check``: callers fail closed."""
    if not isinstance(hook_input, Mapping):
        raise TypeError(f"a Bash hook input that is not an object: {str(hook_input)[:200]!r}")
    tool_input = hook_input.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
    if not isinstance(command, str):
        raise TypeError(f"a Bash hook input without a command: {str(hook_input)[:200]!r}")
    cwd = hook_input.get("cwd")
    verdict = check(command, worktree=worktree, config=config, cwd=Path(cwd) if cwd else None)
    if verdict.allowed is True:
        return {}
    return deny(verdict.reason)


def deny(reason: str) -> dict[str, Any]:
    """The ``PreToolUse`` answer that stops the command; the model sees ``reason``."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def denial_reason(answer: dict[str, Any]) -> str | None:
    """The reason of a ``deny`` answer; None when the answer lets the command run."""
    specific = answer.get("hookSpecificOutput") or {}
    if specific.get("permissionDecision") != "deny":
        return None
    return str(specific.get("permissionDecisionReason") or "denied")


def sdk_hook(
    worktree: Path,
    config: BashGuardConfig,
    note: Callable[[str], None],
    *,
    check: BashCheck = check_bash,
) -> SdkHook:
    """The SDK's ``PreToolUse`` callback for Bash: :func:`decide`, failing closed.

    Every exception (a malformed input, a bug in the guard) is a ``deny`` carrying the error;
    ``note`` hears each denial. Under ``bypassPermissions`` nothing else stands between the
    agent and the shell, so a hook that raised would let the command through."""

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        try:
            answer = decide(hook_input, worktree, config, check=check)
        except Exception as exc:  # fail closed: anything unexpected denies
            answer = deny(f"cpe bash guard: cannot check the command ({type(exc).__name__}: {exc})")
        reason = denial_reason(answer)
        if reason is not None:
            with contextlib.suppress(Exception):  # a failing note must not undo the denial
                note(f"denied Bash: {reason}")
        return answer

    return hook


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bash_hook")
    parser.add_argument("--worktree", required=True)
    parser.add_argument("--config", required=True)
    try:
        args = parser.parse_args(argv)
        config = BashGuardConfig.model_validate_json(args.config)
        hook_input = json.loads(sys.stdin.read() or "{}")
        answer = decide(hook_input, Path(args.worktree), config)
    except (Exception, SystemExit) as exc:  # fail closed: a blocking error
        sys.stderr.write(f"cpe bash guard: cannot check the command: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
