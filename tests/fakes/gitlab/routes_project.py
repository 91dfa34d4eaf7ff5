"""The fake GitLab's project-wide endpoints: the token's user, users by name, the project, its
members and its labels.

Labels: creating one that exists is ``409 {"message": "Label already exists"}``; creating needs
the Reporter role (``admin_label``), ``403 {"message": "403 Forbidden"}`` otherwise; names are
matched exactly (GitLab's label titles are case-sensitive)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.fakes.gitlab import payloads
from tests.fakes.gitlab.records import REPORTER
from tests.fakes.gitlab.server import Call, forbidden, not_found, unauthorized
from tests.fakes.http import HttpError, Reply

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab


def register(gl: FakeGitLab) -> None:
    def current_user(call: Call) -> Reply:
        if call.user is None:
            raise unauthorized()
        bot = call.user in gl.people.bots
        return Reply(body=payloads.current_user(gl.site, call.user, gl.people.id(call.user), bot))

    def list_users(call: Call) -> Reply:
        wanted = call.text("username")
        names = [gl.people.find(wanted)] if wanted else list(gl.people.ids)
        found = [gl.user(n) for n in names if n is not None and n not in gl.people.bots]
        return Reply(body=found, paginate="")

    def get_user(call: Call) -> Reply:
        name = gl.people.by_id(int(call.params["user_id"]))
        if name is None:
            raise not_found("User")
        return Reply(body=gl.user(name))

    def get_project(call: Call) -> Reply:
        return Reply(body=gl.project_payload(call.user))

    def get_member(call: Call) -> Reply:
        name = gl.people.by_id(int(call.params["user_id"]))
        if name is None or gl.people.level(name) == 0:
            raise not_found()
        return Reply(body=gl.member(name))

    def list_members(call: Call) -> Reply:
        query = (call.text("query") or "").casefold()
        found = [gl.member(n) for n in gl.people.members if query in n.casefold()]
        return Reply(body=found, paginate="")

    def list_labels(call: Call) -> Reply:
        found = [gl.label_payload(rec) for _, rec in sorted(gl.labels.items())]
        return Reply(body=found, paginate="")

    def create_label(call: Call) -> Reply:
        name = str(call.need("name"))
        color = call.text("color")
        if color is None:
            raise HttpError(400, "color is missing", body={"error": "color is missing"})
        if gl.people.level(call.user) < REPORTER:
            raise forbidden()
        if name in gl.labels:
            raise HttpError(409, "Label already exists")
        rec = gl.use_label(name)
        rec.color, rec.description = color, call.text("description")
        return Reply(201, gl.label_payload(rec))

    gl.route("GET", "/user", current_user, "users/current", project=False)
    gl.route("GET", "/users", list_users, "users/list", project=False)
    gl.route("GET", r"/users/(?P<user_id>\d+)", get_user, "users/get", project=False)
    gl.route("GET", "", get_project, "projects/get")
    gl.route("GET", r"/members/all/(?P<user_id>\d+)", get_member, "members/get-all")
    gl.route("GET", "/members/all", list_members, "members/list-all")
    gl.route("GET", "/labels", list_labels, "labels/list")
    gl.route("POST", "/labels", create_label, "labels/create")
