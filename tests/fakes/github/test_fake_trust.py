"""The fake GitHub knows who is who, as GitHub does: the owner, collaborators with their roles,
organization members, strangers. It says so where GitHub says it (``author_association`` on
issues, pull requests, reviews and review comments; the permission endpoint, with GitHub's
refusals), names who did what on a timeline (``labeled``, ``unlabeled``, ``renamed``), matches
labels ignoring case, and its helpers make no one do what GitHub would refuse them. Every answer
is checked against githubkit's models for the API version asked (``schemas.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy

from tests.fakes.github import FakeApp, FakeGitHub, rsa_key_pair
from tests.fakes.github.records import FINE_GRAINED_PERMISSIONS, Access
from tests.fakes.github.routes_people import NO_PUSH
from tests.fakes.github.schemas import check
from tests.support.github import running_github

REPO = "/repos/acme/widgets"
VERSION = "2026-03-10"
APP_ID, INSTALLATION = 7007, 77
TOKENS: dict[str, str | Access] = {
    "test-token": "cpe-bot",
    "maint-token": Access("maint", role="maintain"),
    "triage-token": Access("tri", role="triage"),
    "fine-token": Access("finn", "fine-grained", role="write",
                         permissions=FINE_GRAINED_PERMISSIONS),
    "bare-token": Access("finn", "fine-grained", role="write", permissions={"issues": "write"}),
}  # fmt: skip
ANSWER = {"src/app.py": "def answer():\n    return 42\n"}  # line 2 is in the diff


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return rsa_key_pair()


@pytest.fixture
def fake_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: tuple[str, str]
) -> Iterator[FakeGitHub]:
    app = FakeApp(APP_ID, INSTALLATION, keys[1])
    with running_github(tmp_path, monkeypatch, tokens=TOKENS, app=app) as fake:
        fake.keep_responses = True
        yield fake


@contextmanager
def acting(fake: FakeGitHub, token: str = "test-token") -> Iterator[httpx.Client]:
    """Requests with ``token``, naming the API version the provider names."""
    headers = {"Authorization": f"token {token}", "X-GitHub-Api-Version": VERSION}
    with httpx.Client(base_url=fake.base_url, headers=headers, timeout=30) as client:
        yield client


def body(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def misfits(fake: FakeGitHub) -> dict[str, list[str]]:
    """Answers that do not match githubkit's models for their version (none, we hope)."""
    return {f"{r.method} {r.path} {r.status}": p for r in fake.requests if (p := check(r))}


def permission(client: httpx.Client, login: str) -> tuple[str, str]:
    found = body(client.get(f"{REPO}/collaborators/{login}/permission"))
    assert found["user"]["role_name"] == found["role_name"]
    return found["permission"], found["role_name"]


def timeline(client: httpx.Client, number: int) -> list[tuple[str, str, str | None]]:
    """(event, actor, label or new title) of each timeline entry."""
    entries = body(client.get(f"{REPO}/issues/{number}/timeline"))
    return [
        (e["event"], e["actor"]["login"], (e.get("label") or {}).get("name") or
         (e.get("rename") or {}).get("to"))
        for e in entries
    ]  # fmt: skip


def association(client: httpx.Client, number: int) -> str:
    found: str = body(client.get(f"{REPO}/issues/{number}"))["author_association"]
    return found


# ------------------------------------------------------------------ who is who


def test_by_default_the_owner_is_admin_someone_writes_and_each_token_user_has_its_role(
    fake_github: FakeGitHub,
) -> None:
    with acting(fake_github) as client:
        assert permission(client, "acme") == ("admin", "admin")
        assert permission(client, "someone") == ("write", "write")
        assert permission(client, "cpe-bot") == ("admin", "admin")
        assert permission(client, "maint") == ("write", "maintain")  # maintain reads as write
        assert permission(client, "tri") == ("read", "triage")  # triage reads as read
        assert permission(client, "finn") == ("write", "write")
        by_owner = fake_github.add_issue("Owner's", user="acme")
        by_teammate = fake_github.add_issue("Teammate's")
        by_token = body(client.post(f"{REPO}/issues", json={"title": "cpe's"}), 201)
        assert by_token["user"]["login"] == "cpe-bot"
        assert by_token["author_association"] == "COLLABORATOR"
        assert association(client, by_owner) == "OWNER"
        assert association(client, by_teammate) == "COLLABORATOR"
        listed = body(client.get(f"{REPO}/issues"))
        assert {i["number"]: i["author_association"] for i in listed} == {
            by_owner: "OWNER",
            by_teammate: "COLLABORATOR",
            by_token["number"]: "COLLABORATOR",
        }
    assert misfits(fake_github) == {}


