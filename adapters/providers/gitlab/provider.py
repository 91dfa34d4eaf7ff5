"""The GitLab provider: its composition, lifecycle and the ``ProviderInterfaces`` it gives.

One ``GitLabApi`` (one python-gitlab client over one session) is shared by the port objects of
the roles it serves (``ProviderRoles``): the tracker (issues) and the forge (merge requests). A
provider without the work items role makes no tracker object and writes nothing tracker-side at
start (no status labels); without the revisions role, no forge object.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adapters.providers import ProviderRoles
from adapters.providers.gitlab.api import GitLabApi
from adapters.providers.gitlab.errors import gitlab_reason
from adapters.providers.gitlab.forge import build_forge
from adapters.providers.gitlab.issue_index import IssueIndex
from adapters.providers.gitlab.labels import Labels, StatusLabels
from adapters.providers.gitlab.settings import GitLabSettings
from adapters.providers.gitlab.transport import GitLabAdapter, TransportStats
from adapters.providers.gitlab.trust import Trust
from adapters.providers.gitlab.work_items import (
    Blockers,
    GitLabWorkItemReader,
    GitLabWorkItemWriter,
    Linked,
)
from adapters.providers.lifecycle import ProviderBase
from adapters.providers.pacing import WritePacer
from domain.errors import ConfigError, NotFoundError, ProviderError
from domain.ports import (
    ProviderInterfaces,
    RevisionProviderReader,
    RevisionProviderWriter,
    SpecProviderReader,
    WorkProviderReader,
    WorkProviderWriter,
)

log = logging.getLogger(__name__)


class GitLabProvider(ProviderBase):
    """Work items and/or revisions in one GitLab project. ``close()`` it at shutdown.

    ``environ`` is where the token variable is read (default ``os.environ``); ``sleep`` and
    ``clock`` are seams for tests. ``state_dir``: where the text of issues admitted by label is
    kept; none, in memory only.
    """

    def __init__(
        self,
        settings: GitLabSettings,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        state_dir: Path | None = None,
        roles: ProviderRoles | None = None,
    ) -> None:
        self.settings = settings
        self.roles = roles if roles is not None else ProviderRoles()
        self.state_dir = state_dir
        self.adapter = GitLabAdapter(
            read_attempts=settings.read_attempts,
            max_retry_wait=settings.max_retry_wait,
            backoff_initial=settings.backoff_initial,
            cache_entries=settings.cache_entries,
            sleep=sleep,
            clock=clock,
            pacer=WritePacer(
                per_minute=settings.writes_per_minute,
                per_hour=settings.writes_per_hour,
                burst=settings.write_burst,
                clock=clock,
            ),
        )
        self.api = GitLabApi(settings, self.adapter, environ)
        self.work_item_reader: WorkProviderReader | None = None
        self.work_item_writer: WorkProviderWriter | None = None
        self.revision_reader: RevisionProviderReader | None = None
        self.revision_writer: RevisionProviderWriter | None = None
        self.linked: Linked | None = None
        """The open revisions by work item, when this provider serves both roles (its forge
        sets it); otherwise the engine links an item to the revision that names it."""
        try:
            # The project's id is needed either way (links name it): read once, at start.
            _load_project(self.api, settings)
            self.default_branch = settings.default_branch or self.api.default_branch()
            self.trust = Trust(self.api, settings, state_dir)
            if self.roles.work_items:
                self._build_tracker()
            if self.roles.revisions:
                forge = build_forge(
                    self.api,
                    settings,
                    self.default_branch,
                    self.trust,
                    closing=self.roles.both,
                    sleep=sleep,
                    clock=clock,
                )
                self.revision_reader, self.revision_writer = forge.reader, forge.writer
                if self.roles.both:
                    self.linked = forge.merge_requests.linked_revisions
        except BaseException:
            self.api.close()
            raise

    def _build_tracker(self) -> None:
        settings = self.settings
        self.statuses = StatusLabels(settings)
        self.labels = Labels(self.api, self.statuses, settings.admit_label)
        self._check_labels()
        self.blockers = Blockers(settings.blockers)
        self.issues = IssueIndex(
            self.api, settings.full_resync_cycles, links=lambda: self.blockers.links
        )
        self.work_item_reader = GitLabWorkItemReader(
            self.issues, self.statuses, self.trust, lambda: self.linked() if self.linked else {}
        )
        self.work_item_writer = GitLabWorkItemWriter(
            self.api,
            self.issues,
            labels=self.labels,
            statuses=self.statuses,
            trust=self.trust,
            blockers=self.blockers,
        )

    def _check_labels(self) -> None:
        """The status labels, made sure of at start: a token that may not create missing ones
        stops cpe here (``ConfigError``). Any other failure (GitLab unreachable) is left to the
        first status change, which checks again, and to the polls."""
        try:
            self.labels.ensure_status_labels()
        except ConfigError:
            raise
        except ProviderError as exc:
            log.warning("the status labels could not be checked at start: %s", exc)

    @property
    def stats(self) -> TransportStats:
        """Requests made, answered 304 and retried so far, and the last rate-limit figures."""
        return self.adapter.stats

    def close(self) -> None:
        self.api.close()


def _load_project(api: GitLabApi, settings: GitLabSettings) -> None:
    """The project read at start. A token GitLab refuses (401, 403) or a project it does not
    show (404) stops cpe here in one line (``ConfigError``: a restart would not fix it), naming
    the setting to look at and never the token; anything else (GitLab unreachable, a 5xx) is a
    ``ProviderError`` naming the instance (``cpe run`` exits 75 on a transient one)."""
    where = f"GitLab at {settings.base_url}"
    try:
        api.load()
    except NotFoundError:
        raise ConfigError(
            f"{where} shows no project {settings.project}: it does not exist, or the token's "
            "user may not see it",
            key_path="provider.gitlab.project",
            expected="the project's full path as in its URL (group/subgroup/name), readable "
            f"with the token in {settings.token_env}",
        ) from None
    except ProviderError as exc:
        if exc.status not in (401, 403):
            raise ProviderError(
                f"{where}: {_without_status(exc)}",
                status=exc.status,
                transient=exc.transient,
                retry_after=exc.retry_after,
            ) from exc
        raise ConfigError(
            f"{where} refused the token in {settings.token_env} ({exc.status} "
            f"{gitlab_reason(exc)})",
            key_path="provider.gitlab.token_env",
            expected="a valid personal, project or group access token with the api scope "
            "(revoked, expired and mistyped tokens are refused)",
        ) from None


def _without_status(exc: ProviderError) -> str:
    """The error's words without the ``(status N)`` its own message ends with."""
    return re.sub(r" \(status \d+\)$", "", str(exc))


def create_gitlab_provider(
    settings: GitLabSettings | Mapping[str, Any],
    spec_reader: SpecProviderReader,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path | None = None,
    roles: ProviderRoles | None = None,
) -> tuple[GitLabProvider, ProviderInterfaces | None]:
    """The provider, and the five interfaces an engine takes when it serves both roles (else
    None: the composition root takes its attributes). Keep the provider to ``close()`` it."""
    if not isinstance(settings, GitLabSettings):
        settings = GitLabSettings.model_validate(dict(settings))
    provider = GitLabProvider(settings, environ=environ, state_dir=state_dir, roles=roles)
    return provider, provider.interfaces(spec_reader)
