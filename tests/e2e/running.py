"""`cpe run` as a real process, for the end-to-end tests: its configuration, its start (on its
own, or against a scripted model whose implementor hangs), a systemd notify socket to listen
on, and reads of the state it leaves in the repository; and a command such as ``cpe ARGS`` run
to its end as a user runs it (``run_command``)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from actors.journal import Journal
from adapters.providers.local.provider import LocalProvider
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from domain.models import AgentRun, Revision, WorkItem
from tests.support.git import git_raw, make_repo

CPE = Path(sys.executable).parent / "cpe"
MODEL_KEY = "sk-ant-test-never-sent"  # no test reaches a real model

CONFIG = """
[engine]
shutdown_timeout = {shutdown_timeout}
[provider.local]
pipeline_command = []
[workflow]
auto_merge = true
retry_backoff_initial = 0.2
retry_backoff_max = 1
[pollers]
work_items_interval = 0.3
revisions_interval = 0.3
specs_interval = 0.3
[runtime]
max_agent_duration = 120
[supervisor]
backoff_initial = 0.1
[dashboard]
listen = "127.0.0.1:0"
"""


def make_cpe_repo(path: Path, *, shutdown_timeout: float = 30, extra: str = "") -> Path:
    files = {
        "supervisor.toml": CONFIG.format(shutdown_timeout=shutdown_timeout) + extra,
        ".gitignore": ".worktrees/\n.cpe/\n",
        "README.md": "demo\n",
    }
    return make_repo(path, files, with_agents=True)


def add_work_item(repo: Path, title: str = "Greeting", body: str = "Add greet(name).") -> None:
    provider = LocalProvider(repo, repo / ".cpe", "main")
    try:
        provider.work_item_writer.create_work_item(title, body)
    finally:
        provider.close()


def start_cpe(
    repo: Path,
    home: Path,
    log: TextIO,
    env: Mapping[str, str],
    args: Sequence[str] = (),
    *,
    without: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """``cpe run --repo REPO ARGS`` with a minimal environment plus ``env``, minus the
    variables named in ``without`` (the model keys given by default, for one)."""
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": MODEL_KEY,  # past the preflight; the scripted model's replaces it
        "OPENAI_API_KEY": MODEL_KEY,
        **env,
    }
    return subprocess.Popen(
        [str(CPE), "run", "--repo", str(repo), *args],
        cwd=home,  # not the repository: paths must not depend on the working directory
        env={name: value for name, value in base.items() if name not in without},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


@contextlib.contextmanager
def start_cpe_with_a_hanging_implementor(
    repo: Path,
    home: Path,
    processes: list[subprocess.Popen[str]],
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen[str], ScriptedModelServer]]:
    """``start_cpe`` against a scripted model whose implementor hangs, with ``env``; the
    process (put in ``processes``) and the model while the block runs. Its output goes to
    ``home / "cpe.log"``: read it when a test fails."""
    with contextlib.ExitStack() as stack:
        log = stack.enter_context((home / "cpe.log").open("a"))
        server = stack.enter_context(
            ScriptedModelServer([load_scenario("hang", match=Match(role="implementor"))])
        )
        engine = start_cpe(repo, home, log, {**server.client_env(), **(env or {})})
        processes.append(engine)
        yield engine, server


def run_command(
    command: Sequence[str],
    *,
    home: Path,
    cwd: Path | None = None,
    timeout: float = 120,
    path: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``command`` (``[str(CPE), ARGS]`` for ``cpe ARGS``) run to its end as a user runs it,
    its output captured as text: in ``cwd`` (``home`` unless given), with a minimal environment
    (``PATH``, this one's unless ``path`` is given; ``HOME``, ``home``; ``LANG``) plus ``env``."""
    return subprocess.run(
        list(command),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=home if cwd is None else cwd,
        env={
            "PATH": path or os.environ["PATH"],
            "HOME": str(home),
            "LANG": "C.UTF-8",
            **(env or {}),
        },
    )


def revisions(repo: Path) -> list[Revision]:
    provider = LocalProvider(repo, repo / ".cpe", "main")
    try:
        return list(provider.revision_reader.list_revisions())
    finally:
        provider.close()


def work_items(repo: Path) -> list[WorkItem]:
    provider = LocalProvider(repo, repo / ".cpe", "main")
    try:
        return list(provider.work_item_reader.list_work_items())
    finally:
        provider.close()


def agent_runs(repo: Path) -> list[AgentRun]:
    """The runs the journal holds; read it only once the process has exited."""
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        return list(journal.restore().state.agent_runs.values())
    finally:
        journal.close()


def worktrees(repo: Path) -> list[Path]:
    root = repo / ".worktrees"
    return sorted(p for p in root.rglob("*") if (p / ".git").exists()) if root.exists() else []


def agent_branches(repo: Path) -> list[str]:
    return git_raw(repo, "branch", "--list", "--format=%(refname:short)", "cpe/*").split()


def wait_for(condition: Callable[[], bool], timeout: float = 120) -> bool:
    """Re-check ``condition`` (state another process writes) until it holds or time is up."""
    pause = threading.Event()  # never set: a bounded pause between checks of another process
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        pause.wait(0.2)
    return condition()


class NotifySocket:
    """A ``$NOTIFY_SOCKET`` as systemd offers one: a datagram socket the test reads."""

    def __init__(self) -> None:
        # A short path: a unix socket's path is limited to 107 bytes, tmp_path can be longer.
        self._dir = tempfile.TemporaryDirectory(prefix="cpe-notify-")
        self.path = str(Path(self._dir.name) / "notify")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self.received: list[str] = []

    def wait_for(self, message: str, timeout: float = 120) -> bool:
        """Read datagrams until ``message`` arrives (True) or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while message not in self.received:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                return False
            self.received.extend(data.decode().split("\n"))
        return True

    def close(self) -> None:
        self._sock.close()
        self._dir.cleanup()


class Reader:
    """The lines a process writes to a pipe, read by a thread as they come, so a test can wait
    for one without blocking on the pipe."""

    def __init__(self, stream: TextIO):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: TextIO) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, needle: str, timeout: float = 120) -> bool:
        return wait_for(lambda: needle in self.text, timeout)

    def join(self, timeout: float = 60) -> None:
        self._thread.join(timeout)
