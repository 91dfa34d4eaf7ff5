"""The fake GitHub answers like GitHub: every payload parses with githubkit's own response
models, and ETags, pagination, rate-limit headers and injected faults behave as documented."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from githubkit_schemas.v2026_03_10 import models
from pydantic import TypeAdapter

from tests.adapters.providers.edits import BASE_FILES
from tests.fakes.github import FakeGitHub, Fault, ManualClock, Stall
from tests.fakes.github.records import FINE_GRAINED_PERMISSIONS, Access

REPO = "/repos/acme/widgets"


@pytest.fixture
def http(fake_github: FakeGitHub) -> Iterator[httpx.Client]:
    headers = {"Authorization": "token test-token", "Accept": "application/vnd.github+json"}
    with httpx.Client(base_url=fake_github.base_url, headers=headers, timeout=30) as client:
        yield client


def parse(model: Any, response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return TypeAdapter(model).validate_python(response.json())


def make_pull(
    fake_github: FakeGitHub, http: httpx.Client, branch: str = "feature"
) -> dict[str, Any]:
    head = fake_github.default_head()
    blob = http.post(f"{REPO}/git/blobs", json={"content": "def answer():\n    return 42\n"})
    tree = http.post(
        f"{REPO}/git/trees",
        json={
            "base_tree": fake_github.git.line("rev-parse", f"{head}^{{tree}}"),
            "tree": [{"path": "src/app.py", "mode": "100644", "type": "blob",
                      "sha": blob.json()["sha"]}],
        },
    )  # fmt: skip
    commit = http.post(
        f"{REPO}/git/commits",
        json={"message": "answer", "tree": tree.json()["sha"], "parents": [head]},
    )
    http.post(f"{REPO}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": commit.json()["sha"]})
    created = http.post(
        f"{REPO}/pulls", json={"title": "Answer", "head": branch, "base": "main", "body": "x"}
    )
    assert created.status_code == 201, created.text
    pull: dict[str, Any] = created.json()
    return pull


def test_issue_endpoints_parse_with_githubkit_models(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    first = parse(
        models.Issue, http.post(f"{REPO}/issues", json={"title": "A", "labels": ["x"]}), 201
    )
    second = parse(models.Issue, http.post(f"{REPO}/issues", json={"title": "B", "body": "b"}), 201)
    parse(list[models.Issue], http.get(f"{REPO}/issues", params={"state": "all"}))
    parse(models.Issue, http.get(f"{REPO}/issues/{first.number}"))
    parse(
        models.ReposOwnerRepoIssuesIssueNumberPatchResponse200,
        http.patch(f"{REPO}/issues/{first.number}", json={"state": "closed"}),
    )
    parse(list[models.Label], http.post(f"{REPO}/issues/{second.number}/labels",
                                        json={"labels": ["status:pending"]}))  # fmt: skip
    parse(list[models.Label], http.delete(f"{REPO}/issues/{second.number}/labels/status:pending"))
    parse(
        models.Issue,
        http.post(
            f"{REPO}/issues/{second.number}/dependencies/blocked_by", json={"issue_id": first.id}
        ),
        201,
    )
    blockers = parse(
        list[models.Issue], http.get(f"{REPO}/issues/{second.number}/dependencies/blocked_by")
    )
    assert [b.number for b in blockers] == [first.number]
    parse(models.FullRepository, http.get(REPO))


def test_pull_and_review_endpoints_parse_with_githubkit_models(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    fake_github.allow_self_review = True
    pull = parse(models.PullRequest, httpx.Response(201, json=make_pull(fake_github, http)), 201)
    number, head = pull.number, pull.head.sha
    parse(list[models.PullRequestSimple], http.get(f"{REPO}/pulls", params={"state": "all"}))
    parse(models.PullRequest, http.get(f"{REPO}/pulls/{number}"))
    parse(models.PullRequest, http.patch(f"{REPO}/pulls/{number}", json={"body": "y"}))
    files = parse(list[models.DiffEntry], http.get(f"{REPO}/pulls/{number}/files"))
    assert [(f.filename, f.status) for f in files] == [("src/app.py", "modified")]
    review = {
        "commit_id": head,
        "event": "REQUEST_CHANGES",
        "body": "No.",
        "comments": [{"path": "src/app.py", "line": 2, "side": "RIGHT", "body": "Hm."}],
    }
    parse(models.PullRequestReview, http.post(f"{REPO}/pulls/{number}/reviews", json=review))
    parse(list[models.PullRequestReview], http.get(f"{REPO}/pulls/{number}/reviews"))
    comments = parse(
        list[models.PullRequestReviewComment], http.get(f"{REPO}/pulls/{number}/comments")
    )
    assert [(c.path, c.line) for c in comments] == [("src/app.py", 2)]
    fake_github.add_check_run(head, "tests", "completed", "success")
    fake_github.add_status(head, "lint", "success")
    parse(
        models.ReposOwnerRepoCommitsRefCheckRunsGetResponse200,
        http.get(f"{REPO}/commits/{head}/check-runs"),
    )
    parse(models.CombinedCommitStatus, http.get(f"{REPO}/commits/{head}/status"))
    parse(models.PullRequestMergeResult, http.put(f"{REPO}/pulls/{number}/merge", json={}))


def test_git_data_endpoints_parse_with_githubkit_models(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    content = b"\x00binary\xff"
    blob = parse(
        models.ShortBlob,
        http.post(
            f"{REPO}/git/blobs",
            json={"content": base64.b64encode(content).decode(), "encoding": "base64"},
        ),
        201,
    )
    got = parse(models.Blob, http.get(f"{REPO}/git/blobs/{blob.sha}"))
    assert base64.b64decode(got.content) == content
    head = fake_github.default_head()
    parse(models.GitTree, http.get(f"{REPO}/git/trees/{head}", params={"recursive": "1"}))
    parse(models.GitCommit, http.get(f"{REPO}/git/commits/{head}"))
    parse(models.GitRef, http.get(f"{REPO}/git/ref/heads/main"))
    make_pull(fake_github, http, "other")
    parse(models.GitRef, http.get(f"{REPO}/git/ref/heads/other"))
    moved = parse(
        models.GitRef,
        http.patch(f"{REPO}/git/refs/heads/other", json={"sha": head, "force": True}),
    )
    assert moved.object_.sha == head


def test_matching_etag_answers_304_that_does_not_count(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    first = http.get(f"{REPO}/issues")
    again = http.get(f"{REPO}/issues", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304
    assert again.headers["X-RateLimit-Used"] == first.headers["X-RateLimit-Used"]
    assert [r.counted for r in fake_github.requests] == [True, False]
    fake_github.add_issue("new")
    changed = http.get(f"{REPO}/issues", headers={"If-None-Match": first.headers["ETag"]})
    assert changed.status_code == 200


def test_lists_are_paginated_with_link_headers(fake_github: FakeGitHub, http: httpx.Client) -> None:
    for i in range(5):
        fake_github.add_issue(f"issue {i}")
    first = http.get(f"{REPO}/issues", params={"per_page": 2})
    assert len(first.json()) == 2
    assert 'rel="next"' in first.headers["Link"]
    last = http.get(f"{REPO}/issues", params={"per_page": 2, "page": 3})
    assert len(last.json()) == 1
    assert 'rel="next"' not in last.headers["Link"]


def test_apply_first_fault_applies_the_write_and_answers_502(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    fake_github.fail(Fault("POST", r"/issues$", 502, apply_first=True))
    assert http.post(f"{REPO}/issues", json={"title": "A"}).status_code == 502
    assert [i.title for i in fake_github.issues.values()] == ["A"]
    assert http.post(f"{REPO}/issues", json={"title": "B"}).status_code == 201


def test_rate_limit_fault_sends_retry_after(fake_github: FakeGitHub, http: httpx.Client) -> None:
    fake_github.fail(Fault("GET", r"/issues$", 403, retry_after=7, message="secondary rate limit"))
    refused = http.get(f"{REPO}/issues")
    assert (refused.status_code, refused.headers["Retry-After"]) == (403, "7")
    assert http.get(f"{REPO}/issues").status_code == 200


def test_exhausted_rate_limit_answers_403_with_zero_remaining(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    fake_github.http.rate_limit = 1
    assert http.get(f"{REPO}/issues").status_code == 200
    refused = http.get(f"{REPO}/issues")
    assert (refused.status_code, refused.headers["X-RateLimit-Remaining"]) == (403, "0")


def test_an_exhausted_rate_limit_names_its_reset_until_restored(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    fake_github.exhaust_rate_limit(reset=2_000_000_000)
    refused = http.get(f"{REPO}/issues")
    assert refused.status_code == 403
    assert refused.headers["X-RateLimit-Reset"] == "2000000000"
    fake_github.restore_rate_limit()
    assert http.get(f"{REPO}/issues").status_code == 200


def test_a_stalled_answer_times_the_client_out_and_the_next_is_served(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    fake_github.stall(Stall("GET", r"/issues$"))  # held until the fake closes
    with pytest.raises(httpx.ReadTimeout):
        http.get(f"{REPO}/issues", timeout=0.3)
    assert http.get(f"{REPO}/issues").status_code == 200


def test_unknown_token_is_refused(fake_github: FakeGitHub) -> None:
    with httpx.Client(base_url=fake_github.base_url, timeout=30) as client:
        assert client.get(f"{REPO}/issues").status_code == 401


def test_approving_ones_own_pull_request_is_refused(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    number = make_pull(fake_github, http)["number"]
    refused = http.post(f"{REPO}/pulls/{number}/reviews", json={"event": "APPROVE"})
    assert refused.status_code == 422
    # GitHub's shape for this one: the reason is a plain string in ``errors``.
    assert refused.json()["message"] == "Unprocessable Entity"
    assert refused.json()["errors"] == ["Can not approve your own pull request"]


def test_merge_conflict_is_refused_with_405(fake_github: FakeGitHub, http: httpx.Client) -> None:
    number = make_pull(fake_github, http)["number"]
    fake_github.commit_to_default({"src/app.py": "def answer():\n    return 40\n"}, "theirs")
    assert http.put(f"{REPO}/pulls/{number}/merge", json={}).status_code == 405


# ------------------------------------------------------------------ where GitHub differs


def test_each_api_version_gets_its_own_shape_and_an_unknown_one_is_refused(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    number = make_pull(fake_github, http)["number"]
    old = http.get(f"{REPO}/pulls/{number}").json()  # no version named: 2022-11-28
    new = http.get(f"{REPO}/pulls/{number}", headers={"X-GitHub-Api-Version": "2026-03-10"})
    assert "merge_commit_sha" in old
    assert "assignee" in old
    assert "merge_commit_sha" not in new.json()
    assert "assignee" not in new.json()
    unknown = http.get(f"{REPO}/pulls/{number}", headers={"X-GitHub-Api-Version": "2030-01-01"})
    assert unknown.status_code == 400


def test_the_repository_embedded_in_pull_requests_changes_with_any_push(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    make_pull(fake_github, http)
    before = http.get(f"{REPO}/pulls")
    fake_github.push("feature", {"src/more.py": "x = 1\n"}, "more")
    fake_github.commit_to_default({"docs/x.md": "x\n"}, "elsewhere")
    after = http.get(f"{REPO}/pulls", headers={"If-None-Match": before.headers["ETag"]})
    assert after.status_code == 200  # counted, though no pull request changed its own fields
    assert (
        after.json()[0]["base"]["repo"]["pushed_at"] > before.json()[0]["base"]["repo"]["pushed_at"]
    )


def test_content_creation_past_80_a_minute_is_a_secondary_limit(tmp_path: Path) -> None:
    clock = ManualClock(now=2_000_000_000.0)
    with FakeGitHub(tmp_path / "limited", now=clock) as fake:
        auth = {"Authorization": "token test-token"}
        with httpx.Client(base_url=fake.base_url, headers=auth, timeout=30) as client:
            made = [client.post(f"{REPO}/issues", json={"title": str(i)}) for i in range(81)]
            assert [r.status_code for r in made[:80]] == [201] * 80
            refused = made[80]
            assert refused.status_code == 403
            assert "secondary rate limit" in refused.json()["message"]
            assert "Retry-After" not in refused.headers
            assert client.get(f"{REPO}/issues").status_code == 200  # reads go on
            clock.advance(61)
            assert client.post(f"{REPO}/issues", json={"title": "later"}).status_code == 201


def test_a_fine_grained_token_may_not_read_check_runs(tmp_path: Path) -> None:
    fine = Access("bot", "fine-grained", permissions=FINE_GRAINED_PERMISSIONS)
    with FakeGitHub(tmp_path / "fine", tokens={"github_pat_x": fine}) as fake:
        head = fake.seed(BASE_FILES)
        auth = {"Authorization": "token github_pat_x"}
        with httpx.Client(base_url=fake.base_url, headers=auth, timeout=30) as client:
            refused = client.get(f"{REPO}/commits/{head}/check-runs")
            assert refused.status_code == 403
            assert refused.json()["message"] == "Resource not accessible by personal access token"
            assert client.get(f"{REPO}/commits/{head}/status").status_code == 200


def test_a_triage_user_may_apply_labels_but_not_create_them(tmp_path: Path) -> None:
    with FakeGitHub(tmp_path / "triage", tokens={"t": Access("tri", role="triage")}) as fake:
        fake.label_id("bug")
        auth = {"Authorization": "token t"}
        with httpx.Client(base_url=fake.base_url, headers=auth, timeout=30) as client:
            made = client.post(f"{REPO}/issues", json={"title": "x", "labels": ["bug"]})
            assert made.json()["labels"] == []  # dropped without a word
            number = made.json()["number"]
            assert client.post(
                f"{REPO}/issues/{number}/labels", json={"labels": ["bug"]}
            ).is_success
            new = client.post(f"{REPO}/issues/{number}/labels", json={"labels": ["new"]})
            assert new.status_code == 403
            assert client.post(f"{REPO}/labels", json={"name": "other"}).status_code == 403
        assert "new" not in fake.labels


def test_branch_protection_refuses_a_merge_with_githubs_words_until_satisfied(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    pull = make_pull(fake_github, http)
    fake_github.protect(checks=("ci",), reviews=1)
    merge = f"{REPO}/pulls/{pull['number']}/merge"
    first = http.put(merge, json={})
    assert (first.status_code, first.json()["message"]) == (
        405,
        'Required status check "ci" is expected.',
    )
    fake_github.add_check_run(pull["head"]["sha"], "ci")
    second = http.put(merge, json={})
    assert second.json()["message"] == (
        "At least 1 approving review is required by reviewers with write access."
    )
    fake_github.protection.clear()
    fake_github.merge_methods["merge"] = False
    third = http.put(merge, json={})
    assert third.json()["message"] == "Merge commits are not allowed on this repository."
    done = http.put(merge, json={"merge_method": "squash"})
    assert done.status_code == 200
    timeline = http.get(f"{REPO}/issues/{pull['number']}/timeline").json()
    assert [(e["event"], e["commit_id"]) for e in timeline] == [
        ("merged", done.json()["sha"]),
        ("closed", None),
    ]


def test_a_pull_request_that_exists_is_a_validation_failure_with_its_reason_in_errors(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    make_pull(fake_github, http)
    again = http.post(f"{REPO}/pulls", json={"title": "Again", "head": "feature", "base": "main"})
    assert again.status_code == 422
    assert again.json()["message"] == "Validation Failed"
    [reason] = again.json()["errors"]
    assert reason["message"] == "A pull request already exists for acme:feature."


def test_setting_an_empty_label_list_is_refused_as_github_refuses_it(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    """The schema's ``{"labels": [...]}`` has at least one item; removing every label is
    ``DELETE .../labels``, which the fake answers as GitHub does."""
    number = fake_github.add_issue("Labelled", "x", labels=["status:approved"])
    refused = http.put(f"{REPO}/issues/{number}/labels", json={"labels": []})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["field"] == "labels"
    assert fake_github.issues[number].labels == ["status:approved"]
    assert http.delete(f"{REPO}/issues/{number}/labels").status_code == 204
    assert fake_github.issues[number].labels == []
