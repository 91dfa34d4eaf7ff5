"""What every runtime does before its agent starts, and after it ends.

The worktree (implementor only), the enriched prompt (context assembly) and the agent
definition, in that order; any failure removes the worktree again before it propagates
(S001-01, S001-08: no session is created). ``release`` removes the worktree and its branch,
shielded from cancellation, on every ending. The Claude SDK adapter and the CLI runtime share it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

import anyio
import structlog

from adapters.runtime.prompt.agents import AgentSpec, load_agent_definition
from adapters.runtime.prompt.context import assemble_prompt
from adapters.runtime.workspace.patches import extract_patch, fork_point
from adapters.runtime.workspace.worktrees import Worktree, WorktreeManager, run_git
from domain.errors import AgentFailure, InvalidAgentOutputError, PatchError, WorktreeError
from domain.models import AgentRole, AgentStartParams, ImplementorStartParams
from domain.ports import RuntimeAdapterDeps
from domain.results import AgentResult, ImplementorOutput, ImplementorResult, validate_output

log = structlog.get_logger("cpe.runtime.provision")

_CLEANUP_WAIT = 60.0  # seconds a cancelled setup gets to be killed and its worktree removed


@dataclass(frozen=True)
class Provisioned:
    worktree: Worktree | None
    prompt: str
    spec: AgentSpec


class WorkspaceSettings(Protocol):
    """What a runtime's config says about where and how its agents run."""

    @property
    def repo_root(self) -> str: ...
    @property
    def default_branch(self) -> str: ...
    @property
    def setup_command(self) -> str: ...
    @property
    def setup_timeout(self) -> float: ...
    @property
    def context_paths(self) -> tuple[str, ...]: ...
    @property
    def hooks(self) -> Mapping[str, tuple[str, float]]: ...
    @property
    def assembled(self) -> tuple[str, AgentSpec] | None: ...


