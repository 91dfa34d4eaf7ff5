"""The fake GitLab's tracker side against python-gitlab (and plain httpx for GitLab's refusals):
issues, labels and scoped labels, notes, label events, issue links, members; and the helpers
that act as other people, which refuse what GitLab would."""

from __future__ import annotations

from typing import Any

import gitlab
import pytest
from gitlab.v4.objects import Project

from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import gitlab_project as project
from tests.support.gitlab import project_api as http


def events(project: Project, iid: int) -> list[tuple[str, str, str]]:
    found = project.issues.get(iid, lazy=True).resourcelabelevents.list(get_all=True)
    return [(e.action, e.label["name"], e.user["username"]) for e in found]


# ---------------------------------------------------------------------- issues


def test_an_issue_is_created_with_its_labels_as_label_events_by_its_author(
    fake_gitlab: FakeGitLab,
) -> None:
    proj = project(fake_gitlab)
    made = proj.issues.create({"title": "First", "description": "body", "labels": "area,todo"})
    assert (made.iid, made.state, made.title, made.description) == (1, "opened", "First", "body")
    assert made.labels == ["area", "todo"]
    assert made.author["username"] == "cpe-bot"
    assert made.references["full"] == "acme/widgets#1"
    assert made.id != made.iid
    assert events(proj, 1) == [("add", "area", "cpe-bot"), ("add", "todo", "cpe-bot")]
    assert {label.name for label in proj.labels.list(get_all=True)} == {"area", "todo"}


def test_a_stranger_opens_issues_but_their_labels_are_dropped(fake_gitlab: FakeGitLab) -> None:
    made = project(fake_gitlab, "stranger-token").issues.create(
        {"title": "Help", "labels": ["urgent"]}
    )
    assert made.labels == []
    assert made.author["username"] == "passer.by"
    assert "urgent" not in fake_gitlab.labels


def test_an_issue_without_a_title_is_refused(fake_gitlab: FakeGitLab) -> None:
    with http(fake_gitlab) as client:
        refused = client.post("/issues", json={"description": "no title"})
    assert (refused.status_code, refused.json()) == (400, {"error": "title is missing"})


def test_issues_are_listed_by_state_labels_time_and_order(fake_gitlab: FakeGitLab) -> None:
    first = fake_gitlab.open_issue("first", labels=["area"])
    second = fake_gitlab.open_issue("second", labels=["area", "later"])
    fake_gitlab.close_issue(first)
    proj = project(fake_gitlab)
    closed_at = proj.issues.get(first).updated_at  # after the second was last touched

    def iids(**query: Any) -> list[int]:
        return [i.iid for i in proj.issues.list(get_all=True, **query)]

    assert iids() == [second, first]  # every state, newest first
    assert iids(state="opened") == [second]
    assert iids(state="closed") == [first]
    assert iids(labels="area,later") == [second]
    assert iids(order_by="updated_at", sort="asc") == [second, first]
    assert iids(updated_after=closed_at) == [first]
    fake_gitlab.comment(second, "a comment moves it")
    assert iids(order_by="updated_at") == [second, first]
    with http(fake_gitlab) as client:
        refused = client.get("/issues", params={"state": "open"})  # GitLab says "opened"
    assert (refused.status_code, refused.json()) == (
        400,
        {"error": "state does not have a valid value"},
    )


