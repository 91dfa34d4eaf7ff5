"""Issue endpoints of the fake GitHub: list, get, create, update, labels, dependencies, the
timeline, and issues of other repositories (cross-repository blockers).

Labels are matched as GitHub matches them, ignoring case: ``status:blocked`` applies an existing
``Status:Blocked``, and creating ``status:blocked`` then is a 422 ``already_exists``. Every label
added or removed is a ``labeled`` or ``unlabeled`` event on the issue's timeline, its actor the
token's user; so is a label given with a new issue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.clock import parse_iso
from tests.fakes.github import payloads
from tests.fakes.github.payloads import LABEL_COLOR, Urls
from tests.fakes.github.records import IssueRecord
from tests.fakes.github.server import Call
from tests.fakes.http import HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

N = r"(?P<number>\d+)"


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    def render(rec: IssueRecord, call: Call) -> dict[str, Any]:
        return payloads.issue(
            gh.urls, rec, gh.labels, gh.pulls.get(rec.number),
            association=gh.association(rec.user), legacy=call.legacy,
        )  # fmt: skip

    def use_labels(call: Call, names: list[str]) -> list[str]:
        """The labels ``names`` names, as they are spelled (any case matches): those that do
        not exist yet are created on first use, by those who may."""
        missing = [n for n in names if gh.label_name(n) is None]
        if missing and (call.access is None or not call.access.can_create_labels):
            raise HttpError(403, call.access.refusal if call.access else "Forbidden")
        return gh.use_labels(names)

    def label_names(body: Any) -> list[str]:
        raw = body.get("labels", []) if isinstance(body, dict) else body or []
        return [str(n) for n in raw]

    def can_set_labels(call: Call) -> bool:
        # GitHub: "Only users with push access can set labels for new issues. Labels are
        # silently dropped otherwise." (the same for labels replaced with an update)
        return call.access is None or call.access.can_push

    def list_issues(call: Call) -> Reply:
        q = call.query
        state = q.get("state", "open")
        found = [i for i in gh.issues.values() if state in ("all", i.state)]
        if "since" in q:
            since = parse_iso(q["since"])
            found = [i for i in found if i.updated_at >= since]
        if q.get("labels"):
            wanted = {n.casefold() for n in q["labels"].split(",")}
            found = [i for i in found if wanted <= {n.casefold() for n in i.labels}]
        sort = q.get("sort", "created")
        key = {"updated": lambda i: (i.updated_at, i.number)}.get(
            sort, lambda i: (i.created_at, i.number)
        )
        found.sort(key=key, reverse=q.get("direction", "desc") == "desc")
        return Reply(body=[render(i, call) for i in found], paginate="")

    def get_issue(call: Call) -> Reply:
        return Reply(body=render(gh.issue(int(call.params["number"])), call))

    def create_issue(call: Call) -> Reply:
        body = call.body or {}
        title = body.get("title")
        if not title:
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "Issue", "field": "title", "code": "missing_field"}],
            )
        names = label_names(body) if can_set_labels(call) else []
        names = use_labels(call, names)
        number, stamp = gh.next_number(), gh.tick()
        rec = IssueRecord(number, str(title), body.get("body"), call.login, stamp, stamp)
        gh.issues[number] = rec
        gh.hooks.issues("opened", number, call.login)
        gh.relabel(rec, names, call.login, moved=False)
        return Reply(201, render(rec, call))

    def update_issue(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        body = call.body or {}
        if "title" in body:
            gh.retitle(rec, str(body["title"]), call.login)
        if "body" in body and body["body"] != rec.body:
            gh.hooks.issues("edited", rec.number, call.login, changes={"body": {"from": rec.body}})
            rec.body = body["body"]
        if "labels" in body and can_set_labels(call):
            gh.relabel(rec, use_labels(call, label_names(body)), call.login)
        stamp = gh.tick()
        if body.get("state") in ("open", "closed") and body["state"] != rec.state:
            rec.state = body["state"]
            closed = rec.state == "closed"
            rec.closed_at = stamp if closed else None
            rec.state_reason = body.get("state_reason") or ("completed" if closed else "reopened")
            gh.event(rec.number, "closed" if closed else "reopened", call.login)
        rec.updated_at = stamp
        return Reply(body=render(rec, call))

    def issue_labels(rec: IssueRecord) -> Reply:
        return Reply(body=[payloads.label(gh.urls, n, gh.labels[n]) for n in rec.labels])

    def add_labels(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        gh.relabel(rec, rec.labels + use_labels(call, label_names(call.body)), call.login)
        return issue_labels(rec)

    def set_labels(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        names = label_names(call.body)
        if isinstance(call.body, dict) and not names:
            # The published schema: {"labels": [...]} has minItems 1 (removing every label is
            # DELETE .../labels); GitHub answers an empty one as invalid.
            raise HttpError(
                422,
                'Invalid request.\n\nNo subschema in "oneOf" matched.',
                [{"resource": "Issue", "field": "labels", "code": "invalid"}],
            )
        gh.relabel(rec, use_labels(call, names), call.login)
        return issue_labels(rec)

    def remove_all_labels(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        gh.relabel(rec, [], call.login)
        return Reply(status=204)

    def remove_label(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        name = gh.label_name(call.params["name"])
        if name is None or name not in rec.labels:
            raise HttpError(404, "Label does not exist")
        gh.relabel(rec, [n for n in rec.labels if n != name], call.login)
        return issue_labels(rec)

    def list_labels(call: Call) -> Reply:
        found = [payloads.label(gh.urls, n, i) for n, i in sorted(gh.labels.items())]
        return Reply(body=found, paginate="")

    def create_label(call: Call) -> Reply:
        body = call.body or {}
        name = str(body.get("name") or "")
        if not name:
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "Label", "field": "name", "code": "missing_field"}],
            )
        if gh.label_name(name) is not None:  # GitHub compares label names ignoring case
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "Label", "field": "name", "code": "already_exists"}],
            )
        [name] = use_labels(call, [name])
        made = payloads.label(gh.urls, name, gh.labels[name])
        made.update(color=body.get("color") or LABEL_COLOR, description=body.get("description"))
        return Reply(201, made)

    def foreign_payload(repository: str, rec: IssueRecord, call: Call) -> dict[str, Any]:
        owner, _, name = repository.partition("/")
        urls = Urls(gh.base_url, owner, name)
        # Its author's ties are with that repository, of which the fake knows nothing.
        return payloads.issue(urls, rec, {}, None, association="NONE", legacy=call.legacy)

    def list_blocked_by(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        found = [render(gh.issues[n], call) for n in rec.blocked_by]
        for repository, number in rec.foreign_blockers:
            found.append(foreign_payload(repository, gh.foreign[repository][number], call))
        return Reply(body=found, paginate="")

    def add_blocked_by(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        wanted = (call.body or {}).get("issue_id")
        blocker = next((i for i in gh.issues.values() if i.id == wanted), None)
        if blocker is None:
            raise HttpError(404, "Not Found")  # e.g. an issue number sent instead of its id
        if blocker.number == rec.number:
            raise HttpError(422, "Validation Failed: an issue cannot block itself")
        if blocker.number not in rec.blocked_by:
            rec.blocked_by.append(blocker.number)
            rec.updated_at = gh.tick()
        return Reply(201, render(blocker, call))

    def timeline(call: Call) -> Reply:
        number = int(call.params["number"])
        gh.issue(number)
        found = [payloads.timeline_event(gh.urls, e) for e in gh.events if e.issue == number]
        return Reply(body=found, paginate="")

    def get_foreign_issue(call: Call) -> Reply:
        repository = f"{call.params['owner']}/{call.params['repo']}"
        rec = gh.foreign.get(repository, {}).get(int(call.params["number"]))
        if rec is None:
            raise HttpError(404, "Not Found")
        return Reply(body=foreign_payload(repository, rec, call))

    def get_repository(call: Call) -> Reply:
        full = payloads.repository(
            gh.urls,
            gh.default_branch,
            full=True,
            pushed_at=gh.pushed_at,
            merge_methods=gh.merge_methods,
        )
        return Reply(body=full)

    add = router.add
    add("GET", f"{prefix}/issues", list_issues, "issues/list-for-repo")
    add("POST", f"{prefix}/issues", create_issue, "issues/create")
    add("GET", f"{prefix}/issues/{N}", get_issue, "issues/get")
    add("PATCH", f"{prefix}/issues/{N}", update_issue, "issues/update")
    add("POST", f"{prefix}/issues/{N}/labels", add_labels, "issues/add-labels")
    add("PUT", f"{prefix}/issues/{N}/labels", set_labels, "issues/set-labels")
    add("DELETE", f"{prefix}/issues/{N}/labels/(?P<name>.+)", remove_label, "issues/remove-label")
    add("DELETE", f"{prefix}/issues/{N}/labels", remove_all_labels, "issues/remove-all-labels")
    add("GET", f"{prefix}/labels", list_labels, "issues/list-labels-for-repo")
    add("POST", f"{prefix}/labels", create_label, "issues/create-label")
    add("GET", f"{prefix}/issues/{N}/dependencies/blocked_by", list_blocked_by,
        "issues/list-dependencies-blocked-by")  # fmt: skip
    add("POST", f"{prefix}/issues/{N}/dependencies/blocked_by", add_blocked_by,
        "issues/add-blocked-by-dependency")  # fmt: skip
    add("GET", f"{prefix}/issues/{N}/timeline", timeline, "issues/list-events-for-timeline")
    add("GET", prefix, get_repository, "repos/get")
    add("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/" + N, get_foreign_issue,
        "issues/get")  # fmt: skip
