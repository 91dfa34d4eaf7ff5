"""The GitHub provider: its composition, lifecycle and the ``ProviderInterfaces`` it gives.

One ``GitHubApi`` (one githubkit client over one connection pool) is shared by four port
objects; the two indexes it feeds are shared too, so what a writer makes is what the next read
sees, while no component is handed both the reader and the writer of one entity.

A provider may serve one role (``ProviderRoles``): the work items only (its issues; the
engine links an item to its revision from the forge's revisions, so no pull request is read
for it), or the revisions only, for a tracker kept in another system (no status label is made,
no issue is read, and a pull request names its work item with a marker, never "Closes #N").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from adapters.providers import ProviderRoles
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.issue_index import IssueIndex
from adapters.providers.github.labels import Labels
from adapters.providers.github.pacing import WritePacer
from adapters.providers.github.pipeline import PipelineReader
from adapters.providers.github.pull_index import PullIndex
from adapters.providers.github.revisions import GitHubRevisionReader, GitHubRevisionWriter
from adapters.providers.github.settings import GitHubSettings
from adapters.providers.github.transport import ConditionalTransport, TransportStats
from adapters.providers.github.trust import Trust
from adapters.providers.github.work_items import GitHubWorkItemReader, GitHubWorkItemWriter
from adapters.providers.lifecycle import ProviderBase
from domain.errors import ConfigError, ProviderError
from domain.ports import ProviderInterfaces, SpecProviderReader

log = logging.getLogger(__name__)


class GitHubProvider(ProviderBase):
    """Work items and revisions in one GitHub repository. ``close()`` it at shutdown.

    ``environ`` is where the token (or App key) variable is read (default ``os.environ``);
    ``sleep``, ``clock`` and ``inner_transport`` are seams for tests. ``state_dir``: where
    the text of issues admitted by label is kept (``Trust``); none, in memory only.
    ``roles``: what it serves (both by default); the ports of the other role are None.
    """

    def __init__(
        self,
        settings: GitHubSettings,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        inner_transport: httpx.BaseTransport | None = None,
        state_dir: Path | None = None,
        roles: ProviderRoles = ProviderRoles(),
    ) -> None:
        self.roles = roles
        transport = ConditionalTransport(
            inner_transport,
            read_attempts=settings.read_attempts,
            max_retry_wait=settings.max_retry_wait,
            backoff_initial=settings.backoff_initial,
            cache_entries=settings.cache_entries,
            secondary_wait=settings.secondary_limit_wait,
            sleep=sleep,
            clock=clock,
            pacer=WritePacer(
                per_minute=settings.writes_per_minute,
                per_hour=settings.writes_per_hour,
                burst=settings.write_burst,
                clock=clock,
            ),
        )
        self.api = GitHubApi(settings, transport, environ)
        try:
            self.default_branch = settings.default_branch or self.api.default_branch()
        except BaseException:
            self.api.close()
            raise
        self.trust = Trust(self.api, settings, state_dir)
        self.labels: Labels | None = None
        self.work_item_reader: GitHubWorkItemReader | None = None
        self.work_item_writer: GitHubWorkItemWriter | None = None
        self.revision_reader: GitHubRevisionReader | None = None
        self.revision_writer: GitHubRevisionWriter | None = None
        issues = IssueIndex(self.api, settings.full_resync_cycles) if roles.work_items else None
        pulls = None
        if roles.revisions:
            pipelines = PipelineReader(self.api)
            # A foreign tracker's item 3 is no issue #3 here: "Closes #3" links nothing.
            pulls = PullIndex(
                self.api, settings, pipelines, self.trust, closing=not roles.foreign_tracker
            )
            self.revision_reader = GitHubRevisionReader(
                self.api, pulls, self.default_branch, pipelines, self.trust
            )
            self.revision_writer = GitHubRevisionWriter(
                self.api, pulls, issues, self.default_branch
            )
        if issues is not None:
            self.labels = Labels(self.api, settings.admit_label)
            self._check_labels(self.labels)
            self.work_item_reader = GitHubWorkItemReader(issues, pulls, self.trust)
            self.work_item_writer = GitHubWorkItemWriter(self.api, issues, self.labels, self.trust)

    def _check_labels(self, labels: Labels) -> None:
        """The status labels, made sure of at start: a token that may not create missing ones
        stops cpe here (``ConfigError``). Any other failure (GitHub unreachable, a refused
        token) is left to the first status change, which checks again, and to the polls."""
        try:
            labels.ensure_status_labels()
        except ConfigError:
            self.api.close()
            raise
        except ProviderError as exc:
            log.warning("the status labels could not be checked at start: %s", exc)

    @property
    def stats(self) -> TransportStats:
        """Requests made, answered 304 and retried so far, and the last rate-limit figures."""
        return self.api.transport.stats

    def close(self) -> None:
        self.api.close()


def create_github_provider(
    settings: GitHubSettings | Mapping[str, Any],
    spec_reader: SpecProviderReader,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path | None = None,
    roles: ProviderRoles = ProviderRoles(),
) -> tuple[GitHubProvider, ProviderInterfaces | None]:
    """The provider and the five interfaces an engine takes (None when it serves one role:
    take its ports); specs come from ``spec_reader`` (the repository's checkout: specs are
    read from git, not through the API). Keep the provider to ``close()`` it at shutdown, as
    with ``create_local_provider``."""
    if not isinstance(settings, GitHubSettings):
        settings = GitHubSettings.model_validate(dict(settings))
    provider = GitHubProvider(settings, environ=environ, state_dir=state_dir, roles=roles)
    return provider, provider.interfaces(spec_reader)
