"""The fake GitHub merges as GitHub does, seen through githubkit's own client and models: a pull
request's ``mergeable`` is computed lazily (null on the first read after either branch moved,
then true or false) with the ``mergeable_state`` GitHub documents; the merge endpoint refuses a
conflict with 405; "Merge a branch" answers 201 with the commit, 204 when there is nothing to
merge, 409 on a conflict, 404 for a missing branch, 403 without push access, and moves the
branch as a push does; and a comparison tells which side is ahead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from githubkit import GitHub, TokenAuthStrategy
from githubkit.exception import RequestFailed
from githubkit_schemas.v2026_03_10.models import PullRequest, SimpleUser

from tests.fakes.github import FakeGitHub
from tests.fakes.github.records import FINE_GRAINED_PERMISSIONS, Access
from tests.fakes.github.routes_merge import BEHIND, NOT_MERGEABLE
from tests.support.github import running_github

OWNER, REPO = "acme", "widgets"
OURS = {"src/app.py": "def answer():\n    return 42\n"}
THEIRS = {"src/app.py": "def answer():\n    return 40\n"}  # the same line: a conflict
ELSEWHERE = {"docs/more.md": "more\n"}  # no conflict with either


def client_for(fake: FakeGitHub, token: str = "test-token") -> GitHub[Any]:
    return GitHub(
        TokenAuthStrategy(token),
        base_url=fake.base_url + "/",
        auto_retry=False,
        http_cache=False,
        timeout=30,
    )


@pytest.fixture
def client(fake_github: FakeGitHub) -> Iterator[GitHub[Any]]:
    with client_for(fake_github) as made:
        yield made


def read(client: GitHub[Any], number: int) -> PullRequest:
    return client.rest.pulls.get(OWNER, REPO, number).parsed_data


def computed(client: GitHub[Any], number: int) -> PullRequest:
    """The pull request once GitHub has computed its mergeability: the first read after a move
    answers null and starts the computation, the next has it."""
    first = read(client, number)
    assert (first.mergeable, first.mergeable_state) == (None, "unknown")
    return read(client, number)


def refusal(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    """GitHub's status and message when ``call(*args, **kwargs)`` is refused."""
    with pytest.raises(RequestFailed) as failed:
        call(*args, **kwargs)
    raw = failed.value.response.raw_response
    return raw.status_code, raw.json()["message"]


# ------------------------------------------------------------------ mergeable, mergeable_state