class Provisioner:
    @classmethod
    def for_config(cls, config: WorkspaceSettings, deps: RuntimeAdapterDeps) -> Provisioner:
        return cls(
            repo_root=Path(config.repo_root),
            default_branch=config.default_branch,
            setup_command=config.setup_command,
            setup_timeout=config.setup_timeout,
            context_paths=config.context_paths,
            deps=deps,
            hooks=config.hooks,
            assembled=config.assembled,
        )

    def __init__(
        self,
        *,
        repo_root: Path,
        default_branch: str,
        setup_command: str,
        setup_timeout: float,
        context_paths: Sequence[str],
        deps: RuntimeAdapterDeps,
        hooks: Mapping[str, tuple[str, float]] | None = None,
        assembled: tuple[str, AgentSpec] | None = None,
    ) -> None:
        """``assembled``: the prompt and agent definition to run with, assembled elsewhere (a
        remote run's head; the node reads no provider); None: assembled here, per run."""
        self.repo_root = repo_root
        self.assembled = assembled
        self.context_paths = tuple(context_paths)
        self.deps = deps
        self.worktrees = WorktreeManager(
            repo_root, default_branch, setup_command or None, setup_timeout, hooks=hooks
        )
        self._after_run_done: set[Path] = set()  # worktrees whose after_run hook has run

    async def provision(self, params: AgentStartParams) -> Provisioned:
        worktree: Worktree | None = None
        try:
            if isinstance(params, ImplementorStartParams):
                worktree = await self._create_worktree(params.branch_name)
                await self._hook(worktree, "before_run", required=True)
            prompt = await anyio.to_thread.run_sync(self.prompt, params)
            spec = await anyio.to_thread.run_sync(self.spec, params.role)
        except BaseException:
            await self.release(worktree)
            raise
        return Provisioned(worktree, prompt, spec)

    async def _create_worktree(self, branch: str) -> Worktree:
        """The run's worktree. A cancel (Ctrl-C, a timeout) while the setup command runs stops
        it at once: its group is killed and the worktree removed before the cancel goes on."""
        cancel, started, done = threading.Event(), threading.Event(), threading.Event()

        def create() -> Worktree:
            started.set()
            try:
                if cancel.is_set():  # cancelled while this waited for a worker thread
                    raise WorktreeError(f"the worktree of {branch} was cancelled before it began")
                return self.worktrees.create(branch, cancel=cancel)
            finally:
                done.set()

        try:
            return await anyio.to_thread.run_sync(create, abandon_on_cancel=True)
        except BaseException:
            cancel.set()
            # A cancel that came before the thread began (a stop during the engine's start)
            # leaves nothing to wait for: create, if it runs at all, sees the cancel and stops.
            if started.is_set():
                with anyio.CancelScope(shield=True):  # the setup's group killed, the tree gone
                    await anyio.to_thread.run_sync(done.wait, _CLEANUP_WAIT)
            raise

    async def release(self, worktree: Worktree | None) -> None:
        if worktree is not None:
            with anyio.CancelScope(shield=True):
                await self._after_run(worktree)
                await anyio.to_thread.run_sync(self.worktrees.remove, worktree)
                self._after_run_done.discard(worktree.path)

    async def _hook(self, worktree: Worktree, name: str, *, required: bool) -> None:
        run = partial(self.worktrees.run_hook, worktree, name, required=required)
        await anyio.to_thread.run_sync(run)

    async def _after_run(self, worktree: Worktree) -> None:
        """The after_run hook, once per run, whatever its ending (before the patch is taken
        when it completed: a formatter's changes are part of it)."""
        if worktree.path not in self._after_run_done:
            self._after_run_done.add(worktree.path)
            await self._hook(worktree, "after_run", required=False)

    async def result(
        self, role: AgentRole, structured_output: object, worktree: Worktree | None
    ) -> AgentResult:
        """The run's result from the agent's structured output: validated against the role's
        model; an implementor's ``completed`` gets the worktree's patch, and no changes are a
        failure. Raises ``AgentFailure``."""
        try:
            output = validate_output(role, structured_output)
        except InvalidAgentOutputError as exc:
            raise AgentFailure("failed", str(exc)) from exc
        if not isinstance(output, ImplementorOutput):
            return output
        patch = None
        if output.outcome == "completed":
            assert worktree is not None
            await self._after_run(worktree)
            try:
                patch = await anyio.to_thread.run_sync(
                    extract_patch, worktree.path, self.worktrees.default_branch
                )
                base = await anyio.to_thread.run_sync(
                    fork_point, worktree.path, self.worktrees.default_branch
                )
            except PatchError as exc:
                raise AgentFailure("failed", f"cannot extract the patch: {exc}") from exc
            if not patch:
                raise AgentFailure("failed", "outcome completed, but the worktree has no changes")
            return ImplementorResult(
                outcome=output.outcome, summary=output.summary, patch=patch, base_sha=base
            )
        return ImplementorResult(outcome=output.outcome, summary=output.summary, patch=patch)

    def reap_worktrees(self, keep_branches: frozenset[str]) -> None:
        """Startup: remove the worktrees and branches a crashed run left, but ``keep_branches``
        (those of open revisions)."""
        report = self.worktrees.reap(keep=keep_branches)
        if report.removed_worktrees or report.deleted_branches:
            log.info(
                "removed leftovers of an earlier run",
                worktrees=[str(p) for p in report.removed_worktrees],
                branches=list(report.deleted_branches),
            )

    def spec(self, role: AgentRole) -> AgentSpec:
        """The role's agent definition, the project context appended."""
        if self.assembled is not None:
            return self.assembled[1]
        return load_agent_definition(self.repo_root, role, self.context_paths)

    def prompt(self, params: AgentStartParams) -> str:
        if self.assembled is not None:
            return self.assembled[0]

        def read_blob(sha: str) -> str:
            return run_git(self.repo_root, "cat-file", "blob", sha, strip=False)

        return assemble_prompt(params, self.deps, repo_root=self.repo_root, read_blob=read_blob)
