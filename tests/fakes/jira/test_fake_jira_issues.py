"""The fake Jira's issues as Jira answers them: creating and editing with its field checks,
transitions through the workflow, links (which end blocks which), comments and the history of
who changed what."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.jira import FakeJira
from tests.fakes.jira.richtext import adf
from tests.support.jira import jira_client, running_jira

NOT_ON_SCREEN = "Field 'priority' cannot be set. It is not on the appropriate screen, or unknown."
NOT_ADF = "Operation value must be an Atlassian Document (see the Atlassian Document Format)"


def new_issue(**fields: Any) -> dict[str, Any]:
    base = {"project": {"key": "PROJ"}, "summary": "A task", "issuetype": {"name": "Task"}}
    return {"fields": {**base, **fields}}


def test_creating_an_issue_with_labels_and_an_adf_description(fake_jira: FakeJira) -> None:
    with jira_client(fake_jira) as api:
        created = api.post("/issue", json=new_issue(description=adf("Do it"), labels=["cpe"]))
        assert created.status_code == 201
        key = created.json()["key"]
        issue = api.get(f"/issue/{key}").json()
    assert key == "PROJ-1"
    assert issue["fields"]["description"] == adf("Do it")
    assert issue["fields"]["labels"] == ["cpe"]
    assert issue["fields"]["status"]["name"] == "To Do"
    assert issue["fields"]["reporter"]["accountId"] == fake_jira.account_id("cpe-bot")
    assert issue["fields"]["updated"] == "2026-01-01T00:00:01.000+0000"


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        (
            {"labels": ["two words"]},
            {"labels": "The label 'two words' contains spaces which is invalid."},
        ),
        (
            {"description": "plain text"},
            {"description": NOT_ADF},
        ),
        ({"summary": ""}, {"summary": "You must specify a summary of the issue."}),
        ({"summary": "x" * 256}, {"summary": "Summary must be less than 255 characters."}),
        (
            {"priority": {"name": "High"}},
            {"priority": NOT_ON_SCREEN},
        ),
        ({"project": {"key": "NOPE"}}, {"project": "valid project is required"}),
        ({"issuetype": {"name": "Saga"}}, {"issuetype": "Specify an issue type"}),
    ],
)
def test_a_create_jira_refuses_names_the_field(
    fake_jira: FakeJira, fields: dict[str, Any], errors: dict[str, str]
) -> None:
    with jira_client(fake_jira) as api:
        refused = api.post("/issue", json=new_issue(**fields))
    assert refused.status_code == 400
    assert refused.json() == {"errorMessages": [], "errors": errors}
    assert fake_jira.issue_keys() == []


def test_data_center_keeps_descriptions_and_comments_as_wiki_markup(data_center: FakeJira) -> None:
    with jira_client(data_center, "pat-token") as api:
        key = api.post("/issue", json=new_issue(description="h1. Title\n*bold*")).json()["key"]
        refused = api.post("/issue", json=new_issue(description=adf("x")))
        api.post(f"/issue/{key}/comment", json={"body": "a {{code}} comment"})
        issue = api.get(f"/issue/{key}", params={"fields": "description,comment,reporter"}).json()
    assert refused.json()["errors"] == {"description": "Operation value must be a string"}
    assert issue["fields"]["description"] == "h1. Title\n*bold*"
    assert issue["fields"]["comment"]["comments"][0]["body"] == "a {{code}} comment"
    assert issue["fields"]["reporter"]["name"] == "cpe-bot"


def test_editing_labels_with_update_verbs_writes_who_did_it(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work", labels=["old"])
    fake_jira.add_label(key, "cpe-admit", by="alice")
    with jira_client(fake_jira) as api:
        update = {"labels": [{"add": "cpe-working"}, {"remove": "old"}]}
        assert api.put(f"/issue/{key}", json={"update": update}).status_code == 204
        both = api.put(f"/issue/{key}", json={"fields": {"labels": []}, "update": update})
        history = api.get(f"/issue/{key}/changelog").json()["values"]
    assert both.status_code == 400
    assert fake_jira.issue(key)["labels"] == ["cpe-admit", "cpe-working"]
    labels = [
        (g["author"]["accountId"], i["fromString"], i["toString"])
        for g in history
        for i in g["items"]
        if i["field"] == "labels"
    ]
    assert labels == [
        (fake_jira.account_id("alice"), "old", "cpe-admit old"),
        (fake_jira.account_id("cpe-bot"), "cpe-admit old", "cpe-admit cpe-working"),
    ]


def test_an_edit_that_changes_nothing_leaves_updated_alone(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work", labels=["a"])
    before = fake_jira.issue(key)["updated"]
    with jira_client(fake_jira) as api:
        api.put(f"/issue/{key}", json={"fields": {"labels": ["a"], "summary": "Work"}})
    assert fake_jira.issue(key)["updated"] == before
    assert fake_jira.issue(key)["history"] == []


def test_the_simplified_workflow_moves_anywhere_but_where_the_issue_is(
    fake_jira: FakeJira,
) -> None:
    key = fake_jira.open_issue("Work")
    with jira_client(fake_jira) as api:
        offered = api.get(f"/issue/{key}/transitions").json()["transitions"]
        assert [(t["id"], t["to"]["name"]) for t in offered] == [
            ("21", "In Progress"),
            ("31", "In Review"),
            ("41", "Done"),
        ]
        assert (
            api.post(f"/issue/{key}/transitions", json={"transition": {"id": "41"}}).status_code
            == 204
        )
        again = api.post(f"/issue/{key}/transitions", json={"transition": {"id": "41"}})
        nameless = api.post(f"/issue/{key}/transitions", json={"transition": {"id": "Done"}})
        done = api.get(
            f"/issue/{key}", params={"fields": "status,resolution,resolutiondate"}
        ).json()
    assert again.status_code == 400
    assert again.json()["errorMessages"] == ["Transition id '41' is not valid for this issue."]
    assert nameless.json()["errorMessages"] == ["'transition' identifier must be an integer"]
    assert done["fields"]["status"]["statusCategory"]["key"] == "done"
    assert done["fields"]["resolution"]["name"] == "Done"
    assert done["fields"]["resolutiondate"] is not None


def test_the_classic_workflow_refuses_a_step_not_offered_from_the_status() -> None:
    with running_jira(workflow="classic") as jira:
        key = jira.open_issue("Work")
        with jira_client(jira) as api:
            offered = api.get(f"/issue/{key}/transitions").json()["transitions"]
            skip = api.post(f"/issue/{key}/transitions", json={"transition": {"id": "51"}})
            start = api.post(f"/issue/{key}/transitions", json={"transition": {"id": "11"}})
        assert [t["name"] for t in offered] == ["Start Progress"]
        assert skip.status_code == 400
        assert skip.json()["errorMessages"] == ["Transition id '51' is not valid for this issue."]
        assert start.status_code == 204
        assert jira.status_of(key) == "In Progress"
        jira.transition(key, "Done")
        with pytest.raises(ValueError, match="no transition from Done to In Review"):
            jira.transition(key, "In Review")


def test_a_transition_may_carry_a_comment(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work")
    body = {"transition": {"id": "21"}, "update": {"comment": [{"add": {"body": adf("Started")}}]}}
    with jira_client(fake_jira) as api:
        assert api.post(f"/issue/{key}/transitions", json=body).status_code == 204
    assert [c["text"] for c in fake_jira.issue(key)["comments"]] == ["Started"]


def test_issue_link_inward_issue_is_the_one_that_blocks(fake_jira: FakeJira) -> None:
    blocker, blocked = fake_jira.open_issue("First"), fake_jira.open_issue("Then")
    link = {
        "type": {"name": "Blocks"},
        "inwardIssue": {"key": blocker},
        "outwardIssue": {"key": blocked},
    }
    with jira_client(fake_jira) as api:
        assert api.post("/issueLink", json=link).status_code == 201
        assert api.post("/issueLink", json=link).status_code == 201  # a duplicate: quietly fine
        first = api.get(f"/issue/{blocker}", params={"fields": "issuelinks"}).json()
        then = api.get(f"/issue/{blocked}", params={"fields": "issuelinks"}).json()
        unknown = api.post("/issueLink", json={**link, "type": {"name": "Nope"}})
    assert [ln["outwardIssue"]["key"] for ln in first["fields"]["issuelinks"]] == [blocked]
    assert [ln["inwardIssue"]["key"] for ln in then["fields"]["issuelinks"]] == [blocker]
    assert fake_jira.issue(blocked)["blocked_by"] == [blocker]
    assert unknown.status_code == 404


def test_a_new_issue_can_be_created_blocked_by_another(fake_jira: FakeJira) -> None:
    blocker = fake_jira.open_issue("First")
    add = {"add": {"type": {"name": "Blocks"}, "inwardIssue": {"key": blocker}}}
    with jira_client(fake_jira) as api:
        created = api.post("/issue", json={**new_issue(), "update": {"issuelinks": [add]}})
    assert fake_jira.issue(created.json()["key"])["blocked_by"] == [blocker]


def test_linking_without_the_link_permission_is_jiras_404() -> None:
    with running_jira(tokens={"test-token": "cpe-bot"}) as jira:
        a, b = jira.open_issue("A"), jira.open_issue("B")
        jira.revoke("LINK_ISSUES", "jira-software-users")
        link = {"type": {"name": "Blocks"}, "inwardIssue": {"key": a}, "outwardIssue": {"key": b}}
        with jira_client(jira) as api:
            refused = api.post("/issueLink", json=link)
        assert refused.status_code == 404
        assert refused.json()["errorMessages"] == [f"No Link Issue Permission for issue '{a}'."]
        with pytest.raises(ValueError, match="alice cannot link issues"):
            jira.link(a, b)


def test_comments_page_and_order(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work")
    for n in range(3):
        fake_jira.comment(key, f"note {n}", by="bob")
    with jira_client(fake_jira) as api:
        page = api.get(
            f"/issue/{key}/comment", params={"maxResults": 2, "orderBy": "-created"}
        ).json()
        added = api.post(f"/issue/{key}/comment", json={"body": adf("mine")})
        empty = api.post(f"/issue/{key}/comment", json={"body": ""})
    assert (page["total"], page["maxResults"], page["startAt"]) == (3, 2, 0)
    assert [c["body"] for c in page["comments"]] == [adf("note 2"), adf("note 1")]
    assert added.status_code == 201
    assert added.json()["author"]["accountId"] == fake_jira.account_id("cpe-bot")
    assert empty.status_code == 400


def test_an_unknown_or_deleted_issue_is_jiras_404(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Soon gone")
    fake_jira.delete_issue(key)
    with jira_client(fake_jira) as api:
        for path in (f"/issue/{key}", "/issue/PROJ-99/transitions", "/issue/PROJ-99/comment"):
            answer = api.get(path)
            assert answer.status_code == 404
            assert answer.json()["errorMessages"] == [
                "Issue does not exist or you do not have permission to see it."
            ]


def test_fields_and_expand_choose_what_an_issue_carries(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work", "text")
    fake_jira.add_label(key, "x")
    with jira_client(fake_jira) as api:
        some = api.get(f"/issue/{key}", params={"fields": "summary,labels"}).json()
        most = api.get(f"/issue/{key}", params={"fields": "*navigable,-description"}).json()
        logged = api.get(f"/issue/{key}", params={"fields": "labels", "expand": "changelog"}).json()
    assert set(some["fields"]) == {"summary", "labels"}
    assert "description" not in most["fields"]
    assert "comment" not in most["fields"]
    assert "status" in most["fields"]
    assert logged["changelog"]["histories"][0]["items"][0]["field"] == "labels"


def test_helpers_refuse_what_jira_would(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work")
    with pytest.raises(ValueError, match="labels hold no spaces"):
        fake_jira.add_label(key, "two words")
    fake_jira.remove_from_group("bob", "jira-software-users")
    with pytest.raises(ValueError, match="bob cannot create issues"):
        fake_jira.open_issue("Nope", by="bob")


@pytest.mark.parametrize(
    "node",
    [
        {"type": "html", "text": "<!-- marker -->"},
        {"type": "paragraph", "content": [{"type": "text", "text": ""}]},
        {
            "type": "paragraph",
            "content": [{"type": "text", "text": "x", "marks": [{"type": "bold"}]}],
        },
        {
            "type": "paragraph",
            "content": [{"type": "text", "text": "x", "marks": [{"type": "link"}]}],
        },
    ],
    ids=["an unknown node", "an empty text", "an unknown mark", "a link without href"],
)
def test_a_document_adf_does_not_allow_is_refused(
    fake_jira: FakeJira, node: dict[str, Any]
) -> None:
    doc = {"type": "doc", "version": 1, "content": [node]}
    with jira_client(fake_jira) as api:
        refused = api.post("/issue", json=new_issue(description=doc))
    assert refused.status_code == 400
    assert refused.json()["errors"] == {"description": NOT_ADF}


def test_overriding_the_edit_screen_takes_an_administrator() -> None:
    with running_jira(tokens={"test-token": "cpe-bot", "admin-token": "admin"}) as jira:
        key = jira.open_issue("Work")
        edit = {"fields": {"summary": "Renamed"}}
        flags = {"overrideScreenSecurity": "true"}
        with jira_client(jira) as api:
            refused = api.put(f"/issue/{key}", json=edit, params=flags)
            quiet = api.put(f"/issue/{key}", json=edit, params={"notifyUsers": "false"})
        with jira_client(jira, "admin-token") as admin:
            allowed = admin.put(
                f"/issue/{key}", json={"fields": {"summary": "Again"}}, params=flags
            )
        assert refused.status_code == 403
        assert quiet.status_code == 204  # not an administrator's: the flag is ignored
        assert allowed.status_code == 204
        assert jira.issue(key)["summary"] == "Again"
