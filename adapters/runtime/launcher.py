"""Launching an agent CLI with exactly the environment we chose, in its own process group.

The Claude Agent SDK starts the CLI with ``os.environ`` plus its options' ``env`` (it cannot
be told not to inherit), so a provider token in the daemon's environment would reach the agent
and every command it runs. The SDK is therefore pointed (``cli_path``) at a small wrapper
written for the run: it records its pid, becomes a new session (so the CLI and everything it
starts share one process group that can be killed as a whole), and ``exec``s the real CLI under
``env -i`` with the allowlisted environment, keeping only the variables the SDK itself sets.
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


def write_wrapper(path: Path, cli: str | Path, env: Mapping[str, str], pidfile: Path) -> Path:
    """Write the wrapper script at ``path`` (mode 0700) and return it."""
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    passthrough = " ".join(
        f'${{{name}+"{name}=${name}"}}' for name in SDK_VARIABLES if name not in env
    )
    script = (
        "#!/bin/sh\n"
        "# Written by cpe for one agent run: a clean environment and a process group of its\n"
        "# own for the agent CLI. See adapters/runtime/launcher.py.\n"
        f"echo $$ > {shlex.quote(str(pidfile))}\n"
        f"exec /usr/bin/env setsid env -i {assignments} {passthrough} "
        f'{shlex.quote(str(cli))} "$@"\n'
    )
    path.write_text(script)
    path.chmod(0o700)
    return path


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
