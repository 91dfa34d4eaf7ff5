"""The fake Jira's JQL search.

- Cloud: ``GET|POST /rest/api/3/search/jql``. Pages are chained by an opaque
  ``nextPageToken`` (absent on the last page, with ``isLast: true``); there is no ``total`` and
  no ``startAt`` (a POST body holding a key the operation does not take is a 400). ``fields``
  defaults to ``id``; ``maxResults`` defaults to 50 and is cut to 5,000 when only ``id``/``key``
  are asked for, to 100 otherwise (the answer carries no ``maxResults``: a client counts what
  it got). An unbounded query (no restriction, e.g. only ``ORDER BY``) is a 400. The old
  ``/rest/api/3/search`` answers ``410 Gone``: Atlassian removed it.
- Data Center: ``GET|POST /rest/api/2/search`` with ``startAt``, ``maxResults`` (default 50, at
  most 1,000: Data Center's ``jira.search.views.default.max``) and ``total``; ``fields``
  defaults to ``*navigable``.

Search is eventually consistent, as Jira says of it: while the fake's index lags
(``FakeJira.lag_search()``), what was created or changed since is matched as it was before
(a new issue not at all), unless its id is in ``reconcileIssues`` (Cloud, at most 50).

A query is read for the searching user (their time zone for dates); one naming the project
to someone who may not browse it is Jira's ``The value 'PROJ' does not exist for the field
'project'.``
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from tests.fakes.http import Reply
from tests.fakes.jira.jql import JqlError, parse
from tests.fakes.jira.payloads import wanted_fields
from tests.fakes.jira.records import IssueRecord
from tests.fakes.jira.server import REMOVED_SEARCH, Call, jira_error

if TYPE_CHECKING:
    from tests.fakes.jira.fake import FakeJira

UNBOUNDED = (
    "Unbounded JQL queries are not allowed here. Please add a search restriction to your query."
)
BAD_TOKEN = "The provided next page token is invalid or expired."
BAD_PAYLOAD = "Invalid request payload. Refer to the REST API documentation and try again."
JQL_KEYS = frozenset(
    {
        "jql",
        "nextPageToken",
        "maxResults",
        "fields",
        "expand",
        "properties",
        "fieldsByKeys",
        "failFast",
        "reconcileIssues",
    }
)
SEARCH_KEYS = frozenset(
    {
        "jql",
        "startAt",
        "maxResults",
        "fields",
        "expand",
        "properties",
        "fieldsByKeys",
        "validateQuery",
    }
)
ID_ONLY = frozenset({"id", "key"})
CLOUD_PAGE, CLOUD_ID_PAGE, DC_PAGE = 100, 5000, 1000
MAX_RECONCILE = 50


def register(jira: FakeJira) -> None:
    site = jira.site
    api = jira.api_prefix

    def arguments(call: Call, keys: frozenset[str]) -> dict[str, Any]:
        """The search's arguments from the query string (GET) or the JSON body (POST)."""
        if call.method == "GET":
            out: dict[str, Any] = {k: call.arg(k) for k in call.args if k != "fields"}
            out["fields"] = call.many("fields")
            out["reconcileIssues"] = call.many("reconcileIssues")
            return out
        body = call.body if isinstance(call.body, dict) else {}
        if set(body) - keys:
            raise jira_error(400, BAD_PAYLOAD)
        fields = body.get("fields") or []
        if isinstance(fields, str):
            fields = [fields]
        return {**body, "fields": fields}

    def reconciled(args: dict[str, Any]) -> frozenset[str]:
        raw = args.get("reconcileIssues") or []
        listed = raw if isinstance(raw, list) else str(raw).split(",")
        if len(listed) > MAX_RECONCILE:
            raise jira_error(400, f"reconcileIssues accepts at most {MAX_RECONCILE} issue ids.")
        return frozenset(str(number(n, "reconcileIssues", 0)) for n in listed if str(n).strip())

    def run(call: Call, jql: str, reconcile: frozenset[str] = frozenset()) -> list[IssueRecord]:
        browse = site.may(call.user, "BROWSE_PROJECTS")
        try:
            query = parse(jql, site, site.users[call.user].time_zone, browse)
        except JqlError as refused:
            raise jira_error(400, str(refused)) from None
        if call.api == "3" and query.where is None:
            raise jira_error(400, UNBOUNDED)
        return query.run(site, reconcile) if browse else []

    def number(value: Any, name: str, default: int) -> int:
        if value is None or value == "":
            return default
        try:
            return int(value)
        except (TypeError, ValueError):
            raise jira_error(400, f"The value '{value}' is not valid for '{name}'.") from None

    def search_jql(call: Call) -> Reply:
        args = arguments(call, JQL_KEYS)
        jql = str(args.get("jql") or "")
        fields = wanted_fields(args["fields"], "id")
        names = {n.strip() for item in args["fields"] for n in item.split(",")} or {"id"}
        cap = CLOUD_ID_PAGE if names <= ID_ONLY else CLOUD_PAGE
        limit = max(1, min(number(args.get("maxResults"), "maxResults", 50), cap))
        start = 0
        token = args.get("nextPageToken")
        if token:
            start = read_token(str(token), jql)
        found = run(call, jql, reconciled(args))
        chunk = found[start : start + limit]
        view = jira.view(call)
        expand = set(str(args.get("expand") or "").split(","))
        body: dict[str, Any] = {"issues": [view.issue(i, fields, expand) for i in chunk]}
        if start + limit < len(found):
            body["nextPageToken"] = make_token(jql, start + limit)
            body["isLast"] = False
        else:
            body["isLast"] = True
        return Reply(body=body)

    def search(call: Call) -> Reply:
        if site.deployment == "cloud":
            raise jira_error(410, REMOVED_SEARCH)
        args = arguments(call, SEARCH_KEYS)
        jql = str(args.get("jql") or "")
        fields = wanted_fields(args["fields"], "*navigable")
        limit = max(0, min(number(args.get("maxResults"), "maxResults", 50), DC_PAGE))
        start = max(0, number(args.get("startAt"), "startAt", 0))
        found = run(call, jql)
        view = jira.view(call)
        expand = set(str(args.get("expand") or "").split(","))
        return Reply(
            body={
                "expand": "schema,names",
                "startAt": start,
                "maxResults": limit,
                "total": len(found),
                "issues": [view.issue(i, fields, expand) for i in found[start : start + limit]],
            }
        )

    if site.deployment == "cloud":
        jira.route("GET", f"{api}/search/jql", search_jql, "searchAndReconsileIssuesUsingJql")
        jira.route("POST", f"{api}/search/jql", search_jql, "searchAndReconsileIssuesUsingJqlPost")
    jira.route("GET", f"{api}/search", search, "searchForIssuesUsingJql")
    jira.route("POST", f"{api}/search", search, "searchForIssuesUsingJqlPost")


def make_token(jql: str, at: int) -> str:
    raw = json.dumps({"jql": jql, "at": at}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_token(token: str, jql: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        raise jira_error(400, BAD_TOKEN) from None
    if not isinstance(data, dict) or data.get("jql") != jql or not isinstance(data.get("at"), int):
        raise jira_error(400, BAD_TOKEN)
    return int(data["at"])