def test_a_stranger_reads_read_a_bot_none_and_a_login_no_account_has_is_not_a_user(
    fake_github: FakeGitHub,
) -> None:
    fake_github.add_user("visitor")
    with acting(fake_github) as client:
        stranger = body(client.get(f"{REPO}/collaborators/visitor/permission"))
        assert (stranger["permission"], stranger["role_name"]) == ("read", "read")
        assert stranger["user"]["permissions"] == {
            "pull": True, "triage": False, "push": False, "maintain": False, "admin": False,
        }  # fmt: skip
        assert permission(client, "cpe-app[bot]") == ("none", "none")
        missing = client.get(f"{REPO}/collaborators/nobody-at-all/permission")
        assert (missing.status_code, missing.json()["message"]) == (
            404,
            "nobody-at-all is not a user",
        )
        shouted = body(client.get(f"{REPO}/collaborators/SOMEONE/permission"))
        assert (shouted["user"]["login"], shouted["role_name"]) == ("someone", "write")
    assert misfits(fake_github) == {}


@pytest.mark.parametrize(
    ("role", "legacy"),
    [("read", "read"), ("triage", "read"), ("write", "write"), ("maintain", "write"),
     ("admin", "admin")],
)  # fmt: skip
def test_each_role_reads_as_githubs_legacy_permission_through_githubkit(
    fake_github: FakeGitHub, role: str, legacy: str
) -> None:
    fake_github.add_collaborator("pat", role)
    with GitHub(TokenAuthStrategy("test-token"), base_url=fake_github.base_url + "/") as gh:
        found = gh.rest.repos.get_collaborator_permission_level("acme", "widgets", "pat")
    assert (found.parsed_data.permission, found.parsed_data.role_name) == (legacy, role)
    assert found.parsed_data.user is not None
    assert found.parsed_data.user.login == "pat"
    assert misfits(fake_github) == {}


def test_members_and_collaborators_come_and_go(fake_github: FakeGitHub) -> None:
    mine = fake_github.add_issue("Mine", user="mia")
    with acting(fake_github) as client:
        assert association(client, mine) == "NONE"
        fake_github.add_member("mia", "write")
        assert association(client, mine) == "MEMBER"  # judged when read: old issues too
        assert permission(client, "mia") == ("write", "write")
        fake_github.add_collaborator("pat", "triage")
        fake_github.add_collaborator("pat", "admin")
        assert permission(client, "pat") == ("admin", "admin")
        fake_github.remove_collaborator("pat")
        assert permission(client, "pat") == ("read", "read")  # a stranger now
    with pytest.raises(ValueError, match="no repository role 'push'"):
        fake_github.add_collaborator("pat", "push")  # the REST "permission" name, not a role


def test_who_may_ask_for_a_permission_and_who_may_not(fake_github: FakeGitHub) -> None:
    with acting(fake_github, "triage-token") as client:
        refused = client.get(f"{REPO}/collaborators/someone/permission")
        assert (refused.status_code, refused.json()["message"]) == (403, NO_PUSH)
    with acting(fake_github, "bare-token") as client:  # no "Metadata" permission
        refused = client.get(f"{REPO}/collaborators/someone/permission")
        assert refused.status_code == 403
        assert refused.json()["message"] == "Resource not accessible by personal access token"
    with acting(fake_github, "fine-token") as client:
        assert permission(client, "someone") == ("write", "write")
    app = fake_github.app
    assert app is not None
    installed = app.issue(INSTALLATION, {}, dict(app.permissions)).token
    narrowed = app.issue(INSTALLATION, {}, {"issues": "write"}).token
    with acting(fake_github, installed) as client:
        assert permission(client, "tri") == ("read", "triage")
    with acting(fake_github, narrowed) as client:
        refused = client.get(f"{REPO}/collaborators/tri/permission")
        assert refused.json()["message"] == "Resource not accessible by integration"
    assert misfits(fake_github) == {}


