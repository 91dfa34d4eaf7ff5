"""Descriptions and comments: Markdown in, ADF (Cloud) or wiki markup (Data Center) on Jira,
Markdown out; cpe's key rides in a last ``cpe-key:`` line the reader takes off; comments are
made once per key."""

from __future__ import annotations

from domain.models import WorkItemId
from tests.fakes.jira import BOT, TEAMMATE, FakeJira
from tests.support.jira_provider import jira_provider

BODY = "Make the parser keep tabs.\n\nIt drops them today."


def test_a_created_description_is_jira_s_format_and_reads_back_without_the_key(
    jira: FakeJira,
) -> None:
    with jira_provider(jira) as provider:
        key = provider.work_item_writer.create_work_item("Tabs", BODY, idempotency_key="plan:3:a")
        assert provider.work_item_reader.get_work_item_body(key) == BODY
    stored = jira.issue(key)
    if jira.deployment == "cloud":
        doc = stored["description"]
        assert doc["type"] == "doc"
        assert doc["content"][-1] == {
            "type": "paragraph",
            "content": [{"type": "text", "text": "cpe-key: plan:3:a"}],
        }
    else:
        assert isinstance(stored["description"], str)
        assert stored["description"].endswith("\n\ncpe-key: plan:3:a")


def test_no_text_is_no_description(jira: FakeJira) -> None:
    with jira_provider(jira) as provider:
        key = provider.work_item_writer.create_work_item("Bare", "")
        assert provider.work_item_reader.get_work_item_body(key) == ""
    assert jira.issue(key)["description"] is None


def test_an_edited_body_keeps_the_key_so_the_create_is_still_found(jira: FakeJira) -> None:
    with jira_provider(jira) as provider:
        writer = provider.work_item_writer
        key = writer.create_work_item("Tabs", BODY, idempotency_key="plan:3:a")
        writer.update_work_item(key, body="New words.")
        assert provider.work_item_reader.get_work_item_body(key) == "New words."
        assert writer.create_work_item("Tabs", BODY, idempotency_key="plan:3:a") == key
    assert jira.issue_keys() == [key]


def test_a_description_a_person_wrote_reads_as_markdown(jira: FakeJira) -> None:
    key = jira.open_issue("Theirs", "Line one.\n\nLine two.", by=TEAMMATE)
    with jira_provider(jira) as provider:
        assert provider.work_item_reader.get_work_item_body(WorkItemId(key)) == (
            "Line one.\n\nLine two."
        )


def test_a_comment_is_made_once_per_key_and_carries_it(jira: FakeJira) -> None:
    key = jira.open_issue("Talk", by=BOT)
    with jira_provider(jira) as provider:
        writer = provider.work_item_writer
        writer.comment(WorkItemId(key), "Opened **a revision**.", idempotency_key="say:1")
        writer.comment(WorkItemId(key), "Opened **a revision**.", idempotency_key="say:1")
        writer.comment(WorkItemId(key), "No key: said each time.")
        writer.comment(WorkItemId(key), "No key: said each time.")
    comments = jira.issue(key)["comments"]
    assert len(comments) == 3
    assert comments[0]["text"].splitlines()[-1] == "cpe-key: say:1"
    if jira.deployment == "cloud":
        assert comments[0]["body"]["type"] == "doc"
    else:
        assert isinstance(comments[0]["body"], str)


def test_someone_else_s_comment_with_the_key_line_does_not_count(jira: FakeJira) -> None:
    key = jira.open_issue("Talk", by=BOT)
    jira.revoke("EDIT_ISSUES", "jira-software-users")
    jira.comment(key, "Copied.\n\ncpe-key: say:1", by="bob")
    with jira_provider(jira) as provider:
        provider.work_item_writer.comment(WorkItemId(key), "Real.", idempotency_key="say:1")
    assert len(jira.issue(key)["comments"]) == 2


def test_a_keyed_comment_past_the_first_page_of_comments_is_found(jira: FakeJira) -> None:
    key = jira.open_issue("Busy", by=BOT)
    for n in range(120):
        jira.comment(key, f"Chatter {n}", by=TEAMMATE)
    with jira_provider(jira) as provider:
        writer = provider.work_item_writer
        writer.comment(WorkItemId(key), "Opened a revision.", idempotency_key="say:busy")
        jira.clear_requests()
        writer.comment(WorkItemId(key), "Opened a revision.", idempotency_key="say:busy")
    assert len(jira.issue(key)["comments"]) == 121
    pages = [r for r in jira.requests if r.path.endswith("/comment")]
    assert [r.method for r in pages] == ["GET", "GET"]


def test_the_admit_label_is_found_past_the_first_page_of_the_changelog(jira: FakeJira) -> None:
    jira.revoke("EDIT_ISSUES", "jira-software-users")
    jira.grant("EDIT_ISSUES", "developers")
    key = jira.open_issue("Long history", "Text", by="bob")
    for n in range(60):
        jira.add_label(key, f"tag{n}", by=TEAMMATE)
        jira.remove_label(key, f"tag{n}", by=TEAMMATE)
    jira.add_label(key, "cpe-admit", by=TEAMMATE)
    with jira_provider(jira) as provider:
        assert [i.id for i in provider.work_item_reader.list_work_items()] == [key]
    if jira.deployment == "cloud":  # 121 changes, 100 a page; Data Center expands them all
        read = [r for r in jira.requests if r.path.endswith("/changelog")]
        assert len(read) == 2
