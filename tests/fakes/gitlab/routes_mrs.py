"""Merge request endpoints of the fake GitLab: list, get, create, update, changes, diffs,
commits, notes and discussions (diff notes with a ``position`` on a line of the diff).

As on GitLab: a second open merge request for the same source and target branch is ``409
{"message": ["Another open merge request already exists for this source branch: !N"]}``; a
branch that does not exist is a 422 with the reason in a list; a diff note's ``position`` must
name one of the merge request's diff versions (``base_sha``, ``start_sha``, ``head_sha``) and a
line of its diff (an added line by ``new_line``, a removed one by ``old_line``, an unchanged
one by both), else ``400 Bad request - Note {:line_code=>[...]}``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tests.fakes.clock import parse_iso
from tests.fakes.gitlab import forge_payloads as fp
from tests.fakes.gitlab.records import MergeRequestRecord, NoteRecord
from tests.fakes.gitlab.routes_issues import invalid, notes_routes
from tests.fakes.gitlab.server import Call, at_least_one_of, forbidden, missing, not_found
from tests.fakes.http import HttpError, Reply

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab

MR = r"/merge_requests/(?P<iid>\d+)"
UPDATE_PARAMS = (
    "assignee_id",
    "assignee_ids",
    "reviewer_ids",
    "description",
    "labels",
    "add_labels",
    "remove_labels",
    "milestone_id",
    "milestone",
    "remove_source_branch",
    "allow_collaboration",
    "allow_maintainer_to_push",
    "squash",
    "target_branch",
    "title",
    "state_event",
    "discussion_locked",
    "merge_after",
)
BAD_POSITION = (
    '400 Bad request - Note {:line_code=>["can\'t be blank", "must be a valid line code"], '
    ':position=>["is incomplete"]}'
)
HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def diff_lines(patch: str | None) -> set[tuple[int | None, int | None]]:
    """The (old_line, new_line) pairs a diff note may sit on: added lines (None, n), removed
    ones (o, None), unchanged ones (o, n)."""
    lines: set[tuple[int | None, int | None]] = set()
    old = new = 0
    for text in (patch or "").split("\n"):
        found = HUNK.match(text)
        if found:
            old, new = int(found.group(1)), int(found.group(2))
        elif text.startswith("+"):
            lines.add((None, new))
            new += 1
        elif text.startswith("-"):
            lines.add((old, None))
            old += 1
        elif text.startswith(" "):
            lines.add((old, new))
            old, new = old + 1, new + 1
    return lines


def register(gl: FakeGitLab) -> None:
    def payload(mr: MergeRequestRecord, call: Call, **options: Any) -> dict[str, Any]:
        return gl.mr_payload(mr, call.user, **options)

    def list_mrs(call: Call) -> Reply:
        state = call.text("state") or "all"
        if state not in ("opened", "closed", "locked", "merged", "all"):
            raise invalid("state")
        found = [m for m in gl.merge_requests.values() if state in ("all", m.state)]
        for name in ("source_branch", "target_branch"):
            if call.text(name):
                found = [m for m in found if getattr(m, name) == call.text(name)]
        if call.text("author_username"):
            found = [m for m in found if m.author == call.text("author_username")]
        labels = call.names("labels")
        if labels:
            found = [m for m in found if set(labels) <= set(m.labels)]
        iids = call.arg("iids")
        if iids:
            wanted = {int(n) for n in (iids if isinstance(iids, list) else [iids])}
            found = [m for m in found if m.iid in wanted]
        for name, keep in (
            ("updated_after", lambda m, t: m.updated_at >= t),
            ("updated_before", lambda m, t: m.updated_at <= t),
            ("created_after", lambda m, t: m.created_at >= t),
        ):
            if call.text(name):
                stamp = parse_iso(str(call.text(name)))
                found = [m for m in found if keep(m, stamp)]
        order = call.text("order_by") or "created_at"
        if order not in (
            "created_at",
            "updated_at",
            "title",
            "merged_at",
            "label_priority",
            "milestone_due",
            "popularity",
            "priority",
        ):
            raise invalid("order_by")
        key = {"updated_at": lambda m: (m.updated_at, m.id), "title": lambda m: (m.title, m.id)}
        found.sort(
            key=key.get(order, lambda m: (m.created_at, m.id)),
            reverse=(call.text("sort") or "desc") == "desc",
        )
        recheck = call.flag("with_merge_status_recheck") or False
        body = [payload(m, call, single=False, recheck=recheck) for m in found]
        return Reply(body=body, paginate="")

    def get_mr(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        body = payload(mr, call, recheck=True)
        if call.flag("include_rebase_in_progress"):
            body["rebase_in_progress"] = mr.rebasing
        if call.flag("include_diverged_commits_count"):
            target = gl.head_of(mr.target_branch) or mr.start_sha
            body["diverged_commits_count"] = int(
                gl.git.line("rev-list", "--count", f"{mr.head_sha}..{target}") or 0
            )
        if mr.rebasing:
            gl.run_rebase(mr)  # the rebase runs after this read: the next one sees it done
        return Reply(body=body)

    def create_mr(call: Call) -> Reply:
        title = str(call.need("title"))
        source, target = str(call.need("source_branch")), str(call.need("target_branch"))
        if not gl.may_push(call.user):
            raise forbidden()
        mr = gl.open_merge_request(
            str(call.user),
            source,
            target,
            title,
            call.text("description"),
            labels=call.names("labels"),
            squash=bool(call.flag("squash")),
            remove_source_branch=call.flag("remove_source_branch"),
        )
        return Reply(201, payload(mr, call))

    def update_mr(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        at_least_one_of(call, UPDATE_PARAMS)
        if call.user != mr.author and not gl.may_push(call.user):
            raise forbidden()
        event = call.text("state_event")
        if event is not None and event not in ("close", "reopen"):
            raise invalid("state_event")
        user = str(call.user)
        if call.text("title") is not None:
            mr.title = str(call.text("title"))
        if call.text("description") is not None:
            mr.description = call.text("description")
        if call.text("target_branch") is not None:
            mr.target_branch = str(call.text("target_branch"))
        for name in ("squash", "remove_source_branch"):
            if call.flag(name) is not None:
                setattr(mr, name, call.flag(name))
        wanted = gl._wanted_labels(mr, call)  # type: ignore[arg-type]
        if wanted is not None:
            gl.relabel(mr, wanted, user, moved=False, noteable="MergeRequest")
        action = "update"
        if event == "close" and mr.state == "opened":
            mr.state, mr.closed_at, mr.closed_by = "closed", gl.tick(), user
            mr.auto_merge_by = None
            action = "close"
        elif event == "reopen" and mr.state == "closed":
            mr.state, mr.closed_at, mr.closed_by = "opened", None, None
            action = "reopen"
        mr.updated_at = gl.tick()
        gl.hooks.merge_request(mr, action, user)
        return Reply(body=payload(mr, call))

    def diffs_of(mr: MergeRequestRecord) -> list[dict[str, Any]]:
        base, _, head = mr.diff_versions[-1]
        return [fp.diff(c) for c in gl.git.changed_files(base, head)]

    def changes(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        body = payload(mr, call)
        body.update(changes=diffs_of(mr), overflow=False)
        return Reply(body=body)

    def diffs(call: Call) -> Reply:
        return Reply(body=diffs_of(gl.mr(int(call.params["iid"]))), paginate="")

    def commits(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        base, _, head = mr.diff_versions[-1]
        shas = gl.git.line("rev-list", f"{base}..{head}").split()
        return Reply(body=[fp.commit(gl.site, gl.git.commit_info(s)) for s in shas], paginate="")

    def discussion(mr: MergeRequestRecord, notes: list[NoteRecord]) -> dict[str, Any]:
        first = notes[0]
        return {
            "id": first.discussion,
            "individual_note": first.individual,
            "notes": [gl.note_payload(n, mr.id) for n in notes],
        }

    def list_discussions(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        threads: dict[str, list[NoteRecord]] = {}
        for note in gl.notes:
            if note.noteable == "MergeRequest" and note.iid == mr.iid:
                threads.setdefault(note.discussion, []).append(note)
        return Reply(body=[discussion(mr, notes) for notes in threads.values()], paginate="")

    def create_discussion(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        body = call.text("body")
        if body is None:
            raise missing("body")
        position = call.arg("position")
        if position is not None:
            position = checked_position(mr, position)
        made = gl.add_note(
            "MergeRequest", mr.iid, str(call.user), body, position=position, individual=False
        )
        mr.updated_at = gl.clock
        return Reply(201, discussion(mr, [made]))

    def thread_of(call: Call) -> tuple[MergeRequestRecord, list[NoteRecord]]:
        mr = gl.mr(int(call.params["iid"]))
        thread = [
            n
            for n in gl.notes
            if n.noteable == "MergeRequest"
            and n.iid == mr.iid
            and n.discussion == call.params["discussion"]
        ]
        if not thread:
            raise not_found()
        return mr, thread

    def get_discussion(call: Call) -> Reply:
        mr, thread = thread_of(call)
        return Reply(body=discussion(mr, thread))

    def reply(call: Call) -> Reply:
        mr, thread = thread_of(call)
        body = call.text("body")
        if body is None:
            raise missing("body")
        made = gl.add_note(
            "MergeRequest",
            mr.iid,
            str(call.user),
            body,
            discussion=thread[0].discussion,
            individual=False,
        )
        return Reply(201, gl.note_payload(made, mr.id))

    def resolve(call: Call) -> Reply:
        mr, thread = thread_of(call)
        resolved = call.flag("resolved")
        if resolved is None:
            raise missing("resolved")
        for note in thread:
            note.resolved = resolved
        return Reply(body=discussion(mr, thread))

    def checked_position(mr: MergeRequestRecord, position: Any) -> dict[str, object]:
        if not isinstance(position, dict):
            raise HttpError(400, "position is invalid", body={"error": "position is invalid"})
        refs = (position.get("base_sha"), position.get("start_sha"), position.get("head_sha"))
        if position.get("position_type", "text") != "text" or refs not in mr.diff_versions:
            raise HttpError(400, BAD_POSITION)
        new_path = position.get("new_path") or position.get("old_path")
        old_path = position.get("old_path") or new_path
        old_line = _line(position.get("old_line"))
        new_line = _line(position.get("new_line"))
        base, _, head = refs
        change = next(
            (c for c in gl.git.changed_files(str(base), str(head)) if c.filename == new_path), None
        )
        if change is None or (old_line, new_line) not in diff_lines(change.patch):
            raise HttpError(400, BAD_POSITION)
        return {
            "base_sha": base,
            "start_sha": refs[1],
            "head_sha": head,
            "old_path": old_path,
            "new_path": new_path,
            "position_type": "text",
            "old_line": old_line,
            "new_line": new_line,
            "line_range": None,
        }

    route = gl.route
    route("GET", "/merge_requests", list_mrs, "merge-requests/list")
    route("POST", "/merge_requests", create_mr, "merge-requests/create")
    route("GET", MR, get_mr, "merge-requests/get")
    route("PUT", MR, update_mr, "merge-requests/update")
    route("GET", f"{MR}/changes", changes, "merge-requests/changes")
    route("GET", f"{MR}/diffs", diffs, "merge-requests/diffs")
    route("GET", f"{MR}/commits", commits, "merge-requests/commits")
    notes_routes(gl, MR, "MergeRequest", lambda call: gl.mr(int(call.params["iid"])))
    route("GET", f"{MR}/discussions", list_discussions, "discussions/list-merge-request")
    route("POST", f"{MR}/discussions", create_discussion, "discussions/create-merge-request")
    route(
        "POST",
        rf"{MR}/discussions/(?P<discussion>\w+)/notes",
        reply,
        "discussions/reply-merge-request",
    )
    route(
        "GET",
        rf"{MR}/discussions/(?P<discussion>\w+)",
        get_discussion,
        "discussions/get-merge-request",
    )
    route(
        "PUT",
        rf"{MR}/discussions/(?P<discussion>\w+)",
        resolve,
        "discussions/resolve-merge-request",
    )


def _line(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise HttpError(400, BAD_POSITION) from None
