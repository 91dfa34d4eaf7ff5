"""The fake Jira's issues: create, read, edit, transitions, comments, change history and links.

As Jira answers:

- An issue someone may not browse, or that does not exist, is ``404 {"errorMessages": ["Issue
  does not exist or you do not have permission to see it."]}``.
- Create and edit check each field: ``summary`` is required (at most 255 characters),
  ``description`` must be an ADF document on v3 and a string on v2, a label cannot hold a
  space, a field the fake does not set is ``Field 'x' cannot be set. It is not on the
  appropriate screen, or unknown.``; errors are ``{"errors": {field: message}}`` with a 400.
- An edit overriding screen security or the editable flag takes *Administer Jira* (403);
  ``notifyUsers=false`` from someone without it is ignored, as Jira ignores it.
- ``update`` takes Jira's verbs: ``labels`` ``add``/``remove``/``set``, ``summary``
  ``set``, ``issuelinks`` ``add`` (on create too), ``comment`` ``add`` (in a transition).
- A transition not available from the issue's status is ``400 Transition id 'N' is not valid
  for this issue.``
- ``POST /issueLink``: ``inwardIssue`` is the link's source and ``outwardIssue`` its
  destination: ``{"type": {"name": "Blocks"}, "inwardIssue": A, "outwardIssue": B}`` makes
  "A blocks B" (A's ``issuelinks`` then hold ``outwardIssue: B``, B's ``inwardIssue: A``).
  Linking needs *Link issues*: ``404 No Link Issue Permission for issue 'KEY'.`` otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.http import Reply
from tests.fakes.jira.payloads import wanted_fields
from tests.fakes.jira.records import IssueRecord
from tests.fakes.jira.richtext import NOT_ADF, NOT_STRING, is_adf
from tests.fakes.jira.server import Call, field_errors, jira_error

if TYPE_CHECKING:
    from tests.fakes.jira.fake import FakeJira

NO_ISSUE = "Issue does not exist or you do not have permission to see it."
SETTABLE = ("summary", "description", "labels", "project", "issuetype", "assignee")


def not_on_screen(name: str) -> str:
    return f"Field '{name}' cannot be set. It is not on the appropriate screen, or unknown."


def register(jira: FakeJira) -> None:
    site = jira.site
    api = jira.api_prefix

    def issue_of(call: Call, name: str = "issue") -> IssueRecord:
        found = site.issue(call.params[name])
        if found is None or not site.may(call.user, "BROWSE_PROJECTS"):
            raise jira_error(404, NO_ISSUE)
        return found

    def body_of(call: Call) -> dict[str, Any]:
        if not isinstance(call.body, dict):
            raise jira_error(400, "No content to map to Object due to end of input")
        return call.body

    def rich(call: Call, name: str, value: Any) -> Any:
        if value is None:
            return None
        if call.api == "3" and not is_adf(value):
            raise field_errors(**{name: NOT_ADF})
        if call.api == "2" and not isinstance(value, str):
            raise field_errors(**{name: NOT_STRING})
        return value

    def check_labels(labels: Any) -> list[str]:
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise field_errors(labels="The labels field must be a list of strings.")
        for label in labels:
            if not label.strip():
                raise field_errors(labels="The label cannot be empty.")
            if any(ch.isspace() for ch in label):
                raise field_errors(labels=f"The label '{label}' contains spaces which is invalid.")
            if len(label) > 255:
                raise field_errors(labels="The label must not exceed 255 characters.")
        return labels

    def check_summary(summary: Any) -> str:
        if not isinstance(summary, str) or not summary.strip():
            raise field_errors(summary="You must specify a summary of the issue.")
        if "\n" in summary or "\r" in summary:
            raise field_errors(
                summary="The summary is invalid because it contains newline characters."
            )
        if len(summary) > 255:
            raise field_errors(summary="Summary must be less than 255 characters.")
        return summary

    def unknown_fields(fields: dict[str, Any]) -> None:
        for name in fields:
            if name not in SETTABLE:
                raise field_errors(**{name: not_on_screen(name)})

    def link_adds(call: Call, issue: IssueRecord, ops: Any) -> None:
        for op in ops or []:
            add = op.get("add") if isinstance(op, dict) else None
            if not isinstance(add, dict):
                raise field_errors(issuelinks="Only the 'add' operation is supported here.")
            kind = site.link_type(
                name=(add.get("type") or {}).get("name"), type_id=(add.get("type") or {}).get("id")
            )
            if kind is None:
                raise field_errors(issuelinks="Issue link type is not valid.")
            inward, outward = add.get("inwardIssue"), add.get("outwardIssue")
            other_ref = inward or outward
            other = site.issue(
                str((other_ref or {}).get("key") or (other_ref or {}).get("id") or "")
            )
            if other is None:
                raise field_errors(issuelinks="The issue to link to does not exist.")
            # On the edited issue: {"inwardIssue": X} makes "X [outward] this issue".
            if inward is not None:
                site.link(call.user, kind, other, issue)
            else:
                site.link(call.user, kind, issue, other)

    def create(call: Call) -> Reply:
        body = body_of(call)
        fields = body.get("fields")
        if not isinstance(fields, dict):
            raise jira_error(400, "The request must hold 'fields'.")
        unknown_fields(fields)
        project = fields.get("project") or {}
        wanted = str(project.get("key") or project.get("id") or "")
        if wanted.upper() not in (site.project_key, site.project_id):
            raise field_errors(project="valid project is required")
        if not site.may(call.user, "CREATE_ISSUES"):
            raise field_errors(
                project="You do not have permission to create issues in this project."
            )
        kind_ref = fields.get("issuetype") or {}
        kind = next(
            (
                t
                for t in site.issue_types
                if t.id == kind_ref.get("id") or t.name == kind_ref.get("name")
            ),
            None,
        )
        if kind is None:
            raise field_errors(issuetype="Specify an issue type")
        summary = check_summary(fields.get("summary"))
        description = rich(call, "description", fields.get("description"))
        labels = check_labels(fields.get("labels", []))
        issue = site.create(call.user, summary, description, kind.id, labels)
        update = body.get("update") or {}
        link_adds(call, issue, update.get("issuelinks"))
        return Reply(
            201,
            {"id": issue.id, "key": issue.key, "self": f"{jira.base_url}{api}/issue/{issue.id}"},
        )

    def get_issue(call: Call) -> Reply:
        issue = issue_of(call)
        fields = wanted_fields(call.many("fields"), "*all")
        expand = set((call.arg("expand") or "").split(","))
        return Reply(body=jira.view(call).issue(issue, fields, expand))

    def edit(call: Call) -> Reply:
        issue = issue_of(call)
        body = body_of(call)
        if not site.may(call.user, "EDIT_ISSUES"):
            raise jira_error(400, "You do not have permission to edit issues in this project.")
        overriding = call.flag("overrideScreenSecurity") or call.flag("overrideEditableFlag")
        if overriding and not site.is_admin(call.user):
            raise jira_error(
                403, "Overriding screen security or the editable flag takes Administer Jira."
            )
        fields = body.get("fields") or {}
        update = body.get("update") or {}
        unknown_fields(fields)
        for name in update:
            if name not in ("labels", "summary", "issuelinks", "description"):
                raise field_errors(**{name: not_on_screen(name)})
        both = set(fields) & set(update)
        if both:
            name = sorted(both)[0]
            raise field_errors(
                **{name: f"Field '{name}' cannot be set in both 'fields' and 'update'."}
            )
        summary = check_summary(fields["summary"]) if "summary" in fields else None
        for op in update.get("summary", []):
            summary = check_summary(op.get("set"))
        description = ...
        if "description" in fields:
            description = rich(call, "description", fields["description"])
        for op in update.get("description", []):
            description = rich(call, "description", op.get("set"))
        labels = list(issue.labels)
        if "labels" in fields:
            labels = check_labels(fields["labels"])
        for op in update.get("labels", []):
            if "set" in op:
                labels = check_labels(op["set"])
            if "add" in op:
                labels = [*labels, *check_labels([op["add"]])]
            if "remove" in op:
                labels = [x for x in labels if x != op["remove"]]
        site.edit(issue, call.user, summary, description)
        site.set_labels(issue, call.user, labels)
        link_adds(call, issue, update.get("issuelinks"))
        if call.flag("returnIssue"):
            return Reply(200, jira.view(call).issue(issue, wanted_fields([], "*all")))
        return Reply(204)

    def transitions(call: Call) -> Reply:
        issue = issue_of(call)
        body = jira.view(call).transitions(issue)
        only = call.arg("transitionId")
        if only is not None:
            body["transitions"] = [t for t in body["transitions"] if t["id"] == only]
        if not site.may(call.user, "TRANSITION_ISSUES"):
            body["transitions"] = []
        return Reply(body=body)

    def transition(call: Call) -> Reply:
        issue = issue_of(call)
        body = body_of(call)
        ref = body.get("transition")
        if not isinstance(ref, dict) or ref.get("id") is None:
            raise jira_error(400, "Missing 'transition' identifier")
        wanted = str(ref["id"])
        if not wanted.isdigit():
            raise jira_error(400, "'transition' identifier must be an integer")
        if not site.may(call.user, "TRANSITION_ISSUES"):
            raise jira_error(400, "You do not have permission to transition this issue.")
        chosen = next((t for t in site.available(issue) if t.id == wanted), None)
        if chosen is None:
            raise jira_error(400, f"Transition id '{wanted}' is not valid for this issue.")
        comments = [
            op.get("add", {}).get("body") for op in (body.get("update") or {}).get("comment", [])
        ]
        for text in comments:
            rich(call, "comment", text)
        site.move(issue, call.user, chosen)
        for text in comments:
            site.comment(issue, call.user, text)
        return Reply(204)

    def comments(call: Call) -> Reply:
        issue = issue_of(call)
        order = call.arg("orderBy")
        if order not in (None, "created", "+created", "-created"):
            raise jira_error(400, f"Invalid orderBy value '{order}'. Use 'created' or '-created'.")
        start, limit = call.int_arg("startAt", 0), min(call.int_arg("maxResults", 100), 100)
        page = jira.view(call).comments(issue, 0, len(issue.comments))
        if order == "-created":
            page["comments"].reverse()
        page["comments"] = page["comments"][start : start + limit]
        page["startAt"], page["maxResults"] = start, limit
        return Reply(body=page)

    def add_comment(call: Call) -> Reply:
        issue = issue_of(call)
        body = body_of(call)
        if "body" not in body or body["body"] in (None, ""):
            raise field_errors(comment="Comment body can not be empty!")
        text = rich(call, "comment", body["body"])
        if not site.may(call.user, "ADD_COMMENTS"):
            raise jira_error(400, "You do not have the permission to comment on this issue.")
        record = site.comment(issue, call.user, text)
        return Reply(201, jira.view(call).comment(record, issue))

    def changelog(call: Call) -> Reply:
        issue = issue_of(call)
        start, limit = call.int_arg("startAt", 0), min(call.int_arg("maxResults", 100), 100)
        view = jira.view(call)
        groups = issue.history[start : start + limit]
        last = start + limit >= len(issue.history)
        here = f"{jira.base_url}{api}/issue/{issue.key}/changelog"
        page: dict[str, Any] = {
            "self": f"{here}?maxResults={limit}&startAt={start}",
            "maxResults": limit,
            "startAt": start,
            "total": len(issue.history),
            "isLast": last,
            "values": [view.change_group(g) for g in groups],
        }
        if not last:
            page["nextPage"] = f"{here}?maxResults={limit}&startAt={start + limit}"
        return Reply(body=page)

    def link(call: Call) -> Reply:
        body = body_of(call)
        kind_ref = body.get("type") or {}
        kind = site.link_type(name=kind_ref.get("name"), type_id=kind_ref.get("id"))
        if kind is None:
            named = kind_ref.get("name") or kind_ref.get("id")
            raise jira_error(404, f"No issue link type with name '{named}' found.")
        ends = []
        for side in ("inwardIssue", "outwardIssue"):
            ref = body.get(side) or {}
            found = site.issue(str(ref.get("key") or ref.get("id") or ""))
            if found is None or not site.may(call.user, "BROWSE_PROJECTS"):
                raise jira_error(404, f"Issue Does Not Exist: {ref.get('key') or ref.get('id')}")
            ends.append(found)
        source, dest = ends
        if not site.may(call.user, "LINK_ISSUES"):
            raise jira_error(404, f"No Link Issue Permission for issue '{source.key}'.")
        comment = body.get("comment")
        text = rich(call, "comment", comment.get("body")) if isinstance(comment, dict) else None
        site.link(call.user, kind, source, dest)
        if text is not None:
            site.comment(source, call.user, text)
        return Reply(201)

    key = "(?P<issue>[^/]+)"
    jira.route("POST", f"{api}/issue", create, "createIssue")
    jira.route("GET", f"{api}/issue/{key}", get_issue, "getIssue")
    jira.route("PUT", f"{api}/issue/{key}", edit, "editIssue")
    jira.route("GET", f"{api}/issue/{key}/transitions", transitions, "getTransitions")
    jira.route("POST", f"{api}/issue/{key}/transitions", transition, "doTransition")
    jira.route("GET", f"{api}/issue/{key}/comment", comments, "getComments")
    jira.route("POST", f"{api}/issue/{key}/comment", add_comment, "addComment")
    jira.route("GET", f"{api}/issue/{key}/changelog", changelog, "getChangeLogs")
    jira.route("POST", f"{api}/issueLink", link, "linkIssues")
