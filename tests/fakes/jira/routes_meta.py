"""The fake Jira's site-wide resources: who is calling, the server, the project with its
statuses, link types and labels, users and their groups, and permissions.

Who may see what, as on Jira: a project (and its statuses) is a 404 for someone without *Browse
projects*; another user's groups and the users holding a permission need *Browse users and
groups* (``USER_PICKER``, every member of the users group); a group's members and another
user's permissions (``POST /permissions/check`` with an ``accountId``) need *Administer Jira*
(the administrators group), 403 otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.http import Reply
from tests.fakes.jira.records import GLOBAL_PERMISSIONS, PROJECT_PERMISSIONS, USERS_GROUP, User
from tests.fakes.jira.server import Call, jira_error

if TYPE_CHECKING:
    from tests.fakes.jira.fake import FakeJira

PERMISSION_NAMES = {key: key.replace("_", " ").title() for key in PROJECT_PERMISSIONS}


def register(jira: FakeJira) -> None:
    site = jira.site
    api = jira.api_prefix

    def no_project(key: str) -> Exception:
        return jira_error(404, f"No project could be found with key '{key}'.")

    def project_or_404(call: Call) -> None:
        wanted = call.params["project"]
        if wanted.upper() not in (site.project_key, site.project_id) or not site.may(
            call.user, "BROWSE_PROJECTS"
        ):
            raise no_project(wanted)

    def myself(call: Call) -> Reply:
        return Reply(body=jira.view(call).user(site.users[call.user], full=True))

    def server_info(call: Call) -> Reply:
        cloud = site.deployment == "cloud"
        body: dict[str, Any] = {
            "baseUrl": jira.base_url,
            "displayUrl": jira.base_url,
            "version": "1001.0.0-SNAPSHOT" if cloud else "9.12.4",
            "versionNumbers": [1001, 0, 0] if cloud else [9, 12, 4],
            "deploymentType": "Cloud" if cloud else "Server",
            "buildNumber": 100264 if cloud else 9120004,
            "buildDate": "2026-11-20T00:00:00.000+0000",
            "serverTime": jira.view(call).date(site.clock),
            "scmInfo": "9d700605f271b9e38f3e73c4116a686dae8d11d7",
            "serverTitle": "Jira",
        }
        return Reply(body=body)

    def project(call: Call) -> Reply:
        project_or_404(call)
        return Reply(body=jira.view(call).project())

    def statuses(call: Call) -> Reply:
        project_or_404(call)
        return Reply(body=jira.view(call).project_statuses())

    def link_types(call: Call) -> Reply:
        view = jira.view(call)
        return Reply(body={"issueLinkTypes": [view.link_type(t) for t in site.link_types]})

    def labels(call: Call) -> Reply:
        start, limit = call.int_arg("startAt", 0), min(call.int_arg("maxResults", 1000), 1000)
        every = site.labels()
        chunk = every[start : start + limit]
        return Reply(
            body={
                "self": f"{jira.base_url}{api}/label?maxResults={limit}&startAt={start}",
                "maxResults": limit,
                "startAt": start,
                "total": len(every),
                "isLast": start + limit >= len(every),
                "values": chunk,
            }
        )

    def find_user(call: Call) -> User:
        account = call.arg("accountId")
        name = call.arg("username") or call.arg("key")
        if site.deployment == "cloud":
            if not account:
                raise jira_error(400, "The query parameter 'accountId' is required.")
            found = site.by_account(account)
        else:
            if not name:
                raise jira_error(400, "The username query parameter was not provided")
            found = site.by_username(name)
        if found is None:
            who = account or name
            raise jira_error(
                404,
                f"The user with account ID '{who}' does not exist"
                if site.deployment == "cloud"
                else f"The user named '{who}' does not exist",
            )
        return found

    def need_user_picker(call: Call) -> None:
        if not (site.users[call.user].groups & {USERS_GROUP} or site.is_admin(call.user)):
            raise jira_error(
                403, "You do not have the permission to see the specified user's groups."
            )

    def get_user(call: Call) -> Reply:
        need_user_picker(call)
        user = find_user(call)
        body = jira.view(call).user(user, full=True)
        if site.deployment == "cloud" and call.user != user.name:
            body.pop("emailAddress", None)  # the profile's privacy: hidden from others
        if "groups" in (call.arg("expand") or "").split(","):
            view = jira.view(call)
            items = [view.group(g) for g in sorted(user.groups)]
            body["groups"] = {"size": len(items), "items": items}
        return Reply(body=body)

    def user_groups(call: Call) -> Reply:
        need_user_picker(call)
        user = find_user(call)
        view = jira.view(call)
        return Reply(body=[view.group(g) for g in sorted(user.groups)])

    def group_members(call: Call) -> Reply:
        if not site.is_admin(call.user):
            raise jira_error(403, "You do not have permission to view the members of this group.")
        name = call.arg("groupname")
        group_id = call.arg("groupId")
        if name is None and group_id is not None:
            name = next((n for n, i in site.groups.items() if i == group_id), None)
        if name is None or name not in site.groups:
            raise jira_error(404, f"Group '{name or group_id}' does not exist.")
        members = sorted((u for u in site.users.values() if name in u.groups), key=lambda u: u.name)
        start, limit = call.int_arg("startAt", 0), min(call.int_arg("maxResults", 50), 50)
        view = jira.view(call)
        chunk = members[start : start + limit]
        return Reply(
            body={
                "self": f"{jira.base_url}{api}/group/member?groupname={name}",
                "maxResults": limit,
                "startAt": start,
                "total": len(members),
                "isLast": start + limit >= len(members),
                "values": [view.user(u) for u in chunk],
            }
        )

    def permission_keys(text: str | None) -> list[str]:
        keys = [k.strip() for k in (text or "").split(",") if k.strip()]
        if not keys:
            raise jira_error(400, "The permissions query parameter is required.")
        unknown = [k for k in keys if k not in PROJECT_PERMISSIONS + GLOBAL_PERMISSIONS]
        if unknown:
            raise jira_error(400, f"Permission '{unknown[0]}' does not exist.")
        return keys

    def holds(name: str | None, key: str) -> bool:
        if key == "ADMINISTER":
            return site.is_admin(name)
        if key == "USER_PICKER":
            return name is not None and bool(site.users[name].groups & {USERS_GROUP})
        return site.may(name, key)

    def my_permissions(call: Call) -> Reply:
        keys = permission_keys(call.arg("permissions"))
        project = call.arg("projectKey") or call.arg("projectId")
        issue = call.arg("issueKey") or call.arg("issueId")
        if project is not None and project.upper() not in (site.project_key, site.project_id):
            raise jira_error(404, f"No project could be found with key '{project}'.")
        if issue is not None and site.issue(issue) is None:
            raise jira_error(404, "Issue does not exist or you do not have permission to see it.")
        body = {
            key: {
                "id": str(10 + n),
                "key": key,
                "name": PERMISSION_NAMES.get(key, key.title()),
                "type": "GLOBAL" if key in GLOBAL_PERMISSIONS else "PROJECT",
                "description": "",
                "havePermission": holds(call.user, key),
            }
            for n, key in enumerate(keys)
        }
        return Reply(body={"permissions": body})

    def permissions_check(call: Call) -> Reply:
        body = call.body if isinstance(call.body, dict) else {}
        account = body.get("accountId")
        subject = call.user
        if account is not None:
            if not site.is_admin(call.user):
                raise jira_error(403, "Only Jira administrators can perform this operation.")
            found = site.by_account(str(account))
            if found is None:
                raise jira_error(400, errors={"accountId": "The user does not exist."})
            subject = found.name
        granted_global = [k for k in body.get("globalPermissions", []) if holds(subject, k)]
        grants = []
        for entry in body.get("projectPermissions", []):
            for key in entry.get("permissions", []):
                if key not in PROJECT_PERMISSIONS:
                    raise jira_error(400, errors={key: "Unrecognized permission"})
                projects = [p for p in entry.get("projects", []) if str(p) == site.project_id]
                issues = [
                    n
                    for n in entry.get("issues", [])
                    if any(i.id == str(n) for i in site.issues.values())
                ]
                if site.may(subject, key):
                    grants.append({"permission": key, "projects": projects, "issues": issues})
        return Reply(body={"globalPermissions": granted_global, "projectPermissions": grants})

    def users_with_permission(call: Call) -> Reply:
        need_user_picker(call)
        keys = permission_keys(call.arg("permissions"))
        project = call.arg("projectKey")
        issue_key = call.arg("issueKey")
        if project is None and issue_key is None:
            raise jira_error(400, "Either the projectKey or the issueKey must be provided.")
        query = (call.arg("query") or call.arg("username") or "").casefold()
        account = call.arg("accountId")
        view = jira.view(call)
        found = [
            view.user(u)
            for u in sorted(site.users.values(), key=lambda u: u.name)
            if all(site.may(u.name, k) for k in keys)
            and (account is None or u.account_id == account)
            and (not query or query in u.display_name.casefold() or query in u.name.casefold())
        ]
        start, limit = call.int_arg("startAt", 0), call.int_arg("maxResults", 50)
        return Reply(body=found[start : start + limit])

    jira.route("GET", f"{api}/myself", myself, "getCurrentUser")
    jira.route("GET", f"{api}/serverInfo", server_info, "getServerInfo")
    jira.route("GET", f"{api}/project/(?P<project>[^/]+)", project, "getProject")
    jira.route("GET", f"{api}/project/(?P<project>[^/]+)/statuses", statuses, "getAllStatuses")
    jira.route("GET", f"{api}/issueLinkType", link_types, "getIssueLinkTypes")
    jira.route("GET", f"{api}/label", labels, "getAllLabels")
    jira.route("GET", f"{api}/user", get_user, "getUser")
    jira.route("GET", f"{api}/user/groups", user_groups, "getUserGroups")
    jira.route("GET", f"{api}/group/member", group_members, "getUsersFromGroup")
    jira.route("GET", f"{api}/mypermissions", my_permissions, "getMyPermissions")
    jira.route("POST", f"{api}/permissions/check", permissions_check, "getBulkPermissions")
    jira.route(
        "GET", f"{api}/user/permission/search", users_with_permission, "findUsersWithAllPermissions"
    )
