"""The embedded local provider: its composition, lifecycle and the ``ProviderInterfaces`` it
gives an engine.

Each port is a separate object (``work_item_reader``, ``work_item_writer``, ``revision_reader``,
``revision_writer``) so the composition root can hand readers to pollers and writers to the
executor, and no component ever holds both for one entity (S002-15). They share one database and
one repository through ``RevisionStore``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from adapters.providers import ProviderRoles
from adapters.providers.git import DEFAULT_IDENTITY, GitRepo, detect_default_branch
from adapters.providers.lifecycle import ProviderBase
from adapters.providers.local.db import Database
from adapters.providers.local.revisions import LocalRevisionReader, LocalRevisionWriter
from adapters.providers.local.store import RevisionStore
from adapters.providers.local.work_items import LocalWorkItemReader, LocalWorkItemWriter
from domain.ports import ProviderInterfaces, SpecProviderReader

# The pipeline (psutil, anyio) is imported where it is used: the tracker's reads (cpe status,
# cpe work list) do not need it. The spec reader (PyYAML) is the caller's to build.
if TYPE_CHECKING:
    from adapters.providers.local.pipeline import LocalPipeline
    from adapters.providers.local.pipeline_runner import PipelineRunner

DATABASE_NAME = "local-tracker.sqlite3"


class LocalProvider(ProviderBase):
    """Work items, revisions, reviews and a local pipeline for the repository at ``repo_root``.

    State lives in ``state_dir`` (the tracker database, pipeline logs). ``default_branch`` is
    detected when None (``detect_default_branch``). With a ``pipeline``, a background thread runs
    it on every new revision head until ``close()``; without one, pipelines report ``none``.

    ``roles``: with the work items only (the tracker, revisions on another forge) no revision
    store and no pipeline thread are made, the repository is not read, and the revision ports
    are None. With the revisions only (the forge of another system's tracker: Linear, Jira) the
    work item ports are None and the local work items are never read: a revision keeps its
    item's key as that system names it (``PROJ-12``), and its text names the item by that key.
    """

    def __init__(
        self,
        repo_root: Path | str,
        state_dir: Path | str,
        default_branch: str | None = None,
        pipeline: LocalPipeline | None = None,
        *,
        identity: tuple[str, str] = DEFAULT_IDENTITY,
        baseline: bool = False,
        roles: ProviderRoles = ProviderRoles(),
    ) -> None:
        self.roles = roles
        state = Path(state_dir)
        self.repo_root = Path(repo_root)
        self.default_branch = default_branch or ""
        self._db = Database(state / DATABASE_NAME)
        self.work_item_reader: LocalWorkItemReader | None = None
        self.work_item_writer: LocalWorkItemWriter | None = None
        if roles.work_items:
            self.work_item_reader = LocalWorkItemReader(self._db)
            self.work_item_writer = LocalWorkItemWriter(self._db)
        self.revision_reader: LocalRevisionReader | None = None
        self.revision_writer: LocalRevisionWriter | None = None
        self._runner: PipelineRunner | None = None
        if not roles.revisions:
            return
        try:
            repo = GitRepo(Path(repo_root), identity)
            branch = default_branch or detect_default_branch(repo)
            repo.branch_head(branch)  # fail at start, not at the first revision
        except BaseException:
            self._db.close()
            raise
        self.repo_root = repo.root
        self.default_branch = branch
        self._store = RevisionStore(
            self._db,
            repo,
            branch,
            pipeline_configured=pipeline is not None,
            pipeline_name=pipeline.name if pipeline is not None else "pipeline",
            baseline_enabled=baseline and pipeline is not None,
            foreign_tracker=roles.foreign_tracker,
        )
        self.revision_reader = LocalRevisionReader(self._store)
        self.revision_writer = LocalRevisionWriter(self._store)
        if pipeline is not None:
            from adapters.providers.local.pipeline_runner import PipelineRunner  # noqa: PLC0415

            self._runner = PipelineRunner(self._store, pipeline, state / "pipeline-logs")
            self._store.on_new_head = self._runner.notify
            self._runner.start()

    def wait_for_pipelines(self, timeout: float) -> bool:
        """Block until no pipeline run is queued or running; False on timeout. For tests and
        ``cpe demo``; the engine itself only polls."""
        return True if self._runner is None else self._runner.wait_idle(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the pipeline thread (cancelling a run in progress) and close the database."""
        if self._runner is not None:
            self._runner.stop(timeout)
        self._db.close()


def create_local_provider(
    repo_root: Path | str,
    state_dir: Path | str,
    specs: SpecProviderReader,
    *,
    default_branch: str | None = None,
    pipeline: LocalPipeline | None = None,
    baseline: bool = False,
) -> tuple[LocalProvider, ProviderInterfaces]:
    """The local provider and the five interfaces an engine takes, ``specs`` the spec reader (a
    ``GitSpecReader`` of the same repository, built by the caller as for the GitHub provider).
    Keep the provider to ``close()`` it at shutdown. ``baseline``: run the pipeline on the
    default branch's head too, for revisions' failures to be compared with."""
    provider = LocalProvider(repo_root, state_dir, default_branch, pipeline, baseline=baseline)
    interfaces = provider.interfaces(specs)
    assert interfaces is not None  # it serves both roles
    return provider, interfaces
