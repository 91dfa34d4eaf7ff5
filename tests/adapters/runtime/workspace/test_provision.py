"""The provisioner's workspace hooks around an implementor run: after_run runs once, before
the patch is taken, so what it changes (a formatter) is part of the revision."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from adapters.runtime.workspace import provision
from adapters.runtime.workspace.provision import Provisioner
from domain.models import EngineState
from domain.ports import RuntimeAdapterDeps
from domain.results import ImplementorResult
from tests.fakes.provider import fake_provider
from tests.support.git import isolate_git, make_mixed_repo


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)


def _deps() -> RuntimeAdapterDeps:
    _, provider = fake_provider()
    return RuntimeAdapterDeps(
        work_item_reader=provider.work_item_reader,
        revision_reader=provider.revision_reader,
        get_state=EngineState,
        get_review_history=provider.revision_reader.get_review_history,
    )


def test_after_run_runs_once_before_the_patch_is_taken(tmp_path: Path) -> None:
    repo = make_mixed_repo(tmp_path)
    count = tmp_path / "after_run.count"
    hooks = {"after_run": (f"echo formatted > formatted.txt; echo run >> {count}", 30.0)}
    provisioner = Provisioner(
        repo_root=repo,
        default_branch="main",
        setup_command="",
        setup_timeout=30,
        context_paths=(),
        deps=_deps(),  # no prompt is assembled here
        hooks=hooks,
    )

    async def main() -> ImplementorResult:
        worktree = await provisioner._create_worktree("cpe/1-format")
        (worktree.path / "feature.txt").write_text("the agent's change\n")
        output = {"role": "implementor", "outcome": "completed", "summary": "done"}
        result = await provisioner.result("implementor", output, worktree)
        await provisioner.release(worktree)
        assert isinstance(result, ImplementorResult)
        return result

    result = anyio.run(main)
    assert result.patch is not None
    assert "+++ b/formatted.txt" in result.patch
    assert "+++ b/feature.txt" in result.patch
    assert count.read_text() == "run\n"  # once, not again at the release
    assert not (repo / ".worktrees" / "cpe" / "1-format").exists()


def test_a_worktree_cancelled_before_its_thread_began_is_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop during the engine's start cancels a run before its worktree's thread begins:
    nothing was made, so nothing is waited for (the cleanup wait, an hour here, held every such
    stop for a minute), and no worktree or setup command appears afterwards."""
    monkeypatch.setattr(provision, "_CLEANUP_WAIT", 3600.0)
    repo = make_mixed_repo(tmp_path)
    provisioner = Provisioner(
        repo_root=repo,
        default_branch="main",
        setup_command=f"echo ran > {tmp_path / 'setup-ran'}; sleep 600",
        setup_timeout=600,
        context_paths=(),
        deps=_deps(),
    )
    raised: list[BaseException] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()  # before the call: its first checkpoint raises
            try:
                await provisioner._create_worktree("cpe/1-cancelled")
            except BaseException as exc:
                raised.append(exc)
                raise

    thread = threading.Thread(target=anyio.run, args=(main,), daemon=True)
    thread.start()
    thread.join(60.0)
    assert not thread.is_alive(), "the cancelled start waited for a worktree never begun"
    assert len(raised) == 1
    assert not (repo / ".worktrees" / "cpe" / "1-cancelled").exists()
    assert not (tmp_path / "setup-ran").exists()
