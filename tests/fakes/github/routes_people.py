"""People endpoints of the fake GitHub: a person's permission on the repository, and the token's
own user (``people.py`` holds who is who).

``GET /repos/{owner}/{repo}/collaborators/{username}/permission`` needs the "Metadata"
repository permission (read) of a fine-grained token or an App, as GitHub documents it; and the
token's user must have push access (a role of write or more), or GitHub refuses with 403 "Must
have push access to view collaborator permission.". ``GET /user`` names the token's user; an
App installation token has no user, and GitHub refuses it with 403 "Resource not accessible by
integration".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.clock import EPOCH_START, iso
from tests.fakes.github import payloads
from tests.fakes.github.people import flags
from tests.fakes.github.records import PUSHING_ROLES
from tests.fakes.github.server import Call
from tests.fakes.http import HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

NO_PUSH = "Must have push access to view collaborator permission."


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    def permission(call: Call) -> Reply:
        access = call.access
        if access is not None and access.kind != "classic" and access.level("metadata") == "none":
            raise HttpError(403, access.refusal)
        user_role = gh.people.role(call.login)
        if access is not None and access.kind != "app" and user_role not in PUSHING_ROLES:
            raise HttpError(403, NO_PUSH)
        username = call.params["username"]
        found = gh.people.permission(username)
        login = gh.people.login(username)
        if found is None or login is None:
            raise HttpError(404, f"{username} is not a user")
        level, role_name = found
        body = {
            "permission": level,
            "role_name": role_name,
            "user": collaborator(gh, login, role_name),
        }
        return Reply(body=body)

    def authenticated_user(call: Call) -> Reply:
        if call.access is not None and call.access.kind == "app":
            raise HttpError(403, call.access.refusal)
        return Reply(body=public_user(gh, call.login))

    router.add("GET", f"{prefix}/collaborators/(?P<username>[^/]+)/permission", permission,
               "repos/get-collaborator-permission-level")  # fmt: skip
    router.add("GET", "/user", authenticated_user, "users/get-authenticated")


def collaborator(gh: FakeGitHub, login: str, role_name: str) -> dict[str, Any]:
    """A ``Collaborator``: the user, with what their role lets them do."""
    granted = None if role_name == "none" else role_name
    return {**payloads.user(gh.urls, login), "permissions": flags(granted), "role_name": role_name}


def public_user(gh: FakeGitHub, login: str) -> dict[str, Any]:
    """A ``PublicUser``: the profile anyone may read (a token without the ``user`` scope gets no
    more of its own user)."""
    profile = dict.fromkeys(("name", "company", "blog", "location", "email", "hireable", "bio"))
    counts = dict.fromkeys(("public_repos", "public_gists", "followers", "following"), 0)
    stamps = {"created_at": iso(EPOCH_START), "updated_at": iso(EPOCH_START)}
    return {**payloads.user(gh.urls, login), **profile, **counts, **stamps}
