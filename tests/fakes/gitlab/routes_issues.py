"""Issue endpoints of the fake GitLab: list, get, create, edit, notes, label events and links.

As on GitLab: issues are addressed by ``iid``; ``state`` is ``opened`` or ``closed`` (an edit's
``state_event`` is ``close`` or ``reopen``); labels named on a create or an edit are created
when missing, and only someone with the Reporter role sets them (a stranger's are dropped
without a word); every label added or removed is an ``add`` or ``remove`` entry of the issue's
``resource_label_events`` by whoever did it. On GitLab Premium a scoped label (``status::x``)
takes the place of any other label of its scope (``status::``); on Free scoped labels are
plain labels and both stay. Links: ``relates_to`` on any tier; ``blocks`` and ``is_blocked_by``
need Premium's blocked issues, and on Free are ``403 {"message": "Blocked issues not available
for current license"}`` (GitLab EE's ``IssueLinks::CreateService``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.fakes.clock import iso_ms as iso
from tests.fakes.clock import parse_iso
from tests.fakes.gitlab.records import GUEST, IssueRecord, MergeRequestRecord
from tests.fakes.gitlab.server import (
    Call,
    at_least_one_of,
    bad_request,
    forbidden,
    missing,
    not_found,
)
from tests.fakes.http import HttpError, Reply

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab

ISSUE = r"/issues/(?P<iid>\d+)"
ISSUE_ORDERS = (
    "created_at",
    "updated_at",
    "title",
    "due_date",
    "relative_position",
    "priority",
    "label_priority",
    "milestone_due",
    "popularity",
    "weight",
)
EDIT_PARAMS = (
    "title",
    "description",
    "labels",
    "add_labels",
    "remove_labels",
    "state_event",
    "assignee_ids",
    "confidential",
    "discussion_locked",
    "due_date",
    "milestone_id",
    "issue_type",
)
LINK_TYPES = ("relates_to", "blocks", "is_blocked_by")
NO_LICENSE = "Blocked issues not available for current license"


def invalid(name: str) -> HttpError:
    """Grape's answer to a parameter outside its values."""
    return HttpError(
        400,
        f"{name} does not have a valid value",
        body={"error": f"{name} does not have a valid value"},
    )


def notes_routes(
    gl: FakeGitLab,
    prefix: str,
    noteable: str,
    find: Callable[[Call], IssueRecord | MergeRequestRecord],
) -> None:
    """``GET`` and ``POST`` ``<prefix>/notes`` of an issue or a merge request: anyone signed in
    comments on the public project; a note moves its noteable's ``updated_at``."""

    def list_notes(call: Call) -> Reply:
        rec = find(call)
        return Reply(body=gl.notes_payload(noteable, rec.iid, rec.id, call), paginate="")

    def create_note(call: Call) -> Reply:
        rec = find(call)
        body = call.text("body")
        if body is None:
            raise missing("body")
        made = gl.add_note(noteable, rec.iid, str(call.user), body)
        rec.updated_at = gl.clock
        return Reply(201, gl.note_payload(made, rec.id))

    kind = "issue" if noteable == "Issue" else "merge-request"
    gl.route("GET", f"{prefix}/notes", list_notes, f"notes/list-{kind}")
    gl.route("POST", f"{prefix}/notes", create_note, f"notes/create-{kind}")