def test_a_token_names_its_user_and_an_app_its_slug(
    fake_github: FakeGitHub, keys: tuple[str, str]
) -> None:
    with acting(fake_github, "maint-token") as client:
        assert body(client.get("/user"))["login"] == "maint"
    app = fake_github.app
    assert app is not None
    with acting(fake_github, app.issue(INSTALLATION, {}, dict(app.permissions)).token) as client:
        refused = client.get("/user")  # an installation has no user
        assert (refused.status_code, refused.json()["message"]) == (
            403,
            "Resource not accessible by integration",
        )
    as_app = AppAuthStrategy(APP_ID, keys[0])
    with GitHub(as_app, base_url=fake_github.base_url + "/") as gh:
        named = gh.rest.apps.get_authenticated().parsed_data
    assert named is not None
    assert f"{named.slug}[bot]" == app.bot_login
    assert misfits(fake_github) == {}


# ------------------------------------------------------------------ author_association


def test_a_strangers_pull_request_makes_a_first_time_contributor_then_a_contributor(
    fake_github: FakeGitHub,
) -> None:
    issue = fake_github.add_issue("A wish", user="newbie")
    with acting(fake_github) as client:
        assert association(client, issue) == "NONE"
        pull = fake_github.add_pull("newbie/answer", ANSWER, "Answer", user="newbie")
        assert body(client.get(f"{REPO}/pulls/{pull}"))["author_association"] == (
            "FIRST_TIME_CONTRIBUTOR"
        )
        assert association(client, issue) == "FIRST_TIME_CONTRIBUTOR"
        [listed] = body(client.get(f"{REPO}/pulls"))
        assert listed["author_association"] == "FIRST_TIME_CONTRIBUTOR"
        body(client.put(f"{REPO}/pulls/{pull}/merge", json={}))
        assert association(client, issue) == "CONTRIBUTOR"
        assert body(client.get(f"{REPO}/pulls/{pull}"))["author_association"] == "CONTRIBUTOR"
        fake_github.add_collaborator("newbie", "triage")
        assert association(client, issue) == "COLLABORATOR"
        assert permission(client, "newbie") == ("read", "triage")
    assert misfits(fake_github) == {}


def test_reviews_and_review_comments_carry_their_authors_association(
    fake_github: FakeGitHub,
) -> None:
    pull = fake_github.add_pull("feature", ANSWER, "Answer")
    visitor = fake_github.add_review(pull, "visitor", "COMMENTED", "Why 42?")
    fake_github.add_review(pull, "maint", "APPROVED")
    remark = fake_github.add_review_comment(pull, "visitor", "src/app.py", 2, "Magic number.")
    with acting(fake_github, "triage-token") as client:
        posted = body(
            client.post(
                f"{REPO}/pulls/{pull}/reviews",
                json={"event": "COMMENT", "body": "Noted.",
                      "comments": [{"path": "src/app.py", "line": 2, "body": "Here."}]},
            )
        )  # fmt: skip
        assert (posted["user"]["login"], posted["author_association"]) == ("tri", "COLLABORATOR")
        reviews = body(client.get(f"{REPO}/pulls/{pull}/reviews"))
        comments = body(client.get(f"{REPO}/pulls/{pull}/comments"))
    seen = [(r["user"]["login"], r["state"], r["body"], r["author_association"]) for r in reviews]
    assert seen == [
        ("visitor", "COMMENTED", "Why 42?", "NONE"),
        ("maint", "APPROVED", "", "COLLABORATOR"),
        ("visitor", "COMMENTED", "", "NONE"),  # the comment made on its own: a review of its own
        ("tri", "COMMENTED", "Noted.", "COLLABORATOR"),
    ]  # fmt: skip
    assert [(c["id"], c["user"]["login"], c["author_association"]) for c in comments] == [
        (remark, "visitor", "NONE"),
        (comments[1]["id"], "tri", "COLLABORATOR"),
    ]
    assert comments[0]["pull_request_review_id"] == reviews[2]["id"] != visitor
    assert misfits(fake_github) == {}