def test_an_edit_adds_removes_and_replaces_labels_and_closes(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_issue("edit me", labels=["a", "b"])
    proj = project(fake_gitlab)
    issue = proj.issues.get(iid)
    issue.add_labels, issue.remove_labels = "c", "a"
    issue.save()
    assert proj.issues.get(iid).labels == ["b", "c"]
    issue = proj.issues.get(iid)
    issue.labels = ["z"]
    issue.state_event = "close"
    issue.save()
    closed = proj.issues.get(iid)
    assert (closed.labels, closed.state) == (["z"], "closed")
    assert closed.attributes["closed_by"]["username"] == "cpe-bot"
    assert closed.closed_at
    assert events(proj, iid)[-3:] == [
        ("remove", "b", "cpe-bot"),
        ("remove", "c", "cpe-bot"),
        ("add", "z", "cpe-bot"),
    ]
    closed.state_event = "reopen"
    closed.save()
    assert proj.issues.get(iid).state == "opened"


def test_an_edit_naming_nothing_is_refused(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_issue("x")
    with http(fake_gitlab) as client:
        refused = client.put(f"/issues/{iid}", json={})
    assert refused.status_code == 400
    assert refused.json()["error"].endswith("at least one parameter must be provided")


def test_only_the_author_or_a_reporter_edits_an_issue(fake_gitlab: FakeGitLab) -> None:
    theirs = fake_gitlab.open_issue("the teammate's")
    with http(fake_gitlab, "stranger-token") as client:
        refused = client.put(f"/issues/{theirs}", json={"title": "mine now"})
        own = client.post("/issues", json={"title": "mine"}).json()["iid"]
        edited = client.put(f"/issues/{own}", json={"title": "still mine", "labels": "x"})
    assert (refused.status_code, refused.json()) == (403, {"message": "403 Forbidden"})
    assert edited.json()["title"] == "still mine"
    assert edited.json()["labels"] == []  # a stranger's labels are dropped
    assert fake_gitlab.issues[theirs].title == "the teammate's"


def test_a_missing_issue_is_a_404(fake_gitlab: FakeGitLab) -> None:
    with http(fake_gitlab) as client:
        missing = client.get("/issues/99")
    assert (missing.status_code, missing.json()) == (404, {"message": "404 Not found"})


# ---------------------------------------------------------------------- labels


def test_scoped_labels_are_plain_labels_on_free(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_issue("x", labels=["status::ready"])
    fake_gitlab.label(iid, "status::doing")
    assert fake_gitlab.issues[iid].labels == ["status::ready", "status::doing"]


def test_on_premium_a_scoped_label_displaces_its_scopes_other(premium: FakeGitLab) -> None:
    iid = premium.open_issue("x", labels=["status::ready", "area"])
    proj = project(premium)
    issue = proj.issues.get(iid)
    issue.add_labels = "status::doing"
    issue.save()
    assert proj.issues.get(iid).labels == ["area", "status::doing"]
    assert events(proj, iid)[-2:] == [
        ("remove", "status::ready", "cpe-bot"),
        ("add", "status::doing", "cpe-bot"),
    ]
    premium.label(iid, "status::done", by="someone")
    assert premium.issues[iid].labels == ["area", "status::done"]


def test_a_label_is_created_once_and_only_by_a_reporter(fake_gitlab: FakeGitLab) -> None:
    with http(fake_gitlab) as client:
        made = client.post("/labels", json={"name": "cpe:admit", "color": "#00ff00"})
        again = client.post("/labels", json={"name": "cpe:admit", "color": "#00ff00"})
        no_color = client.post("/labels", json={"name": "other"})
    with http(fake_gitlab, "guest-token") as client:
        guest = client.post("/labels", json={"name": "guests", "color": "#000000"})
    assert made.status_code == 201
    assert (made.json()["name"], made.json()["color"]) == ("cpe:admit", "#00ff00")
    assert (again.status_code, again.json()) == (409, {"message": "Label already exists"})
    assert (no_color.status_code, no_color.json()) == (400, {"error": "color is missing"})
    assert (guest.status_code, guest.json()) == (403, {"message": "403 Forbidden"})


# ---------------------------------------------------------------------- notes


def test_notes_are_listed_newest_first_unless_asked_and_system_notes_say_so(
    fake_gitlab: FakeGitLab,
) -> None:
    iid = fake_gitlab.open_issue("x")
    fake_gitlab.comment(iid, "first", by="passer.by")
    fake_gitlab.edit_issue(iid, description="new text")
    proj = project(fake_gitlab)
    proj.issues.get(iid, lazy=True).notes.create({"body": "third"})
    notes = proj.issues.get(iid, lazy=True).notes
    newest_first = [(n.body, n.system) for n in notes.list(get_all=True)]
    assert newest_first == [("third", False), ("changed the description", True), ("first", False)]
    oldest = notes.list(get_all=True, sort="asc")
    assert [n.author["username"] for n in oldest] == ["passer.by", "someone", "cpe-bot"]
    assert proj.issues.get(iid).user_notes_count == 2  # system notes do not count
    with http(fake_gitlab) as client:
        refused = client.post(f"/issues/{iid}/notes", json={})
    assert (refused.status_code, refused.json()) == (400, {"error": "body is missing"})


# ---------------------------------------------------------------------- links


def test_relates_to_links_show_on_both_issues_once(fake_gitlab: FakeGitLab) -> None:
    a, b = fake_gitlab.open_issue("a"), fake_gitlab.open_issue("b")
    proj = project(fake_gitlab)
    source, target = proj.issues.get(a, lazy=True).links.create(
        {"target_project_id": fake_gitlab.project_id, "target_issue_iid": b}
    )
    assert (source.iid, target.iid) == (a, b)
    there = proj.issues.get(a, lazy=True).links.list(get_all=True)
    back = proj.issues.get(b, lazy=True).links.list(get_all=True)
    assert [(i.iid, i.link_type) for i in there] == [(b, "relates_to")]
    assert [(i.iid, i.link_type) for i in back] == [(a, "relates_to")]
    with http(fake_gitlab) as client:
        twice = client.post(
            f"/issues/{b}/links", json={"target_project_id": 4242, "target_issue_iid": a}
        )
        nowhere = client.post(
            f"/issues/{a}/links", json={"target_project_id": 4242, "target_issue_iid": 77}
        )
    assert (twice.status_code, twice.json()) == (409, {"message": "Issue(s) already assigned"})
    assert nowhere.status_code == 404
    system = [n.body for n in fake_gitlab.notes if n.system]
    assert system == [
        f"marked this issue as related to #{b}",
        f"marked this issue as related to #{a}",
    ]


def test_blocking_links_are_premium_and_refused_on_free(fake_gitlab: FakeGitLab) -> None:
    a, b = fake_gitlab.open_issue("a"), fake_gitlab.open_issue("b")
    with http(fake_gitlab) as client:
        for kind in ("blocks", "is_blocked_by"):
            refused = client.post(
                f"/issues/{a}/links",
                json={"target_project_id": 4242, "target_issue_iid": b, "link_type": kind},
            )
            assert refused.status_code == 403
            assert refused.json() == {"message": "Blocked issues not available for current license"}
    assert not fake_gitlab.links
    with pytest.raises(ValueError, match="Premium"):
        fake_gitlab.link(a, b, "blocks")


def test_on_premium_is_blocked_by_reads_back_from_both_sides(premium: FakeGitLab) -> None:
    a, b = premium.open_issue("a"), premium.open_issue("b")
    proj = project(premium)
    proj.issues.get(a, lazy=True).links.create(
        {"target_project_id": "acme/widgets", "target_issue_iid": b, "link_type": "is_blocked_by"}
    )
    there = proj.issues.get(a, lazy=True).links.list(get_all=True)
    back = proj.issues.get(b, lazy=True).links.list(get_all=True)
    assert [(i.iid, i.link_type) for i in there] == [(b, "is_blocked_by")]
    assert [(i.iid, i.link_type) for i in back] == [(a, "blocks")]
    assert proj.issues.get(b).blocking_issues_count == 1


# ---------------------------------------------------------------------- members


def test_members_carry_their_access_level_and_strangers_are_404(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.add_member("dev", "developer")
    stranger = fake_gitlab.add_user("nobody")
    proj = project(fake_gitlab)
    assert proj.members_all.get(fake_gitlab.user_id("dev")).access_level == 30
    assert proj.members_all.get(fake_gitlab.user_id("acme")).access_level == 50
    with pytest.raises(gitlab.GitlabGetError) as refused:
        proj.members_all.get(stranger)
    assert refused.value.response_code == 404
    fake_gitlab.add_member("dev", 40)
    assert proj.members_all.get(fake_gitlab.user_id("dev")).access_level == 40


# ---------------------------------------------------------------------- helpers


def test_helpers_refuse_what_gitlab_would(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_issue("x", author="passer.by")  # anyone opens an issue
    with pytest.raises(ValueError, match="Reporter"):
        fake_gitlab.open_issue("y", author="passer.by", labels=["bug"])
    with pytest.raises(ValueError, match="cannot label"):
        fake_gitlab.label(iid, "bug", by="passer.by")
    with pytest.raises(ValueError, match="cannot edit"):
        fake_gitlab.edit_issue(iid, by="guest", title="nope")
    fake_gitlab.edit_issue(iid, by="passer.by", title="my own")  # the author may
    fake_gitlab.label(iid, "bug", by="someone")
    fake_gitlab.unlabel(iid, "bug", by="someone")
    with pytest.raises(ValueError, match="no label"):
        fake_gitlab.unlabel(iid, "bug", by="someone")
    assert fake_gitlab.issues[iid].title == "my own"
    assert [(e.action, e.user) for e in fake_gitlab.label_events] == [
        ("add", "someone"),
        ("remove", "someone"),
    ]
