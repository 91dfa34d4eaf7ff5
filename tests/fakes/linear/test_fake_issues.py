"""The fake Linear's issues as Linear keeps them: looked up by id or identifier, created and
edited through the mutations (states, labels, history, ``updatedAt``), related (``relations``
from the blocker, ``inverseRelations`` on the blocked), commented, archived, and seen only by
who may see their team."""

from typing import Any

import pytest

from tests.fakes.linear.fake import GUEST, FakeLinear
from tests.support.linear import graphql

ISSUE = """
query Issue($id: String!) {
  issue(id: $id) {
    id identifier title description url createdAt updatedAt completedAt canceledAt startedAt
    archivedAt trashed
    state { id name type }
    labels(first: 20) { nodes { id name } }
    creator { email guest }
    relations(first: 10) { nodes { type relatedIssue { identifier } } }
    inverseRelations(first: 10) { nodes { type issue { identifier state { type } } } }
    history(first: 20) {
      nodes { addedLabelIds removedLabelIds fromStateId toStateId actor { email } }
    }
    comments(first: 10) { nodes { body user { email } } }
  }
}
"""
CREATE = """
mutation Create($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { id identifier state { name } labelIds } }
}
"""
UPDATE = """
mutation Update($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success issue { updatedAt state { name } } }
}
"""


def ok(response: Any) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == 200, body
    return body["data"]  # type: ignore[no-any-return]


def refused(response: Any) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == 400, body
    return body["errors"][0]  # type: ignore[no-any-return]


def issue(linear: FakeLinear, ref: str) -> dict[str, Any]:
    return ok(graphql(linear, ISSUE, {"id": ref}))["issue"]  # type: ignore[no-any-return]


def state_id(linear: FakeLinear, name: str) -> str:
    query = (
        'query { teams(filter: {key: {eq: "ENG"}}, first: 1) '
        "{ nodes { states { nodes { id name } } } } }"
    )
    states = ok(graphql(linear, query))["teams"]["nodes"][0]["states"]["nodes"]
    return next(s["id"] for s in states if s["name"] == name)


def test_an_issue_is_found_by_its_identifier_in_any_case_or_by_its_id(
    fake_linear: FakeLinear,
) -> None:
    key = fake_linear.open_issue("Add a widget", "Please.")
    by_key = issue(fake_linear, key)
    assert by_key["identifier"] == "ENG-1"
    assert by_key["url"] == "https://linear.app/acme/issue/ENG-1/add-a-widget"
    assert issue(fake_linear, "eng-1") == by_key
    assert issue(fake_linear, by_key["id"]) == by_key
    assert by_key["creator"] == {"email": "someone@example.com", "guest": False}
    assert by_key["state"]["name"] == "Backlog"


def test_an_unknown_issue_is_entity_not_found(fake_linear: FakeLinear) -> None:
    error = refused(graphql(fake_linear, ISSUE, {"id": "ENG-404"}))
    assert error["message"] == "Entity not found: Issue"
    assert error["extensions"]["code"] == "INPUT_ERROR"
    assert error["path"] == ["issue"]


def test_issue_create_numbers_the_issue_and_starts_it_in_backlog(
    fake_linear: FakeLinear,
) -> None:
    label = fake_linear.create_label("cpe")
    made = ok(
        graphql(
            fake_linear,
            CREATE,
            {"input": {"teamId": fake_linear.team_id, "title": "T", "labelIds": [label]}},
        )
    )["issueCreate"]
    assert made["success"] is True
    assert made["issue"]["identifier"] == "ENG-1"
    assert made["issue"]["state"]["name"] == "Backlog"
    assert made["issue"]["labelIds"] == [label]
    stored = fake_linear.issue("ENG-1")
    assert (stored["creator"], stored["labels"]) == ("cpe@example.com", ["cpe"])
    # The labels it was created with are in its history, added by its creator.
    history = issue(fake_linear, "ENG-1")["history"]["nodes"]
    assert [(h["addedLabelIds"], h["actor"]["email"]) for h in history] == [
        ([label], "cpe@example.com")
    ]


