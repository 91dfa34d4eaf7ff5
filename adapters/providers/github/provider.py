"""The GitHub provider: its composition, lifecycle and the ``ProviderInterfaces`` it gives.

One ``GitHubApi`` (one githubkit client over one connection pool) is shared by four port
objects; the two indexes it feeds are shared too, so what a writer makes is what the next read
sees, while no component is handed both the reader and the writer of one entity.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

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
from domain.errors import ConfigError, ProviderError
from domain.ports import ProviderInterfaces, SpecProviderReader

log = logging.getLogger(__name__)


class GitHubProvider:
    """Work items and revisions in one GitHub repository. ``close()`` it at shutdown.

    ``environ`` is where the token (or App key) variable is read (default ``os.environ``);
    ``sleep``, ``clock`` and ``inner_transport`` are seams for tests. ``state_dir``: where
    the text of issues admitted by label is kept (``Trust``); none, in memory only.
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
    ) -> None:
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
        self.labels = Labels(self.api, settings.admit_label)
        self._check_labels()
        self.trust = Trust(self.api, settings, state_dir)
        issues = IssueIndex(self.api, settings.full_resync_cycles)
        pipelines = PipelineReader(self.api)
        pulls = PullIndex(self.api, settings, pipelines, self.trust)
        self.work_item_reader = GitHubWorkItemReader(issues, pulls, self.trust)
        self.work_item_writer = GitHubWorkItemWriter(self.api, issues, self.labels, self.trust)
        self.revision_reader = GitHubRevisionReader(
            self.api, pulls, self.default_branch, pipelines, self.trust
        )
        self.revision_writer = GitHubRevisionWriter(self.api, pulls, issues, self.default_branch)

    def _check_labels(self) -> None:
        """The status labels, made sure of at start: a token that may not create missing ones
        stops cpe here (``ConfigError``). Any other failure (GitHub unreachable, a refused
        token) is left to the first status change, which checks again, and to the polls."""
        try:
            self.labels.ensure_status_labels()
        except ConfigError:
            self.api.close()
            raise
        except ProviderError as exc:
            log.warning("the status labels could not be checked at start: %s", exc)

    @property
    def stats(self) -> TransportStats:
        """Requests made, answered 304 and retried so far, and the last rate-limit figures."""
        return self.api.transport.stats

    def interfaces(self, spec_reader: SpecProviderReader) -> ProviderInterfaces:
        return ProviderInterfaces(
            work_item_reader=self.work_item_reader,
            work_item_writer=self.work_item_writer,
            revision_reader=self.revision_reader,
            revision_writer=self.revision_writer,
            spec_reader=spec_reader,
        )

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> GitHubProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def create_github_provider(
    settings: GitHubSettings | Mapping[str, Any],
    spec_reader: SpecProviderReader,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path | None = None,
) -> tuple[GitHubProvider, ProviderInterfaces]:
    """The provider and the five interfaces an engine takes; specs come from ``spec_reader``
    (the repository's checkout: specs are read from git, not through the API). Keep the
    provider to ``close()`` it at shutdown, as with ``create_local_provider``."""
    if not isinstance(settings, GitHubSettings):
        settings = GitHubSettings.model_validate(dict(settings))
    provider = GitHubProvider(settings, environ=environ, state_dir=state_dir)
    return provider, provider.interfaces(spec_reader)