def test_mergeable_is_null_on_the_first_read_then_true_and_clean(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    first = read(client, number)
    assert (first.mergeable, first.mergeable_state) == (None, "unknown")
    second = read(client, number)
    assert (second.mergeable, second.mergeable_state) == (True, "clean")
    third = read(client, number)  # computed for these two heads: it stays
    assert (third.mergeable, third.mergeable_state) == (True, "clean")


def test_a_moved_base_makes_mergeable_null_again_then_false_and_dirty(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    assert computed(client, number).mergeable is True
    fake_github.commit_to_default(THEIRS, "theirs")
    pull = computed(client, number)
    assert (pull.mergeable, pull.mergeable_state) == (False, "dirty")


def test_a_pushed_head_makes_mergeable_null_again(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    assert computed(client, number).mergeable is True
    fake_github.push("feature", ELSEWHERE, "more")
    pull = computed(client, number)
    assert (pull.mergeable, pull.mergeable_state) == (True, "clean")


def test_a_merged_pull_request_has_no_mergeability(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    client.rest.pulls.merge(OWNER, REPO, number)
    pull = read(client, number)
    assert (pull.merged, pull.mergeable, pull.mergeable_state) == (True, None, "unknown")


def test_mergeable_state_is_blocked_by_a_required_check_and_unstable_by_another(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    fake_github.protect(checks=("ci",))
    number = fake_github.add_pull("feature", OURS, "Answer")
    head = fake_github.pulls[number].head_sha
    assert computed(client, number).mergeable_state == "blocked"
    fake_github.add_check_run(head, "ci", conclusion="success")
    assert read(client, number).mergeable_state == "clean"
    fake_github.add_check_run(head, "lint", conclusion="failure")  # not required
    assert read(client, number).mergeable_state == "unstable"
    fake_github.add_check_run(head, "lint", status="in_progress", conclusion=None)
    assert read(client, number).mergeable_state == "unstable"  # pending is not passing either
    fake_github.add_status(head, "deploy", "success")
    fake_github.add_check_run(head, "lint", conclusion="success")
    assert read(client, number).mergeable_state == "clean"


def test_mergeable_state_is_behind_only_where_protection_wants_branches_up_to_date(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    assert computed(client, number).mergeable_state == "clean"  # GitHub merges it as it is
    fake_github.protect(up_to_date=True)
    assert read(client, number).mergeable_state == "behind"
    assert refusal(client.rest.pulls.merge, OWNER, REPO, number) == (405, BEHIND)
    assert fake_github.pulls[number].merged is False


def test_the_list_carries_no_mergeability_as_githubs_simple_pull_request(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    fake_github.add_pull("feature", OURS, "Answer")
    [listed] = client.rest.pulls.list(OWNER, REPO).raw_response.json()
    assert "mergeable" not in listed
    assert "mergeable_state" not in listed


def test_merging_a_conflicting_pull_request_is_refused_with_405_not_mergeable(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    base = fake_github.commit_to_default(THEIRS, "theirs")
    assert computed(client, number).mergeable_state == "dirty"
    assert refusal(client.rest.pulls.merge, OWNER, REPO, number) == (405, NOT_MERGEABLE)
    assert fake_github.default_head() == base
    assert fake_github.pulls[number].merged is False


# ------------------------------------------------------------------ merge a branch


def test_merging_a_branch_answers_201_with_githubs_commit_and_moves_the_pull_request(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    before = fake_github.pulls[number].head_sha
    updated, pushed = fake_github.issues[number].updated_at, fake_github.pushed_at
    base = fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    response = client.rest.repos.merge(
        OWNER, REPO, base="feature", head="main", commit_message="Bring main in"
    )
    assert response.status_code == 201
    made = response.parsed_data  # githubkit's own Commit model
    assert [p.sha for p in made.parents] == [before, base]
    assert made.commit.message == "Bring main in"
    assert isinstance(made.author, SimpleUser)
    assert made.author.login == "cpe-bot"  # the authenticated user authors the merge
    assert [f.filename for f in made.files or []] == ["docs/more.md"]
    assert fake_github.git.resolve("refs/heads/feature") == made.sha
    # As a push: the pull request (and whatever watches its head, as CI) sees the new head.
    assert fake_github.pulls[number].head_sha == made.sha
    assert read(client, number).head.sha == made.sha
    assert fake_github.issues[number].updated_at > updated
    assert fake_github.pushed_at > pushed
    tree = fake_github.git.line("rev-parse", f"{made.sha}^{{tree}}")
    assert fake_github.git.line("ls-tree", "--name-only", tree, "docs/more.md") == "docs/more.md"


def test_merging_a_branch_by_sha_writes_githubs_default_message(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    fake_github.add_pull("feature", OURS, "Answer")
    base = fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    made = client.rest.repos.merge(OWNER, REPO, base="feature", head=base).parsed_data
    assert made.commit.message == f"Merge {base} into feature"


def test_merging_what_the_branch_already_contains_answers_204_without_a_body(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    head = fake_github.pulls[number].head_sha
    response = client.rest.repos.merge(OWNER, REPO, base="feature", head="main")
    assert (response.status_code, response.raw_response.content) == (204, b"")
    assert fake_github.git.resolve("refs/heads/feature") == head


def test_a_conflicting_merge_answers_409_and_writes_nothing(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    number = fake_github.add_pull("feature", OURS, "Answer")
    head = fake_github.pulls[number].head_sha
    fake_github.commit_to_default(THEIRS, "theirs")
    merge = client.rest.repos.merge
    assert refusal(merge, OWNER, REPO, base="feature", head="main") == (409, "Merge conflict")
    assert fake_github.git.resolve("refs/heads/feature") == head
    assert fake_github.pulls[number].head_sha == head


def test_a_missing_base_or_head_answers_404_with_githubs_words(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    fake_github.add_pull("feature", OURS, "Answer")
    merge = client.rest.repos.merge
    assert refusal(merge, OWNER, REPO, base="gone", head="main") == (404, "Base does not exist")
    assert refusal(merge, OWNER, REPO, base="feature", head="gone") == (
        404,
        "Head does not exist",
    )


@pytest.mark.parametrize(
    "who",
    [
        Access("triager", role="triage"),
        Access("bot", "fine-grained", permissions={"issues": "write"}),
    ],
)
def test_merging_a_branch_without_push_access_is_refused_with_403(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, who: Access
) -> None:
    tokens: dict[str, str | Access] = {"test-token": "cpe-bot", "limited": who}
    with (
        running_github(tmp_path, monkeypatch, tokens=tokens) as fake,
        client_for(fake, "limited") as limited,
    ):
        fake.add_pull("feature", OURS, "Answer")
        head = fake.git.resolve("refs/heads/feature")
        fake.commit_to_default(ELSEWHERE, "elsewhere")
        merge = limited.rest.repos.merge
        assert refusal(merge, OWNER, REPO, base="feature", head="main") == (403, who.refusal)
        assert fake.git.resolve("refs/heads/feature") == head


def test_a_fine_grained_token_with_contents_write_may_merge_a_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fine = Access("bot", "fine-grained", permissions=FINE_GRAINED_PERMISSIONS)
    with (
        running_github(tmp_path, monkeypatch, tokens={"fine": fine}) as fake,
        client_for(fake, "fine") as allowed,
    ):
        fake.add_pull("feature", OURS, "Answer")
        fake.commit_to_default(ELSEWHERE, "elsewhere")
        assert allowed.rest.repos.merge(OWNER, REPO, base="feature", head="main").status_code == 201


# ------------------------------------------------------------------ compare


def test_a_comparison_says_which_side_is_ahead_and_lists_the_files_since_the_merge_base(
    fake_github: FakeGitHub, client: GitHub[Any]
) -> None:
    start = fake_github.default_head()
    number = fake_github.add_pull("feature", OURS, "Answer")
    head = fake_github.pulls[number].head_sha

    def compare(basehead: str) -> Any:
        return client.rest.repos.compare_commits(OWNER, REPO, basehead).parsed_data

    ahead = compare("main...feature")
    assert (ahead.status, ahead.ahead_by, ahead.behind_by) == ("ahead", 1, 0)
    assert ahead.merge_base_commit.sha == start
    assert [c.sha for c in ahead.commits] == [head]
    assert compare(f"feature...{start}").status == "behind"
    assert compare("feature...feature").status == "identical"
    theirs = fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    diverged = compare(f"{theirs}...{OWNER}:feature")
    assert (diverged.status, diverged.ahead_by, diverged.behind_by) == ("diverged", 1, 1)
    assert diverged.base_commit.sha == theirs
    # Three dots: the files the head changed since the merge base, not those main changed.
    assert [f.filename for f in diverged.files or []] == ["src/app.py"]


def test_comparing_an_unknown_ref_answers_404(fake_github: FakeGitHub) -> None:
    headers = {"Authorization": "token test-token"}
    with httpx.Client(base_url=fake_github.base_url, headers=headers, timeout=30) as http:
        assert http.get(f"/repos/{OWNER}/{REPO}/compare/main...gone").status_code == 404
