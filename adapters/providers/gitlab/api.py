"""``GitLabApi``: the provider's only door to GitLab — one python-gitlab client over our own
session (transport.py), translated errors, pages with ETags, and the calls the tracker makes.

The client is python-gitlab's ``Gitlab`` with its own retries off (``GitLabClient``): it would
otherwise sleep through a 429 in the calling thread, writes included. ``project`` is the
python-gitlab ``Project`` (its managers serve the forge: merge requests, commits, pipelines);
plain REST calls (``get``, ``page``, ``all_pages``, ``post``, ``put``) return GitLab's JSON as
it came, with every failure a ``domain.errors`` type.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import gitlab
import requests
from gitlab.v4.objects import Project

from adapters.providers.gitlab.errors import translated
from adapters.providers.gitlab.settings import GitLabSettings
from adapters.providers.gitlab.transport import NOT_MODIFIED, GitLabAdapter, session_for
from domain.errors import ConfigError, NotFoundError, ProviderError

PER_PAGE = 100
Json = dict[str, Any]


def resolve_token(settings: GitLabSettings, environ: Mapping[str, str] | None = None) -> str:
    """The token from the variable ``token_env`` names; never quoted in any message."""
    env = os.environ if environ is None else environ
    token = (env.get(settings.token_env) or "").strip()
    if not token:
        raise ConfigError(
            f"environment variable {settings.token_env} is not set",
            key_path="provider.gitlab.token_env",
            expected="the name of a variable that holds a GitLab personal, project or group "
            "access token",
        )
    return token


class GitLabClient(gitlab.Gitlab):
    """python-gitlab's client, never retrying on its own: the transport retries reads and
    waits out rate limits; a write is sent once."""

    def http_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.update(obey_rate_limit=False, retry_transient_errors=False, max_retries=0)
        return super().http_request(*args, **kwargs)


@dataclass(frozen=True)
class Page:
    """One page of a list. ``items`` is None when its ETag is the one the caller already
    applied (nothing to parse); ``not_modified``: GitLab answered 304."""

    items: list[Any] | None
    etag: str | None
    not_modified: bool
    next_page: int | None

    @property
    def has_next(self) -> bool:
        return self.next_page is not None


def _next_page(response: requests.Response, page: int) -> int | None:
    told = (response.headers.get("x-next-page") or "").strip()
    if told.isdigit():
        return int(told)
    if "x-next-page" in response.headers:  # present and empty: the last page
        return None
    return page + 1 if 'rel="next"' in response.headers.get("link", "") else None


class GitLabApi:
    def __init__(
        self,
        settings: GitLabSettings,
        adapter: GitLabAdapter,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.adapter = adapter
        self._token = resolve_token(settings, environ)
        self.session = session_for(settings.base_url, adapter)
        self.gl = GitLabClient(
            settings.base_url,
            private_token=self._token,
            session=self.session,
            timeout=settings.request_timeout,
            retry_transient_errors=False,
            keep_base_url=True,
            user_agent="control-plane-engine",
        )
        # The project by its path until it is read (``load``); then by its numeric id.
        self.project: Project = self.gl.projects.get(settings.project, lazy=True)
        self.project_id: int | None = None
        self._path_id = quote(settings.project, safe="")
        self._lock = threading.Lock()
        self._user: tuple[int, str] | None = None

    def close(self) -> None:
        self.session.close()

    @property
    def token_kind(self) -> str:
        """What kind of credential this is, in words (GitLab's token prefixes say it)."""
        for prefix, kind in (("glpat-", "personal, project or group access token"),):
            if self._token.startswith(prefix):
                return kind
        return "token"

    @contextmanager
    def translated(self, what: str) -> Iterator[None]:
        with translated(what, retry_after=self.adapter.last_retry_after, secrets=[self._token]):
            yield

    # ------------------------------------------------------------------ the project

    def load(self) -> Project:
        """Read the project (its id, default branch); done once, at start."""
        with self.translated(f"get project {self.settings.project}"):
            project = self.gl.projects.get(self.settings.project)
        self.project = project
        self.project_id = int(project.id)
        return project

    @property
    def pid(self) -> str:
        """The project as a path segment: its id once read, else its encoded path."""
        return str(self.project_id) if self.project_id is not None else self._path_id

    def default_branch(self) -> str:
        project = self.load() if self.project_id is None else self.project
        branch = getattr(project, "default_branch", None)
        if not branch:
            raise ProviderError(
                f"project {self.settings.project} has no default branch (an empty repository?)",
                transient=False,
            )
        return str(branch)

    def own_user(self) -> tuple[int, str]:
        """(id, username) of the token's own user (``GET /user``), asked once."""
        with self._lock:
            if self._user is None:
                with self.translated("read the token's user"):
                    found = self.gl.http_get("/user")
                if not isinstance(found, dict):
                    raise ProviderError("GitLab named no user for the token", transient=False)
                self._user = (int(found["id"]), str(found["username"]))
            return self._user

    # ------------------------------------------------------------------ plain REST calls

    def get(self, what: str, path: str, query: Mapping[str, Any] | None = None) -> Any:
        """GitLab's JSON for ``GET <api>/projects/<pid><path>`` (``path`` starting with ``/``;
        an absolute ``path`` starting with ``//`` is taken from the API root)."""
        with self.translated(what):
            return self.gl.http_get(self._url(path), query_data=dict(query or {}))

    def post(self, what: str, path: str, data: Mapping[str, Any]) -> Any:
        with self.translated(what):
            return self.gl.http_post(self._url(path), post_data=dict(data))

    def put(self, what: str, path: str, data: Mapping[str, Any]) -> Any:
        with self.translated(what):
            return self.gl.http_put(self._url(path), post_data=dict(data))

    def delete(self, what: str, path: str) -> None:
        with self.translated(what):
            self.gl.http_delete(self._url(path))

    def page(
        self,
        what: str,
        path: str,
        query: Mapping[str, Any],
        *,
        page: int = 1,
        known_etag: str | None = None,
    ) -> Page:
        with self.translated(what):
            response = self.gl.http_request(
                "get", self._url(path), query_data={**query, "per_page": PER_PAGE, "page": page}
            )
            etag = response.headers.get("etag")
            fresh = etag is None or etag != known_etag
            items = response.json() if fresh else None
        if items is not None and not isinstance(items, list):
            raise ProviderError(f"{what}: GitLab's answer was not a list", transient=False)
        return Page(
            items, etag, response.headers.get(NOT_MODIFIED) == "1", _next_page(response, page)
        )

    def all_pages(self, what: str, path: str, query: Mapping[str, Any] | None = None) -> list[Json]:
        found: list[Json] = []
        number: int | None = 1
        while number is not None:
            listed = self.page(what, path, query or {}, page=number)
            found += [item for item in listed.items or [] if isinstance(item, dict)]
            number = listed.next_page
        return found

    def _url(self, path: str) -> str:
        return path[1:] if path.startswith("//") else f"/projects/{self.pid}{path}"

    # ------------------------------------------------------------------ labels

    def labels(self) -> list[Json]:
        return self.all_pages("list labels", "/labels", {"include_ancestor_groups": "true"})

    def create_label(self, name: str, color: str, description: str) -> None:
        self.post(
            f"create label {name!r}",
            "/labels",
            {"name": name, "color": color, "description": description},
        )

    # ------------------------------------------------------------------ issues

    def issues_page(
        self,
        *,
        state: str,
        page: int,
        updated_after: str | None = None,
        known_etag: str | None = None,
    ) -> Page:
        query: dict[str, Any] = {"state": state, "order_by": "updated_at", "sort": "asc"}
        if updated_after is not None:
            query["updated_after"] = updated_after
        return self.page("list issues", "/issues", query, page=page, known_etag=known_etag)

    def get_issue(self, iid: int) -> Json:
        return dict(self.get(f"get issue #{iid}", f"/issues/{iid}"))

    def get_issue_of(self, project: str, iid: int) -> Json:
        """An issue of any project the token can read (a blocker in another project)."""
        where = f"//projects/{quote(project, safe='')}/issues/{iid}"
        return dict(self.get(f"get issue {project}#{iid}", where))

    def create_issue(self, title: str, description: str, labels: Sequence[str]) -> Json:
        data = {"title": title, "description": description, "labels": ",".join(labels)}
        return dict(self.post("create issue", "/issues", data))

    def update_issue(self, iid: int, **fields: Any) -> Json:
        """``PUT`` an issue: ``labels`` (a list: the issue's labels, all of them),
        ``state_event`` (``close``, ``reopen``), ``description``…"""
        data = dict(fields)
        if "labels" in data:
            data["labels"] = ",".join(data["labels"])
        return dict(self.put(f"update issue #{iid}", f"/issues/{iid}", data))

    def issue_links(self, iid: int) -> list[Json]:
        return self.all_pages(f"list the links of #{iid}", f"/issues/{iid}/links")

    def link_issue(
        self, iid: int, target_iid: int, link_type: str, *, project: str | None = None
    ) -> Json:
        """Link issue ``iid`` to ``target_iid`` (of ``project``, a path; None: this one)."""
        data = {
            "target_project_id": self.pid if project is None else project,
            "target_issue_iid": str(target_iid),
            "link_type": link_type,
        }
        return dict(self.post(f"link #{iid} to #{target_iid}", f"/issues/{iid}/links", data))

    def label_events(self, iid: int) -> list[Json]:
        return self.all_pages(
            f"read the label events of #{iid}", f"/issues/{iid}/resource_label_events"
        )

    def member_access(self, user_id: int) -> int:
        """The access level of user ``user_id`` on the project, inherited ones included
        (``/members/all/:user_id``); 0 when not a member."""
        try:
            found = self.get(f"read the access of user {user_id}", f"/members/all/{user_id}")
        except NotFoundError:
            return 0
        if not isinstance(found, dict):
            return 0
        # A blocked or deactivated user, or an invitation not accepted, has no say.
        if found.get("state", "active") != "active":
            return 0
        if found.get("membership_state", "active") != "active":
            return 0
        return int(found.get("access_level") or 0)