def test_only_approvals_by_people_with_write_access_count_for_branch_protection(
    fake_github: FakeGitHub,
) -> None:
    fake_github.protect(reviews=1)
    pull = fake_github.add_pull("feature", ANSWER, "Answer")
    wanted = "At least 1 approving review is required by reviewers with write access."
    with acting(fake_github) as client:
        fake_github.add_review(pull, "visitor", "APPROVED")  # anyone may approve, uncounted
        fake_github.add_review(pull, "tri", "APPROVED")
        refused = client.put(f"{REPO}/pulls/{pull}/merge", json={})
        assert (refused.status_code, refused.json()["message"]) == (405, wanted)
        fake_github.add_review(pull, "maint", "APPROVED")
        assert body(client.put(f"{REPO}/pulls/{pull}/merge", json={}))["merged"]
    assert misfits(fake_github) == {}


# ------------------------------------------------------------------ acting as someone


def test_labels_someone_applies_are_timeline_events_naming_them(fake_github: FakeGitHub) -> None:
    fake_github.label_id("cpe:admit")
    wish = fake_github.add_issue("A wish", user="visitor")
    fake_github.label_issue(wish, "CPE:Admit", "maint")  # the existing label, in any case
    fake_github.label_issue(wish, "cpe:admit", "tri")  # there already: no event
    fake_github.unlabel_issue(wish, "cpe:admit", "tri")
    fake_github.label_issue(wish, "cpe:admit", "tri")
    assert fake_github.issues[wish].labels == ["cpe:admit"]
    with acting(fake_github) as client:
        assert timeline(client, wish) == [
            ("labeled", "maint", "cpe:admit"),
            ("unlabeled", "tri", "cpe:admit"),
            ("labeled", "tri", "cpe:admit"),
        ]
        [first, *_] = body(client.get(f"{REPO}/issues/{wish}/timeline"))
        assert first["label"] == {"name": "cpe:admit", "color": "ededed"}
    assert misfits(fake_github) == {}


def test_labels_added_through_the_api_are_events_by_the_tokens_user(
    fake_github: FakeGitHub,
) -> None:
    fake_github.label_id("question")
    with acting(fake_github, "maint-token") as maint:
        made = body(maint.post(f"{REPO}/issues", json={"title": "T", "labels": ["bug"]}), 201)
    number = made["number"]
    with acting(fake_github, "triage-token") as tri:
        added = body(tri.post(f"{REPO}/issues/{number}/labels", json={"labels": ["QUESTION"]}))
        assert [label["name"] for label in added] == ["bug", "question"]
        body(tri.delete(f"{REPO}/issues/{number}/labels/BUG"))
    with acting(fake_github) as cpe:
        body(cpe.put(f"{REPO}/issues/{number}/labels", json={"labels": ["question", "later"]}))
        assert cpe.delete(f"{REPO}/issues/{number}/labels").status_code == 204
        body(cpe.patch(f"{REPO}/issues/{number}", json={"title": "Better", "labels": ["bug"]}))
        assert timeline(cpe, number) == [
            ("labeled", "maint", "bug"),  # with the new issue
            ("labeled", "tri", "question"),
            ("unlabeled", "tri", "bug"),
            ("labeled", "cpe-bot", "later"),
            ("unlabeled", "cpe-bot", "question"),
            ("unlabeled", "cpe-bot", "later"),
            ("renamed", "cpe-bot", "Better"),
            ("labeled", "cpe-bot", "bug"),
        ]
    assert misfits(fake_github) == {}