def test_a_client_may_choose_the_new_issues_id_once(fake_linear: FakeLinear) -> None:
    chosen = "0b9c2a54-4d3e-4c41-9d1b-4f0a8f6c2e11"
    payload = {"input": {"teamId": fake_linear.team_id, "title": "T", "id": chosen}}
    assert ok(graphql(fake_linear, CREATE, payload))["issueCreate"]["issue"]["id"] == chosen
    again = refused(graphql(fake_linear, CREATE, payload))
    assert "already exists" in again["message"]
    assert fake_linear.identifiers() == ["ENG-1"]


def test_an_unmodelled_input_field_is_refused_not_ignored(fake_linear: FakeLinear) -> None:
    error = refused(
        graphql(
            fake_linear,
            CREATE,
            {"input": {"teamId": fake_linear.team_id, "title": "T", "cycleId": "c"}},
        )
    )
    assert error["extensions"]["code"] == "FAKE_NOT_IMPLEMENTED"
    assert "IssueCreateInput.cycleId" in error["message"]
    assert fake_linear.identifiers() == []


def test_a_state_change_stamps_the_issue_and_its_history(fake_linear: FakeLinear) -> None:
    key = fake_linear.open_issue("T")
    before = issue(fake_linear, key)
    done = state_id(fake_linear, "Done")
    moved = ok(graphql(fake_linear, UPDATE, {"id": key, "input": {"stateId": done}}))
    assert moved["issueUpdate"]["issue"]["state"]["name"] == "Done"
    after = issue(fake_linear, key)
    assert after["updatedAt"] > before["updatedAt"]
    assert after["completedAt"] == after["updatedAt"]
    assert [(h["fromStateId"], h["toStateId"]) for h in after["history"]["nodes"]] == [
        (before["state"]["id"], done)
    ]
    # Back to work: no longer completed, started once.
    ok(
        graphql(
            fake_linear,
            UPDATE,
            {"id": key, "input": {"stateId": state_id(fake_linear, "In Progress")}},
        )
    )
    again = issue(fake_linear, key)
    assert again["completedAt"] is None
    assert again["startedAt"] is not None


def test_a_no_op_edit_leaves_updated_at_alone(fake_linear: FakeLinear) -> None:
    key = fake_linear.open_issue("T", "body")
    before = issue(fake_linear, key)["updatedAt"]
    ok(graphql(fake_linear, UPDATE, {"id": key, "input": {"title": "T", "description": "body"}}))
    assert issue(fake_linear, key)["updatedAt"] == before


def test_a_refused_edit_changes_nothing(fake_linear: FakeLinear) -> None:
    fake_linear.add_team("OPS", "Operations")
    key = fake_linear.open_issue("T")
    other_team_state = next(
        s.id
        for s in fake_linear.workspace.states.values()
        if s.team_id != fake_linear.team_id and s.name == "Done"
    )
    error = refused(
        graphql(
            fake_linear, UPDATE, {"id": key, "input": {"title": "new", "stateId": other_team_state}}
        )
    )
    assert "not a workflow state of the team ENG" in error["extensions"]["userPresentableMessage"]
    assert fake_linear.issue(key)["title"] == "T"
    assert fake_linear.issue(key)["state"] == "Backlog"


def test_labels_are_added_and_removed_by_id_with_their_history(fake_linear: FakeLinear) -> None:
    key = fake_linear.open_issue("T", labels=["a"])
    b = fake_linear.create_label("b")
    a = fake_linear.workspace.find_label(fake_linear.workspace.teams[fake_linear.team_id], "a")
    assert a is not None
    ok(
        graphql(
            fake_linear,
            UPDATE,
            {"id": key, "input": {"addedLabelIds": [b], "removedLabelIds": [a.id]}},
        )
    )
    assert fake_linear.issue(key)["labels"] == ["b"]
    latest = issue(fake_linear, key)["history"]["nodes"][0]  # newest first
    assert (latest["addedLabelIds"], latest["removedLabelIds"]) == ([b], [a.id])
    both = refused(
        graphql(
            fake_linear, UPDATE, {"id": key, "input": {"labelIds": [a.id], "addedLabelIds": [b]}}
        )
    )
    assert "not both" in both["extensions"]["userPresentableMessage"]