def register(gl: FakeGitLab) -> None:
    def list_issues(call: Call) -> Reply:
        state = call.text("state") or "all"
        if state not in ("opened", "closed", "all"):
            raise invalid("state")
        found = [i for i in gl.issues.values() if state in ("all", i.state)]
        labels = call.names("labels")
        if labels == ["None"]:
            found = [i for i in found if not i.labels]
        elif labels == ["Any"]:
            found = [i for i in found if i.labels]
        elif labels:
            found = [i for i in found if set(labels) <= set(i.labels)]
        for name, keep in (
            ("updated_after", lambda i, t: i.updated_at >= t),
            ("updated_before", lambda i, t: i.updated_at <= t),
            ("created_after", lambda i, t: i.created_at >= t),
            ("created_before", lambda i, t: i.created_at <= t),
        ):
            if call.text(name):
                stamp = parse_iso(str(call.text(name)))
                found = [i for i in found if keep(i, stamp)]
        iids = call.arg("iids")
        if iids:
            wanted = {int(n) for n in (iids if isinstance(iids, list) else [iids])}
            found = [i for i in found if i.iid in wanted]
        if call.text("author_username"):
            found = [i for i in found if i.author == call.text("author_username")]
        if call.text("search"):
            text = str(call.text("search")).casefold()
            found = [i for i in found if text in f"{i.title} {i.description or ''}".casefold()]
        order = call.text("order_by") or "created_at"
        if order not in ISSUE_ORDERS:
            raise invalid("order_by")
        sort = call.text("sort") or "desc"
        if sort not in ("asc", "desc"):
            raise invalid("sort")
        key = {"updated_at": lambda i: (i.updated_at, i.id), "title": lambda i: (i.title, i.id)}
        found.sort(key=key.get(order, lambda i: (i.created_at, i.id)), reverse=sort == "desc")
        return Reply(body=[gl.issue_payload(i) for i in found], paginate="")

    def get_issue(call: Call) -> Reply:
        return Reply(body=gl.issue_payload(gl.issue(int(call.params["iid"]))))

    def create_issue(call: Call) -> Reply:
        title = str(call.need("title"))
        labels = call.names("labels") or []
        iid = gl.file_issue(title, call.text("description"), str(call.user), labels, quiet=True)
        return Reply(201, gl.issue_payload(gl.issues[iid]))

    def edit_issue(call: Call) -> Reply:
        rec = gl.issue(int(call.params["iid"]))
        at_least_one_of(call, EDIT_PARAMS)
        event = call.text("state_event")
        if event is not None and event not in ("close", "reopen"):
            raise invalid("state_event")
        user = str(call.user)
        gl.edit(rec, user, call.args, quiet=True)
        return Reply(body=gl.issue_payload(rec))

    def label_events(call: Call) -> Reply:
        rec = gl.issue(int(call.params["iid"]))
        found = [
            gl.label_event_payload(e, rec.id)
            for e in gl.label_events
            if e.noteable == "Issue" and e.iid == rec.iid
        ]
        return Reply(body=found, paginate="")

    def list_links(call: Call) -> Reply:
        rec = gl.issue(int(call.params["iid"]))
        found: list[dict[str, Any]] = []
        for link in gl.links:
            if rec.iid not in (link.source, link.target):
                continue
            other = link.target if link.source == rec.iid else link.source
            kind = link.link_type
            if kind == "blocks" and link.target == rec.iid:
                kind = "is_blocked_by"
            entry = gl.issue_payload(gl.issues[other])
            entry.update(
                issue_link_id=link.id,
                link_type=kind,
                link_created_at=iso(link.created_at),
                link_updated_at=iso(link.created_at),
            )
            found.append(entry)
        return Reply(body=found)

    def create_link(call: Call) -> Reply:
        rec = gl.issue(int(call.params["iid"]))
        target_project = call.text("target_project_id")
        if target_project is None:
            raise missing("target_project_id")
        target_iid = call.text("target_issue_iid")
        if target_iid is None:
            raise missing("target_issue_iid")
        kind = call.text("link_type") or "relates_to"
        if kind not in LINK_TYPES:
            raise invalid("link_type")
        if call.text("link_type") is not None and kind != "relates_to" and not gl.premium:
            raise HttpError(403, NO_LICENSE)
        if gl.people.level(call.user) < GUEST:
            raise forbidden()
        target = gl.issues.get(int(target_iid)) if gl.is_project(target_project) else None
        if target is None:
            raise HttpError(
                404, "No matching issue found. Make sure that you are adding a valid issue URL."
            )
        if target.iid == rec.iid:
            raise bad_request("Cannot assign an issue to itself")  # GitLab refuses a self-link
        link = gl.link_issues(rec.iid, target.iid, kind, str(call.user))
        if link is None:
            raise HttpError(409, "Issue(s) already assigned")
        return Reply(
            201,
            {
                "source_issue": gl.issue_payload(gl.issues[link.source]),
                "target_issue": gl.issue_payload(gl.issues[link.target]),
                "link_type": link.link_type,
            },
        )

    def delete_link(call: Call) -> Reply:
        rec = gl.issue(int(call.params["iid"]))
        link_id = int(call.params["link_id"])
        link = next(
            (k for k in gl.links if k.id == link_id and rec.iid in (k.source, k.target)), None
        )
        if link is None:
            raise not_found()
        if gl.people.level(call.user) < GUEST:
            raise forbidden()
        gl.links.remove(link)
        return Reply(
            body={
                "source_issue": gl.issue_payload(gl.issues[link.source]),
                "target_issue": gl.issue_payload(gl.issues[link.target]),
                "link_type": link.link_type,
            }
        )

    route = gl.route
    route("GET", "/issues", list_issues, "issues/list")
    route("POST", "/issues", create_issue, "issues/create")
    route("GET", ISSUE, get_issue, "issues/get")
    route("PUT", ISSUE, edit_issue, "issues/edit")
    notes_routes(gl, ISSUE, "Issue", lambda call: gl.issue(int(call.params["iid"])))
    route("GET", f"{ISSUE}/resource_label_events", label_events, "label-events/list-issue")
    route("GET", f"{ISSUE}/links", list_links, "issue-links/list")
    route("POST", f"{ISSUE}/links", create_link, "issue-links/create")
    route("DELETE", rf"{ISSUE}/links/(?P<link_id>\d+)", delete_link, "issue-links/delete")
