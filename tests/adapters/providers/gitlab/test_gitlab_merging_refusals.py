"""What GitLab's refusal of a merge means (``gitlab/merging.py``): the status of the refusal
and the merge request's ``detailed_merge_status`` read after it (doc/api/merge_requests.md,
"Merge status"), sorted into what the engine does: wait, retry, send back, or test again."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.providers.gitlab.merging import WAITING, landed, refusal_kind, refused
from domain.errors import ConflictError, MergeWaitError, ProviderError


def mr(detailed: str, state: str = "opened", **more: Any) -> dict[str, Any]:
    return {"iid": 3, "state": state, "detailed_merge_status": detailed, **more}


def refusal(status: int, words: str = "405 Method Not Allowed") -> ProviderError:
    return ProviderError(f"merge !3: {words}", status=status, transient=False)


@pytest.mark.parametrize("detailed", sorted(WAITING))
def test_what_a_merge_request_waits_for_is_a_wait(detailed: str) -> None:
    found = refused(refusal(405), mr(detailed), "main")
    assert isinstance(found, MergeWaitError)
    assert "waits to be merged into main" in str(found)
    assert detailed in found.reason


def test_a_wait_for_the_pipeline_is_said_in_words() -> None:
    found = refused(refusal(405), mr("ci_must_pass"), "main")
    assert isinstance(found, MergeWaitError)
    assert found.reason == "its pipeline must succeed (ci_must_pass)"


@pytest.mark.parametrize("status", [405, 406, 422])
def test_a_conflict_is_a_conflict_error_naming_the_files(status: int) -> None:
    found = refused(refusal(status), mr("conflict"), "main", "src/app.py")
    assert isinstance(found, ConflictError)
    assert "src/app.py" in str(found)


def test_a_branch_behind_a_fast_forward_project_cannot_merge_as_it_is() -> None:
    found = refused(refusal(405), mr("need_rebase"), "main")
    assert isinstance(found, ConflictError)
    assert "fast-forward" in str(found)


def test_a_closed_merge_request_cannot_be_merged() -> None:
    found = refused(refusal(405), mr("not_open", state="closed"), "main")
    assert isinstance(found, ConflictError)
    assert refusal_kind("not_open", "closed") == "closed"


def test_a_refusal_of_a_mergeable_merge_request_is_a_race_tried_again() -> None:
    found = refused(refusal(405), mr("mergeable"), "main")
    assert type(found) is ProviderError
    assert found.transient


def test_a_stale_sha_means_the_branch_moved_and_is_read_again() -> None:
    stale = ConflictError("merge !3: SHA does not match HEAD of source branch", status=409)
    found = refused(stale, mr("mergeable"), "main")
    assert type(found) is ProviderError
    assert (found.status, found.transient) == (409, True)


@pytest.mark.parametrize("status", [401, 403])
def test_a_token_that_may_not_merge_is_no_wait(status: int) -> None:
    found = refused(refusal(status, "401 Unauthorized"), mr("mergeable"), "main")
    assert type(found) is ProviderError
    assert not found.transient
    assert "does not let cpe merge" in str(found)


def test_a_transient_failure_stays_as_it_came() -> None:
    failure = ProviderError("merge !3: 502 Bad Gateway", status=502, transient=True)
    assert refused(failure, mr("mergeable"), "main") is failure


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"merge_commit_sha": "m" * 40, "squash_commit_sha": "s" * 40, "sha": "h" * 40}, "m" * 40),
        ({"merge_commit_sha": None, "squash_commit_sha": "s" * 40, "sha": "h" * 40}, "s" * 40),
        ({"merge_commit_sha": None, "squash_commit_sha": None, "sha": "h" * 40}, "h" * 40),
    ],
    ids=["merge commit", "squashed", "fast-forward"],
)
def test_what_landed_is_the_merge_commit_else_the_squash_else_the_head(
    fields: dict[str, Any], expected: str
) -> None:
    assert landed({"state": "merged", **fields}) == expected
    assert landed({"state": "opened", **fields}) is None