def test_a_label_added_by_someone_names_them_in_the_history(fake_linear: FakeLinear) -> None:
    key = fake_linear.open_issue("T", as_user=GUEST)
    fake_linear.add_label(key, "cpe:admit", by="someone@example.com")
    seen = issue(fake_linear, key)
    assert seen["creator"]["guest"] is True
    label_id = seen["labels"]["nodes"][0]["id"]
    assert [(h["addedLabelIds"], h["actor"]["email"]) for h in seen["history"]["nodes"]] == [
        ([label_id], "someone@example.com")
    ]


RELATE = """
mutation Relate($input: IssueRelationCreateInput!) {
  issueRelationCreate(input: $input) { success issueRelation { id type } }
}
"""


def test_a_blocks_relation_is_a_relation_of_the_blocker_and_an_inverse_one_of_the_blocked(
    fake_linear: FakeLinear,
) -> None:
    blocker, blocked = fake_linear.open_issue("first"), fake_linear.open_issue("second")
    before = issue(fake_linear, blocked)["updatedAt"]
    made = ok(
        graphql(
            fake_linear,
            RELATE,
            {"input": {"issueId": blocker, "relatedIssueId": blocked, "type": "blocks"}},
        )
    )["issueRelationCreate"]
    assert made["issueRelation"]["type"] == "blocks"
    assert issue(fake_linear, blocker)["relations"]["nodes"] == [
        {"type": "blocks", "relatedIssue": {"identifier": blocked}}
    ]
    assert issue(fake_linear, blocker)["inverseRelations"]["nodes"] == []
    seen = issue(fake_linear, blocked)
    assert seen["inverseRelations"]["nodes"] == [
        {"type": "blocks", "issue": {"identifier": blocker, "state": {"type": "backlog"}}}
    ]
    assert seen["updatedAt"] > before  # a relation change moves both issues
    again = refused(
        graphql(
            fake_linear,
            RELATE,
            {"input": {"issueId": blocker, "relatedIssueId": blocked, "type": "blocks"}},
        )
    )
    assert "related already" in again["extensions"]["userPresentableMessage"]
    gone = ok(
        graphql(
            fake_linear,
            "mutation D($id: String!) { issueRelationDelete(id: $id) { success entityId } }",
            {"id": made["issueRelation"]["id"]},
        )
    )
    assert gone["issueRelationDelete"]["success"] is True
    assert fake_linear.issue(blocked)["blocked_by"] == []


def test_a_comment_is_kept_on_the_issue_without_moving_its_updated_at(
    fake_linear: FakeLinear,
) -> None:
    key = fake_linear.open_issue("T")
    before = issue(fake_linear, key)["updatedAt"]
    chosen = "4a3c9a1e-2f7d-4b8e-8c6f-2d1e0b9a7c55"
    made = ok(
        graphql(
            fake_linear,
            "mutation C($input: CommentCreateInput!) { commentCreate(input: $input) "
            "{ success comment { id url } } }",
            {"input": {"issueId": key, "body": "hello", "id": chosen}},
        )
    )["commentCreate"]["comment"]
    assert made["id"] == chosen
    assert made["url"].startswith("https://linear.app/acme/issue/ENG-1/t#comment-")
    seen = issue(fake_linear, key)
    assert seen["comments"]["nodes"] == [{"body": "hello", "user": {"email": "cpe@example.com"}}]
    assert seen["updatedAt"] == before
    found = ok(
        graphql(
            fake_linear,
            "query F($id: ID!) { comments(filter: {id: {eq: $id}}, first: 1) { nodes { id } } }",
            {"id": chosen},
        )
    )
    assert found["comments"]["nodes"] == [{"id": chosen}]


