"""One run's bubblewrap sandbox: which paths a command sees, writes or never sees, and the
``bwrap`` arguments that make it so.

What a sandboxed command gets (the mounts, in the order bwrap applies them: a later one covers
an earlier one):

1. New pid, ipc, uts and cgroup namespaces, and a new network namespace with only its own
   loopback (``--unshare-net``), so nothing off the machine, nor any listener of the host, is
   reachable; with ``allow_install`` a forwarder in the sandbox relays ``127.0.0.1:3128`` to
   cpe's proxy, which lets through CONNECTs to the registries only (``proxy``). Killing bwrap
   kills everything in it (``--die-with-parent``, and the pid namespace's init).
2. The whole file system read-only, a fresh ``/dev`` and ``/proc`` (only the sandbox's own
   processes: no other ``/proc/*/environ``).
3. Empty: ``/run`` (the host's sockets: docker, dbus…), ``/var/tmp``, cpe's state directory
   (the journal, other runs' transcripts and homes), and every credential store under every
   home (the Bash guard's protected paths, ``.claude``, ``.codex``, ``[sandbox]
   protected_paths``); ``/tmp`` is the run's own private directory.
4. The repository read-only again (it may lie under a hidden directory, ``/tmp`` in tests), its
   state directory hidden again; cpe's own installation (its virtual environment and source)
   read-only again where it lies under an emptied directory (a checkout under ``/tmp``), so the
   programs cpe runs in the sandbox find their interpreter.
5. Writable: the worktree (an implementor's) and its own files in the main repository's
   ``.git`` (``worktrees/<name>``: index, HEAD); the pointers from one to the other
   (``<worktree>/.git``, ``commondir``, ``gitdir``) stay read-only, so git outside the sandbox
   keeps reading the repository cpe set up. New objects go to a private object directory and
   ref updates to a private copy of ``refs/`` (``GIT_OBJECT_DIRECTORY`` with the repository's
   objects as an alternate): an agent can commit on its branch, and cannot rewrite ``main``,
   another branch or the repository's objects. A throwaway ``HOME`` (``cpe demo``, the tests)
   is a private, writable directory of the run's (with a ``.gitconfig`` naming the user's git
   identity); a user's own home stays read-only, its caches moved to ``/tmp``.

The model credentials the agent CLI holds (``ANTHROPIC_API_KEY``…) are removed from the
commands' environment.
"""

from __future__ import annotations

import contextlib
import glob
import os
import posixpath
import shlex
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from adapters.bash_guard.secrets import main_git_dir
from adapters.runtime.workspace.patches import SANDBOX_OBJECTS

__all__ = ["PROXY_PORT", "PROXY_SOCKET", "GitLayout", "RunSandbox", "Sandbox"]

PROXY_SOCKET = "/run/cpe-proxy.sock"  # where cpe's proxy appears inside a sandbox
PROXY_PORT = 3128  # the forwarder's port on the sandbox's loopback
_CWD = ".cpe-cwd"  # in the run's /tmp: where the last command ended
SCRATCH = SANDBOX_OBJECTS.partition("/")[0]  # in the worktree's own git dir: refs, objects
Network = Literal["none", "registries"]
_EMPTIED = ("/tmp", "/run", "/var/tmp")  # the host's, emptied in the sandbox
# With the user's own home read-only, the caches tools keep there go to the run's /tmp.
_CACHES = (
    ("XDG_CACHE_HOME", "/tmp/.cache"),
    ("npm_config_cache", "/tmp/.npm"),
    ("PIP_CACHE_DIR", "/tmp/.cache/pip"),
)


class Sandbox(BaseModel):
    """What the preflight found on this machine, with the ``[sandbox]`` settings applied."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bwrap: str
    version: str = ""
    shell: str = "/bin/bash"
    python: str = ""  # runs the proxy forwarder in the sandbox (allow_install)
    # cpe's own interpreter environment and source: shown read-only wherever they are, so the
    # forwarder (and a CLI run by cpe's interpreter) runs from a checkout under /tmp too
    installation: tuple[str, ...] = ()
    homes: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()  # fragments (as the guard's) and ~/… or absolute paths
    network: Network = "none"
    registries: tuple[str, ...] = ()
    proxy_socket: str | None = None  # cpe's proxy on the host (allow_install)
    unset_env: tuple[str, ...] = ()
    identity: tuple[str, str] = ("cpe agent", "agent@cpe.invalid")

    def for_run(
        self,
        *,
        worktree: Path,
        writable: bool,
        repo: Path,
        state_dir: Path,
        private: Path,
        home: str | None,
        extra_writable: Sequence[Path] = (),
        keep_env: bool = False,
    ) -> RunSandbox:
        """The sandbox of one run, its private directory made (``prepare``)."""
        own = main_git_dir(os.path.realpath(worktree)) if writable else None
        layout = None
        if own is not None:
            common, gitdir = own
            layout = GitLayout(common=common, own=gitdir, scratch=str(Path(gitdir) / SCRATCH))
        run = RunSandbox(
            sandbox=self,
            worktree=os.path.realpath(worktree),
            writable=writable,
            repo=os.path.realpath(repo),
            state_dir=os.path.realpath(state_dir),
            private=os.path.realpath(private),
            home=home,
            git=layout,
            extra_writable=tuple(os.path.realpath(p) for p in extra_writable),
            keep_env=keep_env,
        )
        run.prepare()
        return run


class GitLayout(BaseModel):
    """A linked worktree's place in the main repository: ``common`` is its ``.git``, ``own``
    the worktree's files in it, ``scratch`` the sandbox's private refs and objects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    common: str
    own: str
    scratch: str


