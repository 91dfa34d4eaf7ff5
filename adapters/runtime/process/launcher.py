"""Launching an agent CLI with exactly the environment we chose, in its own process group.

The Claude Agent SDK starts the CLI with ``os.environ`` plus its options' ``env`` (it cannot
be told not to inherit), so a provider token in the daemon's environment would reach the agent
and every command it runs. The SDK is therefore pointed (``cli_path``) at :data:`LAUNCHER`,
which runs a small launch script written for the run: it records its pid, becomes a new session
(so the CLI and everything it starts share one process group that can be killed as a whole),
and ``exec``s the real CLI under ``env -i`` with the allowlisted environment, keeping only the
variables the SDK itself sets.

Nothing cpe writes is ever executed. On Linux, ``execve`` of a file fails with ``ETXTBSY``
while any process holds it open for writing. Python opens files close-on-exec, but a child
forked by another thread (another run starting its CLI, a git command) while the script is
open for writing gets a copy of that descriptor, and keeps it until it execs; executing the
script meanwhile fails, and with many runs starting at once it did. Writing under a temporary
name and renaming it into place changes nothing: the child holds the same inode. So the file
the SDK executes is :data:`LAUNCHER`, which is part of cpe and which cpe never opens for
writing: no process of ours can hold a writable descriptor to it. The launcher passes the
run's script to ``/bin/sh`` as a file to read, and a reader is never refused because of a
writer. The script is complete when the SDK starts: it was closed before, and a forked child's
copy of the descriptor writes nothing before it execs. The CLI runtimes (``cli/process.py``)
execute the configured CLI itself, which cpe never writes either; setup and pipeline commands
run in worktrees ``git`` checked out, so what they execute was written by a git process that
had exited before.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from collections.abc import Mapping
from pathlib import Path

import anyio
import psutil

# Variables the SDK sets for the CLI (transport/subprocess_cli.py); they carry no secret.
SDK_VARIABLES = (
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_AGENT_SDK_VERSION",
    "CLAUDE_CODE_SDK_READS_SESSION_STATE",
    "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING",
    "PWD",
)


# The file the SDK executes for every run (see the module docstring); the run's script is named
# in this variable, which ``env -i`` then keeps from the CLI.
LAUNCHER = Path(__file__).with_name("launcher.sh")
LAUNCH_SCRIPT_VARIABLE = "CPE_LAUNCH_SCRIPT"


def write_launch_script(
    path: Path, cli: str | Path, env: Mapping[str, str], pidfile: Path
) -> dict[str, str]:
    """Write the run's launch script at ``path`` (mode 0600: it is read, never executed) and
    return the environment that makes :data:`LAUNCHER` run it."""
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    passthrough = " ".join(
        f'${{{name}+"{name}=${name}"}}' for name in SDK_VARIABLES if name not in env
    )
    script = (
        "# Written by cpe for one agent run and read by /bin/sh: a clean environment and a\n"
        "# process group of its own for the agent CLI.\n"
        "# See adapters/runtime/process/launcher.py.\n"
        f"echo $$ > {shlex.quote(str(pidfile))}\n"
        f"exec /usr/bin/env setsid env -i {assignments} {passthrough} "
        f'{shlex.quote(str(cli))} "$@"\n'
    )
    # It holds the model credential: created private, not narrowed after the fact.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(script)
    return {LAUNCH_SCRIPT_VARIABLE: str(path)}


def read_pid(pidfile: Path) -> int | None:
    """The pid a pid file names (its first word; ``stamp_pid`` adds the start time)."""
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stamp_pid(pidfile: Path, pid: int) -> None:
    """Rewrite ``pidfile`` as ``pid start-time``, while ``pid`` is certainly our process (it is
    running the session now): the reaper of a later start tells it from a recycled pid."""
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        return
    pidfile.write_text(f"{pid} {started!r}\n")


def live_group(pidfile: Path) -> int | None:
    """The process group a run's pid file names, if it is still that run's and alive.

    The file holds the leader's pid and start time. A leader that is alive with another start
    time is a recycled pid: not ours. A leader that is gone while its group still has members
    is ours: a process group id is not reused while the group exists (POSIX)."""
    try:
        pid_text, _, started_text = pidfile.read_text().strip().partition(" ")
        pid, started = int(pid_text), float(started_text or 0)
    except (OSError, ValueError):
        return None
    try:
        leader = psutil.Process(pid)
        if abs(leader.create_time() - started) > 0.01:
            return None
        if os.getpgid(pid) != pid:
            return None
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass  # the leader is gone; its group may not be
    except psutil.Error:
        return None
    return pid if group_members(pid) else None


def kill_tree(pid: int | None, *, grace: float = 5.0) -> list[int]:
    """SIGTERM the process group led by ``pid`` and every descendant, wait ``grace`` seconds,
    then SIGKILL whatever is left; return once they are gone. Returns the pids that were still
    alive at the start.

    The leader may have ended already (a CLI that crashed): what it started is then found by
    its process group, which outlives its leader and whose id is not reused while it exists.
    """
    if pid is None:
        return []
    try:
        leader = psutil.Process(pid)
        victims = [leader, *leader.children(recursive=True)]
    except psutil.NoSuchProcess:
        victims = []
    known = {p.pid for p in victims}
    victims += [p for p in group_members(pid) if p.pid not in known]
    terminate(pid, victims, grace=grace)
    return [p.pid for p in victims]


def kill_group(pgid: int, grace: float) -> None:
    """SIGTERM every process of group ``pgid``, wait up to ``grace``, SIGKILL what is left."""
    members = group_members(pgid)
    if members:
        terminate(pgid, members, grace=grace)


async def wait_for_exit(pid: int, *, poll: float = 0.2) -> None:
    """Return once process ``pid`` has ended, without reaping it (it is another's child): a
    pidfd where Linux offers one, else polling every ``poll`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd here
        while _running(pid):
            await anyio.sleep(poll)
        return
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Every live (non-zombie) process whose process group is ``pgid``."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def terminate(pgid: int, victims: list[psutil.Process], *, grace: float) -> None:
    """SIGTERM process group ``pgid`` and each of ``victims`` (some may have left the group),
    wait up to ``grace`` seconds, then SIGKILL the group and whoever of them is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    for process in victims:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(victims, timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace)
