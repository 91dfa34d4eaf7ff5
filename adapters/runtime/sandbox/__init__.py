"""The OS sandbox: every agent command held by the kernel (bubblewrap), not only by a parser.

The Bash guard (``adapters.bash_guard``) reads a command and denies what it can see;
a program the agent writes and runs is out of its sight. The sandbox is the layer under it:

- **Claude runtimes** (SDK and ``claude -p``): cpe's ``PreToolUse`` hook, after the guard
  allowed a Bash command, rewrites it into ``bwrap … -- bash -c '<command>'``
  (:meth:`RunSandbox.wrap_command`), so every command, and everything it starts, runs in the
  run's sandbox (``bwrap``'s docstring says what it sees). The CLI's own file tools (Read,
  Write, Edit) run in the CLI, outside it: the same hook checks their paths
  (``bash_guard.files``).
- **codex**: its own sandbox (``workspace-write`` or ``read-only``) confines its commands; cpe
  runs the whole ``codex exec`` inside a bubblewrap sandbox that shares the host's network
  (codex must reach its model), so codex and its commands see no credential store, no other
  run's files and a private ``/tmp`` (:meth:`RunSandbox.wrap_argv`).

Why not the claude CLI's own sandbox (``sandbox.enabled``, bubblewrap and socat on Linux)?
Tried on the bundled CLI 2.1.332 as root with ``IS_SANDBOX=1``: writes outside the worktree
failed, but ``git add -A`` in a worktree failed on the placeholder files it mounts there
(``.bash_profile`` …), the main repository's ``refs/heads/main`` stayed writable, and with
``allowedDomains = []`` under ``bypassPermissions`` a command still downloaded from pypi.org.

The preflight (``probe``) finds bubblewrap and runs a sandbox once at start; without one,
``cpe run`` refuses to start agents unless ``[sandbox] required = false``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.runtime.sandbox.config import DEFAULT_REGISTRIES, SANDBOX_HIDDEN, SandboxConfig

if TYPE_CHECKING:
    from adapters.runtime.sandbox.bwrap import (
        PROXY_PORT,
        PROXY_SOCKET,
        GitLayout,
        RunSandbox,
        Sandbox,
    )

_BWRAP = frozenset({"PROXY_PORT", "PROXY_SOCKET", "GitLayout", "RunSandbox", "Sandbox"})


def __getattr__(name: str) -> Any:
    """The sandbox itself, imported on first use: bwrap.py brings the worktrees, GitPython and
    psutil, and reading the configuration (every cpe command) needs the config module alone."""
    if name in _BWRAP:
        from adapters.runtime.sandbox import bwrap  # noqa: PLC0415

        return getattr(bwrap, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_REGISTRIES",
    "PROXY_PORT",
    "PROXY_SOCKET",
    "SANDBOX_HIDDEN",
    "GitLayout",
    "RunSandbox",
    "Sandbox",
    "SandboxConfig",
]