class RunSandbox(BaseModel):
    """One run's sandbox; JSON-serialisable, so a hook process can wrap commands with it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sandbox: Sandbox
    worktree: str
    writable: bool
    repo: str
    state_dir: str
    private: str
    home: str | None = None
    git: GitLayout | None = None
    extra_writable: tuple[str, ...] = ()
    extra_readable: tuple[str, ...] = ()  # shown read-only even where the sandbox hides (a CLI)
    keep_env: bool = False

    # ------------------------------------------------------------------ on the host

    def prepare(self) -> None:
        """Make the run's private directories (idempotent)."""
        private = Path(self.private)
        for sub in ("tmp", "home"):
            (private / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        name, email = self.sandbox.identity
        gitconfig = private / "home" / ".gitconfig"
        if not gitconfig.exists():
            gitconfig.write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")
        if self.git is not None:
            scratch = Path(self.git.scratch)
            if not (scratch / "refs").is_dir():
                scratch.mkdir(parents=True, exist_ok=True)
                _copy_refs(Path(self.git.common) / "refs", scratch / "refs")
            for sub in ("logs", "objects"):
                (scratch / sub).mkdir(parents=True, exist_ok=True)

    def release(self) -> None:
        """The run is over: its private directory goes (the git scratch goes with the
        worktree's own files when the worktree is removed)."""
        shutil.rmtree(self.private, ignore_errors=True)

    # ------------------------------------------------------------------ the arguments

    def args(
        self, cwd: str | None = None, *, share_network: bool = False, die_with_parent: bool = True
    ) -> list[str]:
        """``bwrap`` and its arguments up to (not including) the ``--`` before the command.

        ``die_with_parent``: the sandbox is killed when the process that started bwrap ends.
        Linux ties that to the starting *thread*: not for bwrap started from a thread pool."""
        sb = self.sandbox
        args = [sb.bwrap, *(["--die-with-parent"] if die_with_parent else [])]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not share_network:
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--tmpfs", "/run", "--tmpfs", "/var/tmp"]
        args += ["--bind", str(Path(self.private) / "tmp"), "/tmp"]
        for path in sb.installation:
            if any(_inside(path, top) for top in _EMPTIED):
                args += ["--ro-bind", path, path]
        args += ["--ro-bind", self.repo, self.repo]
        if os.path.isdir(self.state_dir):
            args += ["--tmpfs", self.state_dir]
        # /tmp at its own path too: a program that reads where /tmp comes from (codex's sandbox
        # does, from the mount table) finds it there
        args += ["--bind", str(Path(self.private) / "tmp"), str(Path(self.private) / "tmp")]
        for path, is_dir in self.hidden():
            args += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
        for path in self.extra_readable:
            args += ["--ro-bind", path, path]
        if self.writable:
            args += ["--bind", self.worktree, self.worktree]
            args += self._git_args()
        if self.private_home:
            args += ["--bind", str(Path(self.private) / "home"), str(self.home)]
        else:  # the user's own home, read-only: caches go to the run's /tmp
            for name, value in _CACHES:
                args += ["--setenv", name, value]
        for path in self.extra_writable:
            args += ["--bind", path, path]
        if sb.proxy_socket is not None and not share_network:
            args += ["--bind", sb.proxy_socket, PROXY_SOCKET]
        args += ["--setenv", "TMPDIR", "/tmp"]
        if not self.keep_env:
            for name in sb.unset_env:
                args += ["--unsetenv", name]
        if sb.proxy_socket is not None and not share_network:
            url = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                args += ["--setenv", name, url]
            for name in ("NO_PROXY", "no_proxy"):
                args += ["--setenv", name, "localhost,127.0.0.1,::1"]
        args += ["--chdir", cwd or self.worktree]
        return args

    @property
    def private_home(self) -> bool:
        """The agent's ``HOME`` is a throwaway of cpe's (not a user's home): commands get a
        private, writable one there."""
        home = self.home
        if home is None:
            return False
        real = os.path.realpath(home)
        return not any(real == os.path.realpath(h) for h in self.sandbox.homes)

    def _git_args(self) -> list[str]:
        if self.git is None:
            return []
        g = self.git
        args = ["--bind", g.own, g.own]
        for pointer in (Path(g.own) / "commondir", Path(g.own) / "gitdir"):
            if pointer.is_file():
                args += ["--ro-bind", str(pointer), str(pointer)]
        dot_git = Path(self.worktree) / ".git"
        if dot_git.is_file():
            args += ["--ro-bind", str(dot_git), str(dot_git)]
        scratch = Path(g.scratch)
        args += ["--bind", str(scratch / "refs"), str(Path(g.common) / "refs")]
        if (Path(g.common) / "logs").is_dir():
            args += ["--bind", str(scratch / "logs"), str(Path(g.common) / "logs")]
        args += ["--setenv", "GIT_OBJECT_DIRECTORY", str(scratch / "objects")]
        args += ["--setenv", "GIT_ALTERNATE_OBJECT_DIRECTORIES", str(Path(g.common) / "objects")]
        return args

    def hidden(self) -> Iterator[tuple[str, bool]]:
        """Every protected path that exists (a directory or not), under every home and
        absolute; none inside what the run writes or runs from."""
        seen: set[str] = set()
        keep = [self.worktree, *self.extra_writable, self.private]
        for path in self._protected_paths():
            for found in sorted(glob.glob(path)) if "*" in path else [path]:
                real = posixpath.normpath(found)
                if real in seen or not os.path.lexists(real):
                    continue
                if any(_inside(k, real) or _inside(real, k) for k in keep):
                    continue  # the run's own places stay as they are
                if self.private_home and _inside(real, str(self.home)):
                    continue  # covered by the private home
                seen.add(real)
                yield real, os.path.isdir(real) and not os.path.islink(real)

    def _protected_paths(self) -> Iterator[str]:
        for fragment in self.sandbox.protected:
            if fragment.startswith("/proc/"):
                continue  # the sandbox has a /proc of its own
            if fragment.startswith("/"):
                yield fragment
                continue
            relative = fragment.removeprefix("~/").strip("/")
            for home in self.sandbox.homes:
                yield posixpath.join(home, relative)

    # ------------------------------------------------------------------ wrapping

    def wrap_command(self, command: str, cwd: str | None = None) -> str:
        """``command`` (a Bash command line) as the command line that runs it sandboxed.

        The claude CLI keeps the directory a command ends in for the next one (it evaluates
        the line in its shell, then reads ``pwd``): the sandboxed shell leaves its own in the
        run's ``/tmp`` when it exits, and the line moves there too, if it lies in the worktree.
        The exit status is the command's."""
        inner = f"trap 'pwd -P > /tmp/{_CWD}' EXIT; eval \"$1\""
        words = [*self.args(cwd), "--", *self._inner(), self.sandbox.shell, "-c", inner]
        words += ["bash", command]
        left = shlex.quote(str(Path(self.private) / "tmp" / _CWD))
        tree = shlex.quote(self.worktree)
        follow = (
            f"__cpe_status=$?; __cpe_dir=$(cat {left} 2>/dev/null); "
            f'case "$__cpe_dir" in {tree}|{tree}/*) cd -- "$__cpe_dir";; esac; '
            "(exit $__cpe_status)"
        )
        return " ".join(shlex.quote(w) for w in words) + "; " + follow

    def wrap_argv(self, argv: Sequence[str], cwd: str | None = None) -> list[str]:
        """``argv`` run in the sandbox, with the host's network (a CLI that must reach its
        model; its own sandbox confines its commands). It is killed with its process group,
        whose leader is bwrap (the pid namespace goes with its init)."""
        return [*self.args(cwd, share_network=True, die_with_parent=False), "--", *argv]

    def _inner(self) -> list[str]:
        if self.sandbox.proxy_socket is None:
            return []
        forward = Path(__file__).with_name("forward.py")
        return [self.sandbox.python, "-I", str(forward), PROXY_SOCKET, str(PROXY_PORT), "--"]

    # ------------------------------------------------------------------ the record

    def describe(self, applies_to: str) -> dict[str, Any]:
        """What the sandbox enforces, for the run's ``effective_policy``."""
        sb = self.sandbox
        network = (
            "none (a network namespace of its own)"
            if sb.network == "none"
            else f"package registries only, through cpe's proxy: {', '.join(sb.registries)}"
        )
        writable = [self.worktree, *self._git_writable()] if self.writable else []
        return {
            "kind": "bubblewrap",
            "bwrap": sb.bwrap,
            "version": sb.version,
            "applies_to": applies_to,
            "writable": [*writable, "/tmp (the run's own)", *self.extra_writable],
            "read_only": "everything else, the main repository's .git included",
            "hidden": [path for path, _ in self.hidden()]
            + ["/run", "/var/tmp", self.state_dir, "other processes (a pid namespace)"],
            "network": network,
            "environment_removed": [] if self.keep_env else list(sb.unset_env),
        }

    def _git_writable(self) -> list[str]:
        if self.git is None:
            return []
        return [f"{self.git.own} (the worktree's own git files; refs and objects private)"]


def _copy_refs(source: Path, target: Path) -> None:
    """The repository's loose refs as they are now. Other sessions create and delete branches
    meanwhile: a ref being written (its ``.lock``) is not copied, one that vanishes is skipped
    (``shutil.copytree`` failed the whole run on either)."""
    for root, _dirs, files in os.walk(source):
        here = target / Path(root).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(".lock"):
                continue
            with contextlib.suppress(FileNotFoundError):
                shutil.copy2(Path(root) / name, here / name, follow_symlinks=False)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
