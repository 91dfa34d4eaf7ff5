"""Issue endpoints of the fake GitHub: list, get, create, update, labels, dependencies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.github import payloads
from tests.fakes.github.records import IssueRecord, parse_iso
from tests.fakes.github.server import Call, HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

N = r"(?P<number>\d+)"


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    def render(rec: IssueRecord) -> dict[str, Any]:
        return payloads.issue(gh.urls, rec, gh.labels, gh.pulls.get(rec.number))

    def list_issues(call: Call) -> Reply:
        q = call.query
        state = q.get("state", "open")
        found = [i for i in gh.issues.values() if state in ("all", i.state)]
        if "since" in q:
            since = parse_iso(q["since"])
            found = [i for i in found if i.updated_at >= since]
        if q.get("labels"):
            wanted = set(q["labels"].split(","))
            found = [i for i in found if wanted <= set(i.labels)]
        sort = q.get("sort", "created")
        key = {"updated": lambda i: (i.updated_at, i.number)}.get(
            sort, lambda i: (i.created_at, i.number)
        )
        found.sort(key=key, reverse=q.get("direction", "desc") == "desc")
        return Reply(body=[render(i) for i in found], paginate="")

    def get_issue(call: Call) -> Reply:
        return Reply(body=render(gh.issue(int(call.params["number"]))))

    def create_issue(call: Call) -> Reply:
        body = call.body or {}
        title = body.get("title")
        if not title:
            raise HttpError(422, "Validation Failed", [{"field": "title", "code": "missing"}])
        names = [str(n) for n in body.get("labels", [])]
        for name in names:
            gh.label_id(name)
        number, stamp = gh.next_number(), gh.tick()
        rec = IssueRecord(
            number,
            str(title),
            body.get("body"),
            call.login,
            stamp,
            stamp,
            list(dict.fromkeys(names)),
        )
        gh.issues[number] = rec
        return Reply(201, render(rec))

    def update_issue(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        body = call.body or {}
        if "title" in body:
            rec.title = str(body["title"])
        if "body" in body:
            rec.body = body["body"]
        if "labels" in body:
            rec.labels = list(dict.fromkeys(str(n) for n in body["labels"]))
            for name in rec.labels:
                gh.label_id(name)
        stamp = gh.tick()
        if body.get("state") in ("open", "closed") and body["state"] != rec.state:
            rec.state = body["state"]
            closed = rec.state == "closed"
            rec.closed_at = stamp if closed else None
            rec.state_reason = body.get("state_reason") or ("completed" if closed else "reopened")
        rec.updated_at = stamp
        return Reply(body=render(rec))

    def add_labels(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        body = call.body
        names = body.get("labels", []) if isinstance(body, dict) else body or []
        for name in names:
            gh.label_id(str(name))
            if name not in rec.labels:
                rec.labels.append(str(name))
        rec.updated_at = gh.tick()
        return Reply(body=[payloads.label(gh.urls, n, gh.labels[n]) for n in rec.labels])

    def remove_label(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        name = call.params["name"]
        if name not in rec.labels:
            raise HttpError(404, "Label does not exist")
        rec.labels.remove(name)
        rec.updated_at = gh.tick()
        return Reply(body=[payloads.label(gh.urls, n, gh.labels[n]) for n in rec.labels])

    def list_blocked_by(call: Call) -> Reply:
        rec = gh.issue(int(call.params["number"]))
        return Reply(body=[render(gh.issues[n]) for n in rec.blocked_by], paginate="")

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
        return Reply(201, render(blocker))

    router.add("GET", f"{prefix}/issues", list_issues)
    router.add("POST", f"{prefix}/issues", create_issue)
    router.add("GET", f"{prefix}/issues/{N}", get_issue)
    router.add("PATCH", f"{prefix}/issues/{N}", update_issue)
    router.add("POST", f"{prefix}/issues/{N}/labels", add_labels)
    router.add("DELETE", f"{prefix}/issues/{N}/labels/(?P<name>.+)", remove_label)
    router.add("GET", f"{prefix}/issues/{N}/dependencies/blocked_by", list_blocked_by)
    router.add("POST", f"{prefix}/issues/{N}/dependencies/blocked_by", add_blocked_by)
    router.add(
        "GET",
        prefix,
        lambda call: Reply(body=payloads.repository(gh.urls, gh.default_branch, full=True)),
    )