def test_labels_match_ignoring_case_as_on_github(fake_github: FakeGitHub) -> None:
    fake_github.label_id("Status:Blocked")
    number = fake_github.add_issue("Stuck")
    with acting(fake_github) as client:
        added = body(client.post(f"{REPO}/issues/{number}/labels", json=["status:blocked"]))
        assert [label["name"] for label in added] == ["Status:Blocked"]
        again = client.post(f"{REPO}/labels", json={"name": "STATUS:BLOCKED"})
        assert again.status_code == 422
        assert again.json()["errors"] == [
            {"resource": "Label", "field": "name", "code": "already_exists"}
        ]
        found = body(client.get(f"{REPO}/issues", params={"labels": "status:BLOCKED"}))
        assert [i["number"] for i in found] == [number]
        assert body(client.delete(f"{REPO}/issues/{number}/labels/STATUS:blocked")) == []
        missing = client.delete(f"{REPO}/issues/{number}/labels/status:blocked")
        assert missing.status_code == 404
    assert list(fake_github.labels) == ["Status:Blocked"]
    assert misfits(fake_github) == {}


def test_an_edit_moves_updated_at_and_its_timeline_names_the_editor(
    fake_github: FakeGitHub,
) -> None:
    wish = fake_github.add_issue("A wish", "Please.", user="visitor")
    with acting(fake_github) as client:
        before = body(client.get(f"{REPO}/issues/{wish}"))
        fake_github.edit_issue(wish, editor="visitor", body="Please, now.")  # one's own
        after = body(client.get(f"{REPO}/issues/{wish}"))
        assert (after["body"], after["updated_at"] > before["updated_at"]) == ("Please, now.", True)
        assert set(after) == set(before)  # GitHub's REST issues name no editor
        fake_github.edit_issue(wish, editor="maint", title="A better wish")
        fake_github.edit_issue(wish, editor="tri", state="closed")
        closed = body(client.get(f"{REPO}/issues/{wish}"))
        assert (closed["state"], closed["state_reason"]) == ("closed", "completed")
        assert closed["closed_at"] is not None
        assert timeline(client, wish) == [
            ("renamed", "maint", "A better wish"),
            ("closed", "tri", None),
        ]
    assert misfits(fake_github) == {}


def test_helpers_make_no_one_do_what_github_refuses(fake_github: FakeGitHub) -> None:
    fake_github.label_id("bug")
    theirs = fake_github.add_issue("Theirs")  # by someone
    pull = fake_github.add_pull("feature", ANSWER, "Answer")
    with pytest.raises(ValueError, match="visitor \\(no role\\) cannot label issues"):
        fake_github.label_issue(theirs, "bug", "visitor")
    with pytest.raises(ValueError, match="that takes the write role"):
        fake_github.label_issue(theirs, "brand-new", "tri")  # may label, may not create
    with pytest.raises(ValueError, match="has no label"):
        fake_github.unlabel_issue(theirs, "bug", "tri")
    with pytest.raises(ValueError, match="cannot edit"):
        fake_github.edit_issue(theirs, editor="visitor", body="Defaced.")
    with pytest.raises(ValueError, match="cannot edit"):
        fake_github.edit_issue(theirs, editor="tri", title="Renamed")
    with pytest.raises(ValueError, match="cannot close or reopen"):
        fake_github.edit_issue(theirs, editor="visitor", state="closed")
    with pytest.raises(ValueError, match="cannot label issues"):
        fake_github.edit_issue(theirs, editor="visitor", labels=["bug"])
    with pytest.raises(ValueError, match="Can not approve your own pull request"):
        fake_github.add_review(pull, "someone", "APPROVED")
    with pytest.raises(ValueError, match="Body is required"):
        fake_github.add_review(pull, "maint", "CHANGES_REQUESTED")
    with pytest.raises(ValueError, match="must be part of the diff"):
        fake_github.add_review_comment(pull, "maint", "README.md", 1, "Off the diff.")
    with pytest.raises(ValueError, match="no review state 'APPROVE'"):
        fake_github.add_review(pull, "maint", "APPROVE")  # the event's name, not the state's
    assert (fake_github.issues[theirs].title, fake_github.issues[theirs].labels) == ("Theirs", [])
    assert fake_github.reviews == []
    assert fake_github.events == []
