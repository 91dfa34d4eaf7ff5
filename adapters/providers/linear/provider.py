"""The Linear provider: its start-up checks, composition and lifecycle (a tracker only).

At start, one line each, before any work: the token (``viewer``: a refused token is a
``ConfigError`` naming ``token_env``, never the token), the team (by key), the project (by
name or id), the status mapping (every cpe status a workflow state of the team), and the admit
label (created in the team when missing). A start costs three requests, plus one for a project
and one for a missing admit label; the first poll lists the open issues.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adapters.providers import ProviderRoles
from adapters.providers.admission import has_label
from adapters.providers.lifecycle import ProviderBase
from adapters.providers.linear.api import LinearApi
from adapters.providers.linear.issue_index import IssueIndex, IssueView
from adapters.providers.linear.settings import LinearSettings
from adapters.providers.linear.transport import Json, LinearTransport, TransportStats
from adapters.providers.linear.trust import Trust
from adapters.providers.linear.work_items import LinearWorkItemReader, LinearWorkItemWriter
from adapters.providers.linear.workflow import Labels, Workflow
from adapters.providers.pacing import WritePacer
from domain.errors import ConfigError, ProviderError
from domain.ports import (
    ProviderInterfaces,
    RevisionProviderReader,
    RevisionProviderWriter,
    SpecProviderReader,
)

log = logging.getLogger(__name__)

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
KEY_PATH = "provider.linear"


class LinearProvider(ProviderBase):
    """Work items in one Linear team. ``close()`` it at shutdown.

    ``environ`` is where the token variable is read (default ``os.environ``); ``sleep`` and
    ``clock`` are seams for tests. ``state_dir``: where the text of issues admitted by label is
    kept; none, in memory only.
    """

    revision_reader: RevisionProviderReader | None = None
    revision_writer: RevisionProviderWriter | None = None

    def __init__(
        self,
        settings: LinearSettings,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        state_dir: Path | None = None,
        roles: ProviderRoles | None = None,
    ) -> None:
        roles = roles if roles is not None else ProviderRoles(revisions=False)
        if roles.revisions:
            raise ConfigError(
                "Linear keeps work items only; choose github, gitlab or local for revisions",
                key_path="provider",
            )
        self.settings = settings
        token = (environ if environ is not None else os.environ).get(settings.token_env, "")
        if not token.strip():
            raise ConfigError(
                f"the environment variable {settings.token_env} holds no Linear token",
                key_path=f"{KEY_PATH}.token_env",
                expected="a personal API key (lin_api_...) or an OAuth access token in it",
            )
        token = token.strip()
        self._sent_as = (
            "as an OAuth access token (Bearer)"
            if settings.auth_kind(token) == "oauth"
            else "as a personal API key"
        ) + (f", auth = {settings.auth!r}" if settings.auth is not None else ", by its prefix")
        self.transport = LinearTransport(
            settings.api_url,
            token,
            oauth=settings.auth_kind(token) == "oauth",
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
        )
        self.api = LinearApi(self.transport)
        try:
            self._start(settings, state_dir)
        except BaseException:
            self.api.close()
            raise

    def _start(self, settings: LinearSettings, state_dir: Path | None) -> None:
        viewer = self._viewer(settings)
        team = self.api.team(settings.team)
        if team is None:
            keys = self.api.team_keys()
            raise ConfigError(
                f"{self.transport.where} shows no team {settings.team}: it does not exist, or "
                "the token's user is not in it; the teams it shows: "
                + (", ".join(keys) if keys else "none"),
                key_path=f"{KEY_PATH}.team",
                expected="the team's key, as in its issues' identifiers (ENG for ENG-12)",
            )
        self.team_id = str(team["id"])
        states = list((team.get("states") or {}).get("nodes") or [])
        self.workflow = Workflow(settings, states)
        self.labels = Labels(self.api, self.team_id, (team.get("labels") or {}).get("nodes") or [])
        self.trust = Trust(
            self.api,
            settings,
            self.team_id,
            (str(viewer["id"]), str(viewer.get("email") or "")),
            state_dir,
        )
        scope, in_scope, fields = self._scope(settings)
        self.issues = IssueIndex(
            self.api,
            scope=scope,
            in_scope=in_scope,
            create_fields=fields,
            scope_labels=(settings.label,) if settings.label else (),
            label_names=self.labels.names_of,
            page_size=settings.page_size,
            full_resync_cycles=settings.full_resync_cycles,
        )
        self._admit_label(settings)
        self.work_item_reader = LinearWorkItemReader(
            self.issues, self.workflow, self.labels, self.trust, settings.team
        )
        self.work_item_writer = LinearWorkItemWriter(
            self.api,
            self.issues,
            team=(self.team_id, settings.team),
            workflow=self.workflow,
            labels=self.labels,
            trust=self.trust,
        )

    def _viewer(self, settings: LinearSettings) -> Json:
        try:
            return self.api.viewer()
        except ProviderError as exc:
            if exc.status not in (401, 403):
                raise
            raise ConfigError(
                f"{self.transport.where} refused the token in {settings.token_env} ({exc.status}), "
                f"sent {self._sent_as}",
                key_path=f"{KEY_PATH}.token_env",
                expected="a valid personal API key (sent as it is) or OAuth access token (sent "
                "as Bearer; auth = 'oauth' when it lacks the lin_oauth_ prefix) with read and "
                "write access to the team",
            ) from None

    def _scope(
        self, settings: LinearSettings
    ) -> tuple[dict[str, Any], Callable[[IssueView], bool], dict[str, Any]]:
        scope: dict[str, Any] = {"team": {"id": {"eq": self.team_id}}}
        fields: dict[str, Any] = {}
        project_id: str | None = None
        if settings.project is not None:
            project_id = self._project(settings.project)
            scope["project"] = {"id": {"eq": project_id}}
            fields["projectId"] = project_id
        if settings.label is not None:
            scope["labels"] = {"some": {"name": {"eqIgnoreCase": settings.label}}}
        label = settings.label

        def in_scope(view: IssueView) -> bool:
            if view.team_id != self.team_id:
                return False
            if project_id is not None and (view.project is None or view.project[0] != project_id):
                return False
            return label is None or has_label(view.label_names, label)

        return scope, in_scope, fields

    def _project(self, project: str) -> str:
        if _UUID.match(project):
            return project
        found = self.api.projects(project)
        if len(found) != 1:
            raise ConfigError(
                f"{self.transport.where} shows {'no' if not found else 'more than one'} "
                f"project named {project!r}",
                key_path=f"{KEY_PATH}.project",
                expected="a project's name as Linear shows it, or its id",
            )
        return str(found[0]["id"])

    def _admit_label(self, settings: LinearSettings) -> None:
        """The admit label, made in the team when missing, so people can add it; a token that
        may not make labels only says so (trusted people can make it)."""
        if not settings.admit_label:
            return
        try:
            self.labels.ids([settings.admit_label], settings.admit_label)
        except ProviderError as exc:
            if exc.transient:
                raise
            log.warning("the label %s could not be made: %s", settings.admit_label, exc)

    @property
    def stats(self) -> TransportStats:
        """Requests made and retried so far, and the last rate-limit figures."""
        return self.transport.stats

    def close(self) -> None:
        self.api.close()


def create_linear_provider(
    settings: LinearSettings | Mapping[str, Any],
    spec_reader: SpecProviderReader,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path | None = None,
    roles: ProviderRoles | None = None,
) -> tuple[LinearProvider, ProviderInterfaces | None]:
    """The provider, and None for the engine's interfaces: Linear serves work items only, so
    the composition root takes its ports and another provider's revisions."""
    if not isinstance(settings, LinearSettings):
        settings = LinearSettings.model_validate(dict(settings))
    provider = LinearProvider(settings, environ=environ, state_dir=state_dir, roles=roles)
    return provider, provider.interfaces(spec_reader)
