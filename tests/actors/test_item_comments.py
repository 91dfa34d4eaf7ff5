"""What cpe says on a work item in a tracker that takes comments (``domain/item_comments.py``,
``actors/writes.py``): the revision opened, the item stopped and why, the revision merged;
each once, never at the write's expense, and again after a crash left the write pending."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from domain.commands import CreateRevision, MergeRevision, TransitionStatus, idempotency_key
from domain.errors import ProviderError
from domain.events import RevisionCreated, RevisionMerged, StatusTransitioned
from domain.item_comments import item_comment
from domain.models import EngineState, WorkItemId
from domain.ports import WorkItemCommenter
from tests.actors.test_executor import Rig
from tests.fakes.provider import FakeTracker, FakeWorkWriter


class CommentingWriter(FakeWorkWriter):
    """The fake tracker's writer, taking comments as Linear's and Jira's do: one per key."""

    def __init__(self, t: FakeTracker) -> None:
        super().__init__(t)
        self.comments: list[tuple[str, str]] = []
        self.keys: set[str] = set()
        self.fail: Exception | None = None

    def comment(
        self, work_item_id: WorkItemId, body: str, *, idempotency_key: str | None = None
    ) -> None:
        if self.fail is not None:
            raise self.fail
        if idempotency_key is not None:
            if idempotency_key in self.keys:
                return
            self.keys.add(idempotency_key)
        self.comments.append((work_item_id, body))


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    rig = Rig(tmp_path)
    rig.executor.writes.work_item_writer = CommentingWriter(rig.tracker)
    rig.tracker.add_item("1")
    return rig


def comments(rig: Rig) -> list[tuple[str, str]]:
    writer = rig.executor.writes.work_item_writer
    assert isinstance(writer, CommentingWriter)
    return writer.comments


def create(session: str = "s1") -> CreateRevision:
    return CreateRevision(
        session_id=session,
        work_item_id="1",
        branch_name="cpe/1-add-x",
        title="Add   x\nnow",
        body="b",
        patch="p",
    )


def test_the_commenting_writer_is_what_the_port_names() -> None:
    assert isinstance(CommentingWriter(FakeTracker()), WorkItemCommenter)
    assert not isinstance(FakeWorkWriter(FakeTracker()), WorkItemCommenter)


def test_a_revision_opened_is_said_once_on_its_item(rig: Rig) -> None:
    [created] = rig.run(create())
    assert isinstance(created, RevisionCreated)
    [(item, body)] = comments(rig)
    assert item == "1"
    assert body == (
        f"cpe opened revision {created.revision.id} for this item, on branch `cpe/1-add-x`: "
        "Add x now"
    )
    rig.run(create())  # the same write asked again: answered from the journal
    assert len(comments(rig)) == 1


def test_an_item_stopped_is_said_with_its_reason_and_other_changes_are_not(rig: Rig) -> None:
    rig.run(TransitionStatus(work_item_id="1", to="in-progress"))
    assert comments(rig) == []
    rig.run(TransitionStatus(work_item_id="1", to="needs-refinement", reason="the spec\nis vague"))
    assert comments(rig) == [("1", "cpe set this item to needs-refinement: the spec is vague")]


def test_the_same_stop_again_later_is_said_again(rig: Rig) -> None:
    """A transition recurs (blocked, pending, blocked): each is its own comment."""
    for _ in range(2):
        rig.run(TransitionStatus(work_item_id="1", to="blocked", reason="stuck"))
        rig.run(TransitionStatus(work_item_id="1", to="pending"))
    assert [body for _, body in comments(rig)] == ["cpe set this item to blocked: stuck"] * 2


def test_a_stop_without_a_reason_is_explained_from_the_state(rig: Rig) -> None:
    rig.run(TransitionStatus(work_item_id="1", to="blocked"))
    [(_, body)] = comments(rig)
    assert body == "cpe set this item to blocked."  # the rig's state does not hold the item


def test_a_stop_explained_by_the_state_alone_says_where_the_item_was() -> None:
    why = "#7 in-review → blocked"  # explain_transition's words when no run says more
    said = item_comment(TransitionStatus(work_item_id="7", to="blocked"), [], why)
    assert said is not None
    assert said.body == "cpe set this item to blocked (it was in-review)."


