"""The fake Jira's people, groups and permissions as Jira answers them: what the provider's
trust checks can read, and what Jira keeps from someone who is not an administrator."""

from __future__ import annotations

from tests.fakes.jira import FakeJira
from tests.support.jira import jira_client, running_jira


def test_a_users_groups_by_account_id(fake_jira: FakeJira) -> None:
    alice = fake_jira.account_id("alice")
    with jira_client(fake_jira) as api:
        groups = api.get("/user/groups", params={"accountId": alice}).json()
        user = api.get("/user", params={"accountId": alice, "expand": "groups"}).json()
        nobody = api.get("/user/groups", params={"accountId": "557058:nobody"})
        nameless = api.get("/user/groups")
    assert [g["name"] for g in groups] == ["developers", "jira-software-users"]
    assert all(g["groupId"] for g in groups)
    assert [g["name"] for g in user["groups"]["items"]] == ["developers", "jira-software-users"]
    assert "emailAddress" not in user  # another user's email is private on Cloud
    assert nobody.status_code == 404
    assert nameless.status_code == 400


def test_data_center_names_users_by_username(data_center: FakeJira) -> None:
    with jira_client(data_center, "pat-token") as api:
        groups = api.get("/user/groups", params={"username": "alice"}).json()
        user = api.get("/user", params={"username": "ALICE"}).json()
    assert [g["name"] for g in groups] == ["developers", "jira-software-users"]
    assert "groupId" not in groups[0]
    assert (user["name"], user["emailAddress"]) == ("alice", "alice@example.com")


def test_group_members_and_others_permissions_are_for_administrators() -> None:
    tokens = {"test-token": "cpe-bot", "admin-token": "admin"}
    with running_jira(tokens=tokens) as jira:
        check = {
            "accountId": jira.account_id("bob"),
            "projectPermissions": [{"permissions": ["EDIT_ISSUES"], "projects": [10000]}],
        }
        with jira_client(jira) as api:
            members = api.get("/group/member", params={"groupname": "developers"})
            others = api.post("/permissions/check", json=check)
            own = api.post(
                "/permissions/check", json={k: v for k, v in check.items() if k != "accountId"}
            )
        with jira_client(jira, "admin-token") as admin:
            listed = admin.get("/group/member", params={"groupname": "developers"}).json()
            granted = admin.post("/permissions/check", json=check).json()
        assert members.status_code == 403
        assert others.status_code == 403
        assert others.json()["errorMessages"] == [
            "Only Jira administrators can perform this operation."
        ]
        assert own.json()["projectPermissions"] == [
            {"permission": "EDIT_ISSUES", "projects": [10000], "issues": []}
        ]
        assert [u["accountId"] for u in listed["values"]] == [jira.account_id("alice")]
        assert granted["projectPermissions"][0]["permission"] == "EDIT_ISSUES"


def test_my_permissions_and_who_holds_a_permission(fake_jira: FakeJira) -> None:
    fake_jira.revoke("EDIT_ISSUES", "jira-software-users")
    fake_jira.grant("EDIT_ISSUES", "developers")
    with jira_client(fake_jira) as api:
        mine = api.get(
            "/mypermissions",
            params={"projectKey": "PROJ", "permissions": "EDIT_ISSUES,BROWSE_PROJECTS"},
        ).json()["permissions"]
        holders = api.get(
            "/user/permission/search", params={"permissions": "EDIT_ISSUES", "projectKey": "PROJ"}
        ).json()
        unknown = api.get("/mypermissions", params={"permissions": "FLY"})
    assert mine["EDIT_ISSUES"]["havePermission"] is False
    assert mine["BROWSE_PROJECTS"]["havePermission"] is True
    holding = [fake_jira.account_id(n) for n in ("admin", "alice")]  # administrators hold all
    assert [u["accountId"] for u in holders] == holding
    assert unknown.status_code == 400


def test_a_deactivated_users_token_no_longer_works() -> None:
    with running_jira(tokens={"test-token": "cpe-bot"}) as jira:
        jira.deactivate("cpe-bot")
        with jira_client(jira) as api:
            assert api.get("/myself").status_code == 401


def test_labels_across_the_project(fake_jira: FakeJira) -> None:
    fake_jira.open_issue("One", labels=["b", "a"])
    fake_jira.open_issue("Two", labels=["c"])
    with jira_client(fake_jira) as api:
        page = api.get("/label", params={"maxResults": 2}).json()
    assert (page["values"], page["total"], page["isLast"]) == (["a", "b"], 3, False)
