"""What every runtime does with the sandbox around one run: make it, record it, remove it.

A run's private directory (``/tmp`` and ``HOME`` inside the sandbox) is
``<state_dir>/sandbox/<session_id>``, beside the run's artifacts; it goes when the run ends, and
a start sweeps the ones a killed cpe left (:func:`sweep`). The private git refs and objects live
in the worktree's own git files and go with the worktree.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import structlog

from adapters.runtime.sandbox.bwrap import RunSandbox, Sandbox

__all__ = ["PRIVATE", "NOT_CONFIGURED", "open_sandbox", "sandbox_record", "sweep"]

log = structlog.get_logger("cpe.runtime.sandbox")

PRIVATE = "sandbox"  # in the state directory: one private directory per run
NOT_CONFIGURED = "no sandbox was configured for this runtime"


def open_sandbox(
    sandbox: Sandbox | None,
    *,
    worktree: Path,
    writable: bool,
    repo: Path,
    state_dir: Path,
    session_id: str,
    home: str | None,
) -> RunSandbox | None:
    """The run's sandbox, its private directories made; None without a sandbox."""
    if sandbox is None:
        return None
    return sandbox.for_run(
        worktree=worktree,
        writable=writable,
        repo=repo,
        state_dir=state_dir,
        private=state_dir / PRIVATE / session_id,
        home=home,
    )


def sandbox_record(run: RunSandbox | None, missing: str, applies_to: str) -> dict[str, Any]:
    """The ``sandbox`` entry of a run's ``effective_policy``."""
    if run is None:
        return {"kind": "none", "reason": missing, "applies_to": "nothing: the Bash guard only"}
    return run.describe(applies_to)


def sweep(state_dir: Path) -> list[Path]:
    """Startup: remove the private directories of runs a killed cpe left (every run is over
    when this runs: the reaper killed what was left of them first)."""
    removed = []
    for private in sorted((state_dir / PRIVATE).glob("*")):
        shutil.rmtree(private, ignore_errors=True)
        removed.append(private)
    if removed:
        log.info("removed the sandbox directories of earlier runs", count=len(removed))
    return removed