def test_the_explanation_on_the_item_does_not_repeat_the_item_and_the_status() -> None:
    # Seen on Linear: "cpe set this item to blocked: ENG-9 in-progress → blocked: attempts
    # exhausted (3 runs); last run: ..."
    why = "ENG-9 in-progress → blocked: attempts exhausted (3 runs); last run: no changes"
    said = item_comment(TransitionStatus(work_item_id="ENG-9", to="blocked"), [], why)
    assert said == (
        "ENG-9",
        "cpe set this item to blocked: attempts exhausted (3 runs); last run: no changes",
    )
    said = item_comment(TransitionStatus(work_item_id="7", to="blocked"), [], "the spec → blocked")
    assert said is not None
    assert said.body == "cpe set this item to blocked: the spec → blocked"  # a reason as given


def test_a_merge_is_said_with_its_sha(rig: Rig) -> None:
    [created] = rig.run(create())
    assert isinstance(created, RevisionCreated)
    rid = created.revision.id
    [merged] = rig.run(MergeRevision(work_item_id="1", revision_id=rid))
    assert isinstance(merged, RevisionMerged)
    assert merged.merge_sha is not None
    assert comments(rig)[-1] == ("1", f"cpe merged revision {rid} as {merged.merge_sha[:12]}.")


def test_a_comment_that_fails_leaves_the_write_standing(rig: Rig) -> None:
    writer = rig.executor.writes.work_item_writer
    assert isinstance(writer, CommentingWriter)
    writer.fail = ProviderError("comments are off", status=403)
    with structlog.testing.capture_logs() as logs:
        [created] = rig.run(create())
    assert isinstance(created, RevisionCreated)
    assert rig.journal.intents("pending") == []
    [warning] = [e for e in logs if e["event"].startswith("the comment on the work item failed")]
    assert warning["work_item_id"] == "1"
    assert "comments are off" in warning["error"]


def test_a_write_a_crash_left_pending_is_said_when_made_again_and_only_once(rig: Rig) -> None:
    """Killed after the write and before its intent was finished: the restart makes the write
    again (the provider finds it) and the comment with the same key (the tracker finds it)."""
    command = create()
    key = idempotency_key(command)
    rig.journal.begin_intent(key, command)
    revision = rig.executor.writes.revision_writer.create_from_patch(
        "1", "cpe/1-add-x", "t", "b", "p", idempotency_key=key
    )
    writer = rig.executor.writes.work_item_writer
    assert isinstance(writer, CommentingWriter)
    writer.comment("1", "said before the kill", idempotency_key=f"{key}:comment")
    assert rig.executor.writes.resume_pending(EngineState()) == 1
    assert comments(rig) == [("1", "said before the kill")]
    assert rig.tracker.revisions[revision.id].branch == "cpe/1-add-x"


def test_a_status_written_again_whose_result_is_queued_says_nothing(rig: Rig) -> None:
    [moved] = rig.run(TransitionStatus(work_item_id="1", to="blocked", reason="r"))
    assert isinstance(moved, StatusTransitioned)
    rig.inbox.put(moved, internal=True)
    assert rig.run(TransitionStatus(work_item_id="1", to="blocked", reason="r")) == []
    assert len(comments(rig)) == 1


def test_a_comment_an_outage_refused_is_said_before_the_next_one(rig: Rig) -> None:
    """Linear down while a revision was opened: its comment was lost for good, and the issue
    said only "cpe merged revision N" (seen in a trial). Kept, it is said again, first."""
    writer = rig.executor.writes.work_item_writer
    assert isinstance(writer, CommentingWriter)
    writer.fail = ProviderError("cannot reach Linear: ConnectError", transient=True)
    with structlog.testing.capture_logs() as logs:
        [created] = rig.run(create())
    assert isinstance(created, RevisionCreated)
    assert comments(rig) == []
    [warning] = [e for e in logs if e["event"].startswith("the comment on the work item failed")]
    assert warning["event"].endswith("; said again with the next one")
    writer.fail = None
    rid = created.revision.id
    [merged] = rig.run(MergeRevision(work_item_id="1", revision_id=rid))
    assert isinstance(merged, RevisionMerged)
    assert [body.split(" for this item")[0].split(" as ")[0] for _, body in comments(rig)] == [
        f"cpe opened revision {rid}",
        f"cpe merged revision {rid}",
    ]
    rig.run(TransitionStatus(work_item_id="1", to="blocked", reason="r"))
    assert len(comments(rig)) == 3  # each said once


def test_a_comment_the_tracker_refuses_for_good_is_not_said_again(rig: Rig) -> None:
    writer = rig.executor.writes.work_item_writer
    assert isinstance(writer, CommentingWriter)
    writer.fail = ProviderError("comments are off", status=400)
    rig.run(create())
    writer.fail = None
    rig.run(TransitionStatus(work_item_id="1", to="blocked", reason="r"))
    assert [body for _, body in comments(rig)] == ["cpe set this item to blocked: r"]
