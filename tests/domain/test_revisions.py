"""What a revision needs next, tested on their own: reviewers for in-review items, up to the
free slots."""

from __future__ import annotations

from domain.revisions import reviews_wanted
from tests.domain.builders import item, reviewer_run, revision, state

# ---------------------------------------------------------------------------- reviewers wanted


def test_reviewers_are_started_for_in_review_items_up_to_the_free_slots() -> None:
    waiting = [item(str(n), "in-review", linked_revision=f"r{n}") for n in (2, 3, 4)]
    before = state(
        item("1", "in-progress"),
        *waiting,
        revisions=[revision(f"r{n}", str(n)) for n in (2, 3, 4)],
    )

    def wanted(slots: int) -> list[str]:
        commands = reviews_wanted(before, max_attempts=3, max_concurrent={"reviewer": slots})
        return [c.params.work_item_id for c in commands]  # type: ignore[attr-defined]

    assert wanted(0) == []
    assert wanted(1) == ["2"]  # an item not in review first does not stop the walk
    assert wanted(2) == ["2", "3"]
    assert wanted(5) == ["2", "3", "4"]
    busy = before.model_copy(update={"agent_runs": {"v9": reviewer_run("v9", "2", "r2")}})
    assert [
        c.params.work_item_id  # type: ignore[attr-defined]
        for c in reviews_wanted(busy, max_attempts=3, max_concurrent={"reviewer": 2})
    ] == ["3"]
