"""``JiraApi``: the calls the provider makes, in Jira Cloud's REST v3 or Data Center's v2.

Where the two differ:

- **Auth.** Cloud: HTTP Basic ``email:API token``; Data Center: ``Authorization: Bearer`` with
  a personal access token.
- **Search.** Cloud: ``POST /rest/api/3/search/jql`` paged by ``nextPageToken`` (the old
  ``/search`` is gone there); Data Center: ``POST /rest/api/2/search`` paged by ``startAt``
  against ``total``.
- **Text.** Cloud's descriptions and comments are ADF documents, Data Center's wiki-markup
  strings (``bodies.py`` turns both into Markdown and back).
- **People.** Cloud names a user by ``accountId``; Data Center by ``name`` (its username).
  ``person_id`` reads either. Groups: Cloud ``/user/groups``, Data Center ``/user?expand=groups``.
- **Changelog.** Cloud: ``/issue/{key}/changelog`` (paged); Data Center:
  ``/issue/{key}?expand=changelog``.

Every answer is Jira's JSON as it came; every failure a ``domain.errors`` type in Jira's words.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from adapters.providers.jira.settings import JiraSettings
from adapters.providers.jira.transport import JiraTransport
from domain.errors import ConfigError

Json = dict[str, Any]

# What a search asks of each issue: enough to make a work item and judge it.
FIELDS = (
    "summary",
    "description",
    "status",
    "labels",
    "issuelinks",
    "creator",
    "reporter",
    "updated",
    "issuetype",
)
CHANGELOG_PAGE = 100
COMMENT_PAGE = 100


def resolve_token(settings: JiraSettings, environ: Mapping[str, str] | None = None) -> str:
    """The token from the variable ``token_env`` names; never quoted in any message."""
    env = os.environ if environ is None else environ
    token = (env.get(settings.token_env) or "").strip()
    if not token:
        what = (
            "an API token of the account in email"
            if settings.is_cloud
            else ("a personal access token")
        )
        raise ConfigError(
            f"environment variable {settings.token_env} is not set",
            key_path="provider.jira.token_env",
            expected=f"the name of a variable that holds {what}",
        )
    return token


def authorization(settings: JiraSettings, token: str) -> str:
    """The ``Authorization`` header: Basic ``email:token`` on Cloud, Bearer on Data Center."""
    if settings.is_cloud:
        pair = f"{settings.email}:{token}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")
    return f"Bearer {token}"


def person_id(user: object) -> str | None:
    """A user as Jira names them for good: Cloud's ``accountId``, Data Center's ``name``."""
    if not isinstance(user, dict):
        return None
    for key in ("accountId", "name", "key"):
        value = user.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def person_name(user: object) -> str | None:
    """A user as a log line names them."""
    if not isinstance(user, dict):
        return None
    shown = user.get("displayName")
    return str(shown) if isinstance(shown, str) and shown else person_id(user)


class JiraApi:
    def __init__(self, settings: JiraSettings, transport: JiraTransport) -> None:
        self.settings = settings
        self.transport = transport
        self.cloud = settings.is_cloud
        self.prefix = f"/rest/api/{settings.api_version}"

    def close(self) -> None:
        self.transport.close()

    def _path(self, *parts: str) -> str:
        return self.prefix + "".join(f"/{quote(p, safe='')}" for p in parts)

    # ------------------------------------------------------------------ the site

    def myself(self) -> Json:
        return dict(self.transport.get(f"{self.prefix}/myself", "read cpe's own Jira user"))

    def project(self) -> Json:
        key = self.settings.project
        return dict(self.transport.get(self._path("project", key), f"read project {key}"))

    def project_statuses(self) -> list[Json]:
        """Per issue type, its statuses (``[{name, statuses: [{id, name, statusCategory}]}]``)."""
        key = self.settings.project
        found = self.transport.get(
            self._path("project", key, "statuses"), f"read the statuses of project {key}"
        )
        return [t for t in found or [] if isinstance(t, dict)]

    def link_types(self) -> list[Json]:
        found = self.transport.get(f"{self.prefix}/issueLinkType", "read the issue link types")
        types = found.get("issueLinkTypes") if isinstance(found, dict) else None
        return [t for t in types or [] if isinstance(t, dict)]

    # ------------------------------------------------------------------ searching

    def search(
        self, jql: str, page: str | int | None, size: int
    ) -> tuple[list[Json], str | int | None]:
        """One page of issues ``jql`` selects, and how to ask for the next (None: the last)."""
        what = "search issues"
        if self.cloud:
            body: Json = {"jql": jql, "maxResults": size, "fields": list(FIELDS)}
            if page is not None:
                body["nextPageToken"] = page
            found = self.transport.call(
                "POST", f"{self.prefix}/search/jql", what, json=body, read=True
            )
            issues = _issues(found)
            token = found.get("nextPageToken") if isinstance(found, dict) else None
            last = isinstance(found, dict) and found.get("isLast") is True
            return issues, (str(token) if token and not last else None)
        start = int(page or 0)
        body = {"jql": jql, "startAt": start, "maxResults": size, "fields": list(FIELDS)}
        found = self.transport.call("POST", f"{self.prefix}/search", what, json=body, read=True)
        issues = _issues(found)
        total = found.get("total") if isinstance(found, dict) else None
        after = start + len(issues)
        more = bool(issues) and isinstance(total, int) and after < total
        return issues, (after if more else None)

    def search_all(self, jql: str, size: int) -> Iterator[Json]:
        page: str | int | None = None
        while True:
            issues, page = self.search(jql, page, size)
            yield from issues
            if page is None or not issues:  # an empty page names no next one worth asking
                return

    # ------------------------------------------------------------------ issues

    def get_issue(self, key: str) -> Json:
        found = self.transport.get(
            self._path("issue", key), f"read issue {key}", {"fields": ",".join(FIELDS)}
        )
        return dict(found)

    def create_issue(self, fields: Json) -> Json:
        """``{"id", "key", "self"}`` of the issue made."""
        made = self.transport.call(
            "POST", f"{self.prefix}/issue", "create an issue", json={"fields": fields}
        )
        return dict(made or {})

    def update_issue(self, key: str, fields: Json) -> None:
        self.transport.call(
            "PUT", self._path("issue", key), f"edit issue {key}", json={"fields": fields}
        )

    def transitions(self, key: str) -> list[Json]:
        found = self.transport.get(
            self._path("issue", key, "transitions"), f"read the transitions of issue {key}"
        )
        listed = found.get("transitions") if isinstance(found, dict) else None
        return [t for t in listed or [] if isinstance(t, dict)]

    def transition(self, key: str, transition_id: str) -> None:
        self.transport.call(
            "POST",
            self._path("issue", key, "transitions"),
            f"transition issue {key}",
            json={"transition": {"id": transition_id}},
        )

    def link(self, link_type: str, blocker: str, blocked: str) -> None:
        """``blocker`` blocks ``blocked``. The request's ``inwardIssue`` is the link's source
        (Jira's behaviour, which the names belie: ``{"inwardIssue": A, "outwardIssue": B}``
        makes "A blocks B"; read back, B's ``issuelinks`` hold ``inwardIssue: A``)."""
        self.transport.call(
            "POST",
            f"{self.prefix}/issueLink",
            f"link {blocker} as blocking {blocked}",
            json={
                "type": {"name": link_type},
                "inwardIssue": {"key": blocker},
                "outwardIssue": {"key": blocked},
            },
        )

    # ------------------------------------------------------------------ comments

    def comments(self, key: str) -> list[Json]:
        found: list[Json] = []
        start = 0
        while True:
            page = self.transport.get(
                self._path("issue", key, "comment"),
                f"read the comments of issue {key}",
                {"startAt": start, "maxResults": COMMENT_PAGE},
            )
            listed = page.get("comments") if isinstance(page, dict) else None
            batch = [c for c in listed or [] if isinstance(c, dict)]
            found += batch
            total = page.get("total") if isinstance(page, dict) else None
            start += len(batch)
            if not batch or not isinstance(total, int) or start >= total:
                return found

    def add_comment(self, key: str, body: object) -> Json:
        made = self.transport.call(
            "POST",
            self._path("issue", key, "comment"),
            f"comment on issue {key}",
            json={"body": body},
        )
        return dict(made or {})

    # ------------------------------------------------------------------ trust

    def changelog(self, key: str) -> list[Json]:
        """The issue's change histories, oldest first (``[{id, author, created, items}]``)."""
        what = f"read the changelog of issue {key}"
        if not self.cloud:
            found = self.transport.get(
                self._path("issue", key), what, {"fields": "labels", "expand": "changelog"}
            )
            log = found.get("changelog") if isinstance(found, dict) else None
            histories = log.get("histories") if isinstance(log, dict) else None
            return [h for h in histories or [] if isinstance(h, dict)]
        found_all: list[Json] = []
        start = 0
        while True:
            page = self.transport.get(
                self._path("issue", key, "changelog"),
                what,
                {"startAt": start, "maxResults": CHANGELOG_PAGE},
            )
            values = page.get("values") if isinstance(page, dict) else None
            batch = [h for h in values or [] if isinstance(h, dict)]
            found_all += batch
            start += len(batch)
            total = page.get("total") if isinstance(page, dict) else None
            last = isinstance(page, dict) and page.get("isLast") is True
            if not batch or last or (isinstance(total, int) and start >= total):
                return found_all

    def has_permission(self, person: str, permission: str) -> bool:
        """Whether ``person`` holds the project ``permission`` (Jira lists the users that do:
        the person, or nobody)."""
        who = {"accountId": person} if self.cloud else {"username": person}
        found = self.transport.get(
            f"{self.prefix}/user/permission/search",
            f"read whether user {person} may {permission} in {self.settings.project}",
            {**who, "permissions": permission, "projectKey": self.settings.project},
        )
        return any(person_id(u) == person for u in found or [] if isinstance(u, dict))

    def groups_of(self, person: str) -> list[str]:
        what = f"read the groups of user {person}"
        if self.cloud:
            found = self.transport.get(f"{self.prefix}/user/groups", what, {"accountId": person})
            listed: Sequence[Any] = found or []
        else:
            user = self.transport.get(
                f"{self.prefix}/user", what, {"username": person, "expand": "groups"}
            )
            groups = user.get("groups") if isinstance(user, dict) else None
            listed = groups.get("items") or [] if isinstance(groups, dict) else []
        return [str(g["name"]) for g in listed if isinstance(g, dict) and g.get("name")]


def _issues(found: object) -> list[Json]:
    listed = found.get("issues") if isinstance(found, dict) else None
    return [i for i in listed or [] if isinstance(i, dict) and isinstance(i.get("key"), str)]
