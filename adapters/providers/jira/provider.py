"""The Jira provider: its composition, its checks at start, and the ports it gives.

Jira keeps work items only: revisions go to GitHub, GitLab or the local forge (a ``roles``
asking for revisions is a configuration error). At start, in this order, each failure one clear
line: the token (``/myself``: a token Jira refuses is found here, not at the first write), the
project and its issue type, the link type of blockers, the JQL (one search of one issue), and
the status mapping (``statuses.StatusMap``). That is five requests.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adapters.providers import ProviderRoles
from adapters.providers.jira.api import JiraApi, Json, authorization, person_id, resolve_token
from adapters.providers.jira.issue_index import IssueIndex, split_jql, zone_of
from adapters.providers.jira.settings import JiraSettings
from adapters.providers.jira.statuses import StatusMap
from adapters.providers.jira.transport import JiraTransport, TransportStats
from adapters.providers.jira.trust import Trust
from adapters.providers.jira.work_items import JiraWorkItemReader, JiraWorkItemWriter
from adapters.providers.lifecycle import ProviderBase
from adapters.providers.pacing import WritePacer
from domain.errors import ConfigError, NotFoundError, ProviderError
from domain.ports import (
    RevisionProviderReader,
    RevisionProviderWriter,
    SpecProviderReader,
)

log = logging.getLogger(__name__)

REVISIONS_REFUSED = "Jira keeps work items only; choose github, gitlab or local for revisions"


class JiraProvider(ProviderBase):
    """Work items in one Jira project (Cloud or Data Center). ``close()`` it at shutdown.

    ``environ`` is where the token variable is read (default ``os.environ``); ``sleep`` and
    ``clock`` are seams for tests. ``state_dir``: where the text of issues admitted by label is
    kept; none, in memory only.
    """

    def __init__(
        self,
        settings: JiraSettings,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        state_dir: Path | None = None,
    ) -> None:
        self.settings = settings
        self.state_dir = state_dir
        token = resolve_token(settings, environ)
        transport = JiraTransport(
            settings.base_url,
            authorization(settings, token),
            timeout=settings.request_timeout,
            read_attempts=settings.read_attempts,
            max_retry_wait=settings.max_retry_wait,
            backoff_initial=settings.backoff_initial,
            sleep=sleep,
            clock=clock,
            pacer=WritePacer(
                per_minute=settings.writes_per_minute,
                per_hour=settings.writes_per_hour,
                burst=settings.write_burst,
                clock=clock,
            ),
            secrets=(token,),
        )
        self.api = JiraApi(settings, transport)
        self.revision_reader: RevisionProviderReader | None = None
        self.revision_writer: RevisionProviderWriter | None = None
        try:
            myself = _checked_token(self.api, settings)
            _check_project(self.api, settings)
            _check_link_type(self.api, settings)
            _check_jql(self.api, settings)
            self.statuses = StatusMap(settings, self.api.project_statuses())
            self.own = person_id(myself)
            self.trust = Trust(self.api, settings, self.own, state_dir)
            self.issues = IssueIndex(
                self.api,
                blocks_link=settings.blocks_link,
                zone=zone_of(myself),
                full_resync_cycles=settings.full_resync_cycles,
                page_size=settings.page_size,
            )
        except BaseException:
            self.api.close()
            raise
        _warn_of_broad_trust(settings)
        self.work_item_reader: JiraWorkItemReader = JiraWorkItemReader(
            self.issues, self.statuses, self.trust
        )
        self.work_item_writer: JiraWorkItemWriter = JiraWorkItemWriter(
            self.api,
            self.issues,
            statuses=self.statuses,
            trust=self.trust,
            issue_type=settings.issue_type,
            blocks_link=settings.blocks_link,
        )

    @property
    def stats(self) -> TransportStats:
        """Requests made and retried so far, and the last rate-limit figures."""
        return self.api.transport.stats

    def close(self) -> None:
        self.api.close()


# Permissions Jira's default schemes keep to a project's administrators; any other is usually
# granted to every logged-in user of the site (an application role).
NARROW_PERMISSIONS = frozenset({"ADMINISTER_PROJECTS"})


def _warn_of_broad_trust(settings: JiraSettings) -> None:
    """Trust by a permission that Jira's default schemes give every logged-in user would trust
    the whole site without a word: say so at each start. (Reading the project's scheme, ``GET
    /project/{key}/permissionscheme`` then ``/permissionscheme/{id}?expand=permissions``, would
    tell for sure; the fake Jira does not serve those yet.)"""
    permission = settings.trusted_permission
    if permission is None or permission in NARROW_PERMISSIONS:
        return
    log.warning(
        "Jira trust: every holder of %s on %s is trusted (trusted_permission), and Jira's "
        "default permission schemes give it to every logged-in user of the site: if yours does, "
        "anyone with Jira access there makes work for cpe. Check the project's permission "
        'scheme, or set trusted_permission = "ADMINISTER_PROJECTS" (or "") and name '
        "trusted_groups (docs/jira.md, Who is trusted)",
        permission,
        settings.project,
    )


def _where(settings: JiraSettings) -> str:
    return f"Jira at {settings.base_url}"


def _checked_token(api: JiraApi, settings: JiraSettings) -> Json:
    """cpe's own user: a token Jira refuses stops cpe here (``ConfigError``), naming the
    variable and never the token."""
    try:
        return api.myself()
    except ProviderError as exc:
        if exc.status is not None and 300 <= exc.status < 400:
            raise ConfigError(
                f"{_reason(exc)}",
                key_path="provider.jira.base_url",
                expected="the site's own address (where Jira answers, not one it redirects from)",
            ) from None
        if exc.status not in (401, 403):
            raise _named(exc, settings) from exc
        if settings.is_cloud:
            expected = (
                f"an API token of the Atlassian account {settings.email} (id.atlassian.com, "
                "Security, API tokens), sent with that e-mail"
            )
        else:
            expected = "a personal access token of a Jira user (Profile, Personal Access Tokens)"
        raise ConfigError(
            f"{_where(settings)} refused the token in {settings.token_env} ({exc.status} "
            f"{_reason(exc)})",
            key_path="provider.jira.token_env",
            expected=expected + "; revoked, expired and mistyped tokens are refused",
        ) from None


def _check_project(api: JiraApi, settings: JiraSettings) -> None:
    try:
        project = api.project()
    except NotFoundError:
        raise ConfigError(
            f"{_where(settings)} shows no project {settings.project}: it does not exist, or "
            "the token's user may not browse it",
            key_path="provider.jira.project",
            expected=f"a project's key, browsable with the token in {settings.token_env}",
        ) from None
    except ProviderError as exc:
        raise _named(exc, settings) from exc
    types = [
        str(t.get("name"))
        for t in project.get("issueTypes") or []
        if isinstance(t, dict) and t.get("name") and not t.get("subtask")
    ]
    if types and settings.issue_type.casefold() not in {t.casefold() for t in types}:
        raise ConfigError(
            f"project {settings.project} has no issue type {settings.issue_type!r}; its issue "
            f"types: {', '.join(types)}",
            key_path="provider.jira.issue_type",
            expected="one of the project's issue types, for the items the planner makes",
        )


def _check_link_type(api: JiraApi, settings: JiraSettings) -> None:
    try:
        types = api.link_types()
    except ProviderError as exc:
        raise _named(exc, settings) from exc
    names = [str(t.get("name")) for t in types if t.get("name")]
    if settings.blocks_link.casefold() not in {n.casefold() for n in names}:
        raise ConfigError(
            f"{_where(settings)} has no issue link type {settings.blocks_link!r}; its link "
            f"types: {', '.join(names) or 'none (is issue linking turned on?)'}",
            key_path="provider.jira.blocks_link",
            expected="the link type whose outward issue blocks its inward one",
        )


def _check_jql(api: JiraApi, settings: JiraSettings) -> None:
    where, _ = split_jql(settings.search_jql)
    try:
        api.search(settings.search_jql, None, 1)
    except ProviderError as exc:
        if exc.status != 400:
            raise _named(exc, settings) from exc
        raise ConfigError(
            f"{_where(settings)} refuses the JQL {where!r}: {_reason(exc)}",
            key_path="provider.jira.jql" if settings.jql is not None else "provider.jira.project",
            expected="a JQL query Jira accepts (cpe adds its own 'updated >=' bound with AND)",
        ) from None


def _reason(exc: ProviderError) -> str:
    """Jira's own words in a translated error (``read project P: <words> (status 404)``)."""
    text = re.sub(r" \(status \d+\)$", "", str(exc))
    return text.split(": ", 1)[1] if ": " in text else text


def _named(exc: ProviderError, settings: JiraSettings) -> ProviderError:
    """The error with the site's address (never the request's path or query)."""
    words = re.sub(r" [(]status [0-9]+[)]$", "", str(exc))
    return ProviderError(
        words if _where(settings) in words else f"{_where(settings)}: {words}",
        status=exc.status,
        transient=exc.transient,
        retry_after=exc.retry_after,
    )


def create_jira_provider(
    settings: JiraSettings | Mapping[str, Any],
    spec_reader: SpecProviderReader,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path | None = None,
    roles: ProviderRoles | None = None,
) -> tuple[JiraProvider, None]:
    """The provider (Jira keeps work items only: the composition root takes its
    ``work_item_reader`` and ``work_item_writer``). Keep it to ``close()`` it."""
    if not isinstance(settings, JiraSettings):
        settings = JiraSettings.model_validate(dict(settings))
    if roles is not None and roles.revisions:
        raise ConfigError(
            REVISIONS_REFUSED, key_path="provider.revisions", expected="github, gitlab or local"
        )
    return JiraProvider(settings, environ=environ, state_dir=state_dir), None
