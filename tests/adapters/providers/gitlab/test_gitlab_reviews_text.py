"""What cpe writes into a GitLab review and reads back from it (``gitlab/reviews.py``): where
a diff note can be anchored, the summary note's words and hidden markers."""

from __future__ import annotations

from adapters.providers import markers
from adapters.providers.gitlab.reviews import (
    clean,
    digest,
    new_side_lines,
    reviewed_head,
    summary_body,
)
from domain.results import AgentReview, AgentReviewComment

HEAD = "c" * 40
DIFF = (
    "@@ -1,4 +1,5 @@\n"
    " def answer():\n"
    "-    return 41\n"
    "+    return 42\n"
    "+\n"
    " # end\n"
    " tail\n"
    "@@ -20,2 +21,2 @@\n"
    " far\n"
    "-away\n"
    "+there\n"
)


def test_a_diff_shows_added_lines_and_context_lines_with_their_old_numbers() -> None:
    assert new_side_lines(DIFF) == {1: 1, 2: None, 3: None, 4: 3, 5: 4, 21: 20, 22: None}


def test_no_diff_anchors_nothing() -> None:
    assert new_side_lines(None) == {}
    assert new_side_lines("") == {}


def review() -> AgentReview:
    return AgentReview(
        verdict="needs-changes",
        summary="Return the right answer.",
        comments=(AgentReviewComment(path="src/app.py", line=99, body="Off by one."),),
    )


def test_the_summary_says_the_verdict_and_carries_the_digest_and_the_head() -> None:
    key = digest(HEAD, review())
    body = summary_body(review(), list(review().comments), None, key, HEAD)
    assert body.startswith("Return the right answer.\n\n**Verdict: needs-changes**")
    assert "- `src/app.py:99`: Off by one." in body
    assert markers.review_digest(body) == key
    assert reviewed_head(body) == HEAD
    assert clean(body) == body.split("\n\n<!--")[0]


def test_a_refused_approval_is_said_in_the_summary() -> None:
    approving = AgentReview(verdict="approve", summary="Fine.")
    body = summary_body(approving, [], "author cannot approve", digest(HEAD, approving), HEAD)
    assert "(GitLab did not take cpe's approval: author cannot approve)" in body


def test_a_head_marker_without_a_review_marker_names_no_reviewed_head() -> None:
    assert reviewed_head(f"copied <!-- cpe:review-head={HEAD} -->") is None


def test_the_digest_changes_with_the_head_and_the_content() -> None:
    assert digest(HEAD, review()) == digest(HEAD, review())
    assert digest(HEAD, review()) != digest("d" * 40, review())
    other = AgentReview(verdict="approve", summary="Return the right answer.")
    assert digest(HEAD, review()) != digest(HEAD, other)
