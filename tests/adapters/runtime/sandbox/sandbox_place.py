"""A place to try escapes in: a repository with a linked worktree (where the agent works), a
home full of credentials, a directory outside with something to delete, a bare repository to
push to, and a listener on the host's loopback that records who reached it.

The place is made outside ``/tmp`` and ``/var/tmp`` (under ``~/.cache``): a sandbox has its own
``/tmp`` and an empty ``/var/tmp``, so there the outside would be absent rather than
read-only, and an escape would fail for the wrong reason."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapters.runtime.preflight import find_sandbox
from adapters.runtime.sandbox import RunSandbox, Sandbox, SandboxConfig
from adapters.runtime.sandbox.runs import open_sandbox
from tests.support.git import git_raw, make_repo

CREDENTIAL = ".claude/.credentials.json"
SECRET = "sk-ant-oat01-not-a-real-secret"


@contextmanager
def place_root() -> Iterator[Path]:
    """A fresh directory the sandbox shows read-only (not under a temporary directory)."""
    parent = Path.home() / ".cache" / "cpe-tests"
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="sandbox-", dir=parent))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Place:
    def __init__(self, tmp_path: Path, *, with_agents: bool = False) -> None:
        self.root = tmp_path
        files = {"README.md": "demo\n", "src/a.py": "x = 1\n"}
        self.repo = make_repo(tmp_path / "repo", files, with_agents=with_agents)
        self.worktree = self.repo / ".worktrees" / "cpe" / "1-x"
        git_raw(self.repo, "worktree", "add", "-q", "-B", "cpe/1-x", str(self.worktree), "main")
        self.state_dir = self.repo / ".cpe"
        (self.state_dir / "runs").mkdir(parents=True)
        (self.state_dir / "journal.sqlite3").write_text("the journal\n")
        self.home = tmp_path / "home"  # a user's home, with logins in it
        for name in (CREDENTIAL, ".npmrc", ".aws/credentials", ".ssh/id_ed25519"):
            (self.home / name).parent.mkdir(parents=True, exist_ok=True)
            (self.home / name).write_text(f"{SECRET}\n")
        self.outside = tmp_path / "outside"
        (self.outside / "victim" / "specs").mkdir(parents=True)
        (self.outside / "victim" / "specs" / "a.md").write_text("a spec\n")
        self.bare = tmp_path / "stolen.git"
        git_raw(tmp_path, "init", "-q", "--bare", str(self.bare))

    def sandbox(self, config: SandboxConfig | None = None, proxy: str | None = None) -> Sandbox:
        found = find_sandbox(config or SandboxConfig(), proxy_socket=proxy)
        assert isinstance(found, Sandbox), found
        return found.model_copy(update={"homes": (*found.homes, str(self.home))})

    def open(self, found: Sandbox | None = None, *, home: str | None = None) -> RunSandbox:
        """The sandbox of implementor-1's run in this place (``found``: the machine's)."""
        run = open_sandbox(
            found if found is not None else self.sandbox(),
            worktree=self.worktree,
            writable=True,
            repo=self.repo,
            state_dir=self.state_dir,
            session_id="implementor-1",
            home=home,
        )
        assert run is not None
        return run

    def main_ref(self) -> str:
        return git_raw(self.repo, "rev-parse", "refs/heads/main").strip()

    def escaped(self) -> list[str]:
        """What an escape left outside the worktree, if anything."""
        found = []
        if not (self.outside / "victim" / "specs" / "a.md").exists():
            found.append("the victim's specs were deleted")
        found += [str(p) for p in self.outside.rglob("*") if "escaped" in p.name]
        if git_raw(self.bare, "for-each-ref").strip():
            found.append("a push reached the bare repository")
        return found


@contextmanager
def host_listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on the host's loopback; the list gets what every connection sent."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    received.append(conn.recv(4096))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], received
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()