def test_a_label_name_is_taken_once_in_a_team(fake_linear: FakeLinear) -> None:
    create = (
        "mutation L($input: IssueLabelCreateInput!) { issueLabelCreate(input: $input) "
        "{ success issueLabel { id name team { key } } } }"
    )
    made = ok(
        graphql(fake_linear, create, {"input": {"name": "cpe", "teamId": fake_linear.team_id}})
    )
    assert made["issueLabelCreate"]["issueLabel"]["team"] == {"key": "ENG"}
    error = refused(
        graphql(fake_linear, create, {"input": {"name": "CPE", "teamId": fake_linear.team_id}})
    )
    assert "already exists" in error["extensions"]["userPresentableMessage"]


@pytest.mark.parametrize("trash", [False, True])
def test_archived_and_trashed_issues_are_left_out_unless_asked_for(
    fake_linear: FakeLinear, trash: bool
) -> None:
    kept, gone = fake_linear.open_issue("kept"), fake_linear.open_issue("gone")
    archived = ok(
        graphql(
            fake_linear,
            "mutation A($id: String!, $trash: Boolean) { issueArchive(id: $id, trash: $trash) "
            "{ success entity { identifier archivedAt trashed } } }",
            {"id": gone, "trash": trash},
        )
    )["issueArchive"]["entity"]
    assert archived["archivedAt"] is not None
    assert archived["trashed"] is (True if trash else None)
    listing = "query L($all: Boolean) { issues(includeArchived: $all) { nodes { identifier } } }"
    default = ok(graphql(fake_linear, listing))["issues"]["nodes"]
    assert [n["identifier"] for n in default] == [kept]
    every = ok(graphql(fake_linear, listing, {"all": True}))["issues"]["nodes"]
    assert [n["identifier"] for n in every] == [gone, kept]
    assert issue(fake_linear, gone)["archivedAt"] is not None  # by id: still there


def test_a_guest_sees_only_the_teams_they_were_invited_to(fake_linear: FakeLinear) -> None:
    fake_linear.add_team("OPS", "Operations")
    fake_linear.open_issue("ops work", team="OPS", as_user="cpe@example.com")
    fake_linear.open_issue("eng work")
    fake_linear.add_token("lin_api_guest", GUEST)
    teams = ok(graphql(fake_linear, "{ teams { nodes { key } } }", authorization="lin_api_guest"))
    assert teams["teams"]["nodes"] == [{"key": "ENG"}]
    assert (
        refused(graphql(fake_linear, ISSUE, {"id": "OPS-1"}, authorization="lin_api_guest"))[
            "message"
        ]
        == "Entity not found: Issue"
    )
    member = ok(graphql(fake_linear, "{ teams { nodes { key } } }"))["teams"]["nodes"]
    assert {t["key"] for t in member} == {"ENG", "OPS"}


def test_team_members_are_its_members_with_their_guest_flag(fake_linear: FakeLinear) -> None:
    query = (
        "query M($id: String!) { team(id: $id) { members(first: 50) "
        "{ nodes { email guest active } } } }"
    )
    members = ok(graphql(fake_linear, query, {"id": fake_linear.team_id}))["team"]["members"]
    assert sorted((m["email"], m["guest"]) for m in members["nodes"]) == [
        ("cpe@example.com", False),
        ("guest@example.com", True),
        ("someone@example.com", False),
    ]


def test_html_comments_do_not_survive_in_descriptions_or_comments(fake_linear: FakeLinear) -> None:
    made = ok(
        graphql(
            fake_linear,
            CREATE,
            {
                "input": {
                    "teamId": fake_linear.team_id,
                    "title": "T",
                    "description": "Visible.\n<!-- cpe:key=abc -->\nAlso visible.",
                }
            },
        )
    )["issueCreate"]["issue"]
    assert fake_linear.issue(made["identifier"])["description"] == "Visible.\n\nAlso visible."
    fake_linear.comment(made["identifier"], "said <!-- hidden -->")
    assert fake_linear.comments(made["identifier"]) == [("someone@example.com", "said ")]
