"""The bash guard as the ``PreToolUse`` hook of both Claude runtimes; it fails closed.

The SDK runtime checks every Bash command in a Python hook callback (:func:`sdk_hook`): any
exception while checking is a ``deny`` with the error as its reason, because under
``bypassPermissions`` a hook that raises would otherwise let the command run. A ``claude -p``
run has no such channel, so the runner passes ``--settings`` with a command hook that runs this
module::

    <python> -m adapters.runtime.sandbox.guard_hook --worktree DIR --config '<json>'
                                                    [--sandbox '<json>']

It reads the hook input (JSON) on stdin and, for a command the guard refuses, prints the
``deny`` decision the CLI understands. Anything unexpected fails closed: exit 2, which the CLI
treats as a blocking error (the tool does not run, stderr goes to the model).

With a sandbox (``adapters.runtime.sandbox``), a command the guard allows is not simply let
through: the answer is ``allow`` with ``updatedInput``, the command rewritten to run inside the
run's bubblewrap sandbox (verified on the bundled CLI 2.1.332: it runs the rewritten command).
The same hook checks the CLI's own file tools (``Write``, ``Edit``, ``Read``, ``Grep`` …,
:data:`FILE_MATCHER`), which run in the CLI, outside the sandbox (``bash_guard.files``).
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

from adapters.bash_guard import BashGuardConfig, BashVerdict, check_bash
from adapters.bash_guard.files import FILE_TOOLS, check_file_tool
from adapters.runtime.sandbox import RunSandbox

__all__ = [
    "FILE_MATCHER",
    "FILE_TOOLS_POLICY",
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
FILE_MATCHER = "|".join(FILE_TOOLS)  # the PreToolUse matcher of the file tools' hook
FILE_TOOLS_POLICY = (  # what that hook enforces, as the runs record it
    "cpe's PreToolUse hook: Write and Edit inside the worktree only (not its .git); Read, Grep "
    "and Glob never in a credential store or the main repository's .git"
)

# the directory holding the adapters package (this module is adapters/runtime/sandbox/…), so the
# hook's `python -m` finds it from a worktree even when cpe runs from a checkout it was not
# installed from
_PROJECT_ROOT = Path(__file__).resolve().parents[3]


def hook_command(worktree: Path, config: BashGuardConfig, sandbox: RunSandbox | None = None) -> str:
    """The shell command the CLI runs for each Bash or file tool call (every word quoted)."""
    words = [
        f"PYTHONPATH={_PROJECT_ROOT}",
        sys.executable,
        "-m",
        "adapters.runtime.sandbox.guard_hook",
        "--worktree",
        str(worktree),
        "--config",
        config.model_dump_json(),
    ]
    if sandbox is not None:
        words += ["--sandbox", sandbox.model_dump_json()]
    return " ".join(shlex.quote(w) for w in words)


def hook_settings(
    worktree: Path, config: BashGuardConfig, sandbox: RunSandbox | None = None
) -> dict[str, Any]:
    """The ``--settings`` JSON that installs the hook, for Bash and for the file tools."""
    hook = {"type": "command", "command": hook_command(worktree, config, sandbox)}
    matchers = [{"matcher": m, "hooks": [hook]} for m in ("Bash", FILE_MATCHER)]
    return {"hooks": {"PreToolUse": matchers}}


def decide(
    hook_input: object,
    worktree: Path,
    config: BashGuardConfig,
    *,
    check: BashCheck = check_bash,
    sandbox: RunSandbox | None = None,
) -> dict[str, Any]:
    """The hook's answer: ``{}`` lets the tool run as it is, ``allow`` with ``updatedInput``
    runs a Bash command in ``sandbox``; otherwise a ``deny`` decision. Raises on a malformed
    ``hook_input`` (no ``tool_input.command`` string for Bash) or a failing ``check``: callers
    fail closed."""
    if not isinstance(hook_input, Mapping):
        raise TypeError(f"a hook input that is not an object: {str(hook_input)[:200]!r}")
    tool = hook_input.get("tool_name") or "Bash"
    tool_input = hook_input.get("tool_input")
    cwd = hook_input.get("cwd")
    where = Path(cwd) if isinstance(cwd, str) and cwd else None
    if tool in FILE_TOOLS:
        if not isinstance(tool_input, Mapping):
            raise TypeError(f"a {tool} hook input without its input: {str(hook_input)[:200]!r}")
        verdict = check_file_tool(tool, tool_input, worktree=worktree, config=config, cwd=where)
        return {} if verdict.allowed is True else deny(verdict.reason)
    command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
    if not isinstance(command, str) or not isinstance(tool_input, Mapping):
        raise TypeError(f"a Bash hook input without a command: {str(hook_input)[:200]!r}")
    verdict = check(command, worktree=worktree, config=config, cwd=where)
    if verdict.allowed is not True:
        return deny(verdict.reason)
    if sandbox is None:
        return {}
    wrapped = sandbox.wrap_command(command, str(where) if where is not None else None)
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "cpe: the Bash guard allowed it; run in the sandbox",
            "updatedInput": {**tool_input, "command": wrapped},
        }
    }


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
    sandbox: RunSandbox | None = None,
) -> SdkHook:
    """The SDK's ``PreToolUse`` callback for Bash: :func:`decide`, failing closed.

    Every exception (a malformed input, a bug in the guard) is a ``deny`` carrying the error;
    ``note`` hears each denial. Under ``bypassPermissions`` nothing else stands between the
    agent and the shell, so a hook that raised would let the command through."""

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        try:
            answer = decide(hook_input, worktree, config, check=check, sandbox=sandbox)
        except Exception as exc:  # fail closed: anything unexpected denies
            answer = deny(f"cpe bash guard: cannot check the command ({type(exc).__name__}: {exc})")
        reason = denial_reason(answer)
        if reason is not None:
            tool = hook_input.get("tool_name") if isinstance(hook_input, Mapping) else None
            with contextlib.suppress(Exception):  # a failing note must not undo the denial
                note(f"denied {tool or 'Bash'}: {reason}")
        return answer

    return hook


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bash_hook")
    parser.add_argument("--worktree", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--sandbox", default=None)
    try:
        args = parser.parse_args(argv)
        config = BashGuardConfig.model_validate_json(args.config)
        sandbox = RunSandbox.model_validate_json(args.sandbox) if args.sandbox else None
        hook_input = json.loads(sys.stdin.read() or "{}")
        answer = decide(hook_input, Path(args.worktree), config, sandbox=sandbox)
    except (Exception, SystemExit) as exc:  # fail closed: a blocking error
        sys.stderr.write(f"cpe bash guard: cannot check the command: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
