"""Provider writes under intents (``actors/writes.py``), through the executor: retries,
intents, merges that wait, plans, and the writes a crash left pending, made again at start."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actors.journal import Journal
from actors.settings import RetrySettings
from domain.commands import (
    ApplyPlan,
    CreateRevision,
    MergeRevision,
    PostReview,
    TransitionStatus,
    UpdateRevision,
    idempotency_key,
)
from domain.errors import MergeWaitError, ProviderError
from domain.events import (
    CommandFailed,
    MergeWaiting,
    PlanApplied,
    RevisionCreated,
    StatusTransitioned,
)
from domain.models import (
    EngineState,
    ImplementorStartParams,
    Revision,
)
from domain.ports import RevisionProviderWriter, WorkProviderWriter
from domain.results import AgentReview, PlannedWorkItem, PlannerResult
from tests.actors.test_executor import Rig


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def test_a_transient_failure_is_retried(rig: Rig) -> None:
    rig.tracker.add_item("1")
    rig.tracker.fail_next("transition_status", ProviderError("bad gateway", status=502))
    [event] = rig.run(TransitionStatus(work_item_id="1", to="blocked", reason="why"))
    assert isinstance(event, StatusTransitioned)
    assert (event.work_item_id, event.to, event.reason) == ("1", "blocked", "why")
    assert event.at is not None
    assert rig.tracker.calls["transition_status"] == 2
    assert rig.tracker.work_items["1"].status == "blocked"


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    rig = Rig(tmp_path, retry=RetrySettings(attempts=3, initial_delay=0.1, max_delay=60))
    rig.tracker.add_item("1")
    rig.tracker.fail_next(
        "transition_status", ProviderError("slow down", status=429, retry_after=7)
    )
    [event] = rig.run(TransitionStatus(work_item_id="1", to="blocked"))
    assert isinstance(event, StatusTransitioned)
    assert rig.waits == [7]


def test_the_retry_backoff_doubles_up_to_its_cap(tmp_path: Path) -> None:
    rig = Rig(tmp_path, retry=RetrySettings(attempts=6, initial_delay=1, max_delay=10))
    rig.tracker.add_item("1")
    rig.tracker.fail_next(
        "transition_status", *(ProviderError("unavailable", status=503) for _ in range(5))
    )
    [event] = rig.run(TransitionStatus(work_item_id="1", to="blocked"))
    assert isinstance(event, StatusTransitioned)
    assert rig.waits == [1, 2, 4, 8, 10]
    assert rig.tracker.calls["transition_status"] == 6


def test_a_retry_wait_cut_short_by_shutdown_fails_the_command(tmp_path: Path) -> None:
    rig = Rig(tmp_path, retry=RetrySettings(attempts=4, initial_delay=1, max_delay=10))
    rig.executor.writes.wait = lambda seconds: True  # stopping: the wait returns at once
    rig.tracker.add_item("1")
    rig.tracker.fail_next("transition_status", ProviderError("unavailable", status=503))
    [failed] = rig.run(TransitionStatus(work_item_id="1", to="blocked"))
    assert isinstance(failed, CommandFailed)
    assert rig.tracker.calls["transition_status"] == 1


def test_the_intent_is_pending_in_the_journal_when_the_write_is_made(rig: Rig) -> None:
    rig.tracker.add_item("1")
    seen: list[Any] = []
    writer = rig.executor.writes.work_item_writer
    real_transition = writer.transition_status

    def transition_status(work_item_id: Any, to: Any) -> None:
        # another connection, as a restarted process would read it: committed, not just written
        other = Journal(rig.journal_path)
        try:
            seen.append(other.intent("transition:1:blocked"))
        finally:
            other.close()
        real_transition(work_item_id, to)

    writer.transition_status = transition_status  # type: ignore[method-assign]
    [event] = rig.run(TransitionStatus(work_item_id="1", to="blocked"))
    assert isinstance(event, StatusTransitioned)
    [intent] = seen
    assert intent is not None
    assert intent.status == "pending"
    assert intent.command == TransitionStatus(work_item_id="1", to="blocked")
    done = rig.journal.intent("transition:1:blocked")
    assert done is not None
    assert (done.status, done.result) == ("done", (event,))


def test_a_create_revision_intent_is_pending_when_the_provider_is_called(rig: Rig) -> None:
    command = CreateRevision(
        session_id="s1", work_item_id="1", branch_name="cpe/1", title="t", body="b", patch="p"
    )
    seen: list[tuple[str | None, Any]] = []
    writer = rig.executor.writes.revision_writer
    real_create = writer.create_from_patch

    def create_from_patch(*args: Any, idempotency_key: str | None = None) -> Any:
        intent = rig.journal.intent(idempotency_key) if idempotency_key else None
        seen.append((idempotency_key, intent.status if intent else None))
        return real_create(*args, idempotency_key=idempotency_key)

    writer.create_from_patch = create_from_patch  # type: ignore[method-assign]
    rig.run(command)
    [(key, status)] = seen
    assert key is not None
    assert status == "pending"


def test_a_persistent_failure_is_command_failed_and_the_intent_failed(rig: Rig) -> None:
    rig.tracker.add_item("1")
    errors = [ProviderError("down", status=503) for _ in range(3)]
    rig.tracker.fail_next("transition_status", *errors)
    [failed] = rig.run(TransitionStatus(work_item_id="1", to="blocked"))
    assert isinstance(failed, CommandFailed)
    assert "down" in failed.error
    assert rig.tracker.calls["transition_status"] == 3
    assert rig.journal.intent("transition:1:blocked").status == "failed"


def test_a_non_transient_failure_is_not_retried(rig: Rig) -> None:
    rig.tracker.fail_next("merge", ProviderError("forbidden", status=422))
    [failed] = rig.run(MergeRevision(work_item_id="1", revision_id="r1"))
    assert isinstance(failed, CommandFailed)
    assert rig.tracker.calls["merge"] == 1


def test_a_merge_the_provider_defers_waits_and_is_made_again_next_time(rig: Rig) -> None:
    rig.tracker.revisions["r1"] = Revision.model_validate(
        {"id": "r1", "title": "t", "work_item_id": "1", "branch": "cpe/1", "head_sha": "h1"}
    )
    rig.tracker.fail_next(
        "merge", MergeWaitError("waits", reason='Required status check "ci" is expected.')
    )
    merge = MergeRevision(work_item_id="1", revision_id="r1")
    [waiting] = rig.run(merge)
    assert isinstance(waiting, MergeWaiting)
    assert (waiting.revision_id, waiting.reason) == (
        "r1",
        'Required status check "ci" is expected.',
    )
    assert rig.tracker.calls["merge"] == 1  # no retry at once: waiting is what helps
    assert rig.journal.intent("merge:r1").status == "failed"
    assert [type(e).__name__ for e in rig.run(merge)] == ["RevisionMerged"]
    assert rig.tracker.calls["merge"] == 2


def test_a_waiting_merge_names_the_head_it_waits_with_and_is_logged_once_per_reason(
    rig: Rig,
) -> None:
    """The wait is recorded against the revision's head (a new head ends it), when it was
    seen, and why on the intent; the warning is said when the wait begins or its reason
    changes, not again on every poll that tries the merge."""
    from structlog.testing import capture_logs  # noqa: PLC0415

    from domain.models import MergeWait  # noqa: PLC0415

    revision = Revision.model_validate(
        {"id": "r1", "title": "t", "work_item_id": "1", "branch": "cpe/1", "head_sha": "h7"}
    )
    rig.tracker.revisions["r1"] = revision
    protected = 'Required status check "ci" is expected.'
    merge = MergeRevision(work_item_id="1", revision_id="r1")
    snapshot = EngineState(revisions={"r1": revision})

    def attempt(state: EngineState, reason: str) -> tuple[Any, list[Any]]:
        rig.tracker.fail_next("merge", MergeWaitError("waits", reason=reason))
        with capture_logs() as logs:
            [event] = rig.executor.execute(merge, state)
        return event, [e for e in logs if e["event"] == "merge held by the provider"]

    before = datetime.now(UTC)
    waiting, said = attempt(snapshot, protected)
    assert isinstance(waiting, MergeWaiting)
    assert (waiting.work_item_id, waiting.revision_id, waiting.head_sha) == ("1", "r1", "h7")
    assert waiting.at is not None
    assert waiting.at >= before
    assert rig.journal.intent("merge:r1").error == f"waiting: {protected}"
    assert [(e["revision_id"], e["work_item_id"], e["reason"]) for e in said] == [
        ("r1", "1", protected)
    ]
    known = MergeWait(work_item_id="1", head_sha="h7", reason=protected)
    waiting_again = snapshot.model_copy(update={"merge_waits": {"r1": known}})
    assert attempt(waiting_again, protected)[1] == []  # the same wait: not said again
    review = "At least 1 approving review is required."
    assert [e["reason"] for e in attempt(waiting_again, review)[1]] == [review]


def test_each_revision_write_hands_the_provider_what_its_command_holds(rig: Rig) -> None:
    """The patch of a new revision and of an update, and a review against its revision and
    head, reach the provider as the commands hold them; each result says when it happened."""
    before = datetime.now(UTC)
    [created] = rig.run(
        CreateRevision(
            session_id="s1", work_item_id="2", branch_name="cpe/2", title="T", body="B", patch="p1"
        )
    )
    rid = created.revision.id
    assert (created.session_id, created.work_item_id) == ("s1", "2")
    assert (created.revision.title, created.revision.branch) == ("T", "cpe/2")
    assert [f.patch for f in rig.tracker.files[rid]] == ["p1"]
    [updated] = rig.run(
        UpdateRevision(session_id="s2", work_item_id="2", revision_id=rid, patch="p2")
    )
    assert (updated.session_id, updated.work_item_id, updated.revision.id) == ("s2", "2", rid)
    assert [f.patch for f in rig.tracker.files[rid]] == ["p2"]
    review = AgentReview(verdict="needs-changes", summary="not yet")
    [posted] = rig.run(
        PostReview(session_id="r1", work_item_id="2", revision_id=rid, head_sha="h2", review=review)
    )
    assert (posted.revision_id, posted.head_sha, posted.verdict) == (
        rid,
        "h2",
        "needs-changes",
    )
    assert [(r.state, r.body) for r in rig.tracker.reviews[rid].reviews] == [
        ("needs-changes", "not yet")
    ]
    for event in (created, updated, posted):
        assert event.at is not None
        assert event.at >= before


def test_a_write_already_made_is_answered_from_the_journal(rig: Rig) -> None:
    command = CreateRevision(
        session_id="s1", work_item_id="1", branch_name="cpe/1", title="t", body="b", patch="p"
    )
    first = rig.run(command)
    second = rig.run(command)
    assert rig.tracker.calls["create_from_patch"] == 1
    assert [type(e) for e in second] == [RevisionCreated]
    assert second[0].revision == first[0].revision


def test_a_plan_creates_items_in_dependency_order_with_real_ids(rig: Rig) -> None:
    plan = PlannerResult(
        create=(
            PlannedWorkItem(temp_id="b", title="B", body="", blocked_by=("a",)),
            PlannedWorkItem(temp_id="a", title="A", body=""),
        )
    )
    [applied] = rig.run(ApplyPlan(session_id="p1", result=plan, spec_shas={"s.md": "1"}))
    assert isinstance(applied, PlanApplied)
    assert (applied.session_id, applied.spec_shas) == ("p1", {"s.md": "1"})
    by_title = {i.title: i for i in rig.tracker.work_items.values()}
    assert by_title["B"].blocked_by == (by_title["A"].id,)
    assert applied.created_ids == (by_title["A"].id, by_title["B"].id)
    # What the engine holds until a poll shows the tracker's links.
    assert applied.blockers == {by_title["A"].id: (), by_title["B"].id: (by_title["A"].id,)}


def test_two_plans_with_the_same_temp_ids_create_their_own_items(rig: Rig) -> None:
    """A plan's creations are keyed by its own command: another plan's item ``a`` is another
    item, not the first plan's answered again."""
    for session, title in (("p1", "From the first spec"), ("p2", "From the second spec")):
        plan = PlannerResult(create=(PlannedWorkItem(temp_id="a", title=title, body=""),))
        [applied] = rig.run(ApplyPlan(session_id=session, result=plan, spec_shas={}))
        assert isinstance(applied, PlanApplied)
    titles = sorted(i.title for i in rig.tracker.work_items.values())
    assert titles == ["From the first spec", "From the second spec"]


def test_a_plan_writes_each_items_body_labels_blockers_updates_and_closes(rig: Rig) -> None:
    """Everything the planner said reaches the tracker: bodies and labels of new items, a
    blocker that is an existing item's id, an item two others of the plan wait for (created
    once), updates of existing items' bodies and labels, and closes."""
    from domain.results import PlannedWorkItemUpdate  # noqa: PLC0415

    rig.tracker.add_item("7", "pending", title="Old", body="old body")
    rig.tracker.add_item("8", "pending", title="Gone")
    plan = PlannerResult(
        create=(
            PlannedWorkItem(temp_id="c", title="C", body="c body", blocked_by=("a", "b")),
            PlannedWorkItem(temp_id="b", title="B", body="b body", blocked_by=("a", "7")),
            PlannedWorkItem(temp_id="a", title="A", body="a body", labels=("api", "small")),
        ),
        update=(PlannedWorkItemUpdate(work_item_id="7", body="new body", labels=("docs",)),),
        close=("8",),
    )
    [applied] = rig.run(ApplyPlan(session_id="p1", result=plan, spec_shas={}))
    assert isinstance(applied, PlanApplied)
    items = rig.tracker.work_items
    by_title = {i.title: i for i in items.values()}
    a, b, c = by_title["A"], by_title["B"], by_title["C"]
    assert applied.created_ids == (a.id, b.id, c.id)
    assert rig.tracker.calls["create_work_item"] == 3
    assert (a.labels, a.blocked_by, b.blocked_by, c.blocked_by) == (
        ("api", "small"),
        (),
        (a.id, "7"),
        (a.id, b.id),
    )
    assert [rig.tracker.bodies[i.id] for i in (a, b, c)] == ["a body", "b body", "c body"]
    assert (rig.tracker.bodies["7"], items["7"].labels) == ("new body", ("docs",))
    assert items["8"].status == "done"


def test_a_plan_retried_after_a_partial_failure_creates_nothing_twice(rig: Rig) -> None:
    plan = PlannerResult(create=tuple(PlannedWorkItem(temp_id=t, title=t, body="") for t in "abc"))
    # the third creation fails: the first two exist, the command failed
    original = rig.executor.writes.work_item_writer.create_work_item
    calls = {"n": 0}

    def flaky(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ProviderError("boom", status=400)
        return original(*args, **kw)

    rig.executor.writes.work_item_writer.create_work_item = flaky  # type: ignore[method-assign]
    command = ApplyPlan(session_id="p1", result=plan, spec_shas={})
    [failed] = rig.run(command)
    assert isinstance(failed, CommandFailed)
    [applied] = rig.run(command)
    assert isinstance(applied, PlanApplied)
    assert sorted(i.title for i in rig.tracker.work_items.values()) == ["a", "b", "c"]


def test_a_cycle_in_a_plan_fails_the_command(rig: Rig) -> None:
    plan = PlannerResult(
        create=(
            PlannedWorkItem(temp_id="a", title="A", body="", blocked_by=("b",)),
            PlannedWorkItem(temp_id="b", title="B", body="", blocked_by=("a",)),
        )
    )
    [failed] = rig.run(ApplyPlan(session_id="p1", result=plan, spec_shas={}))
    assert isinstance(failed, CommandFailed)
    assert "the plan's blocked_by has a cycle: a -> b -> a" in failed.error
    assert rig.tracker.work_items == {}


# ------------------------------------------------------------------ intents by construction

_METHOD_COMMANDS = {  # writer method → the command whose intent covers it
    "create_work_item": "ApplyPlan",
    "update_work_item": "ApplyPlan",
    "close_work_item": "ApplyPlan",
    "transition_status": "TransitionStatus",
    "create_from_patch": "CreateRevision",
    "update_from_patch": "UpdateRevision",
    "post_review": "PostReview",
    "merge": "MergeRevision",
}


def _protocol_methods(protocol: type) -> set[str]:
    return {
        name
        for name in vars(protocol)
        if not name.startswith("_") and callable(vars(protocol)[name])
    }


def test_no_provider_write_is_made_before_its_intent_is_committed(rig: Rig) -> None:
    """Every method of both writer ports, wrapped: when it is called, another connection (as a
    restarted process would) must already see a pending intent of the command that makes it."""
    methods = _protocol_methods(WorkProviderWriter) | _protocol_methods(RevisionProviderWriter)
    assert methods == set(_METHOD_COMMANDS), "a writer method without its command in this test"
    seen: dict[str, list[list[str]]] = {name: [] for name in methods}
    depth: list[str] = []
    for writer in (rig.executor.writes.work_item_writer, rig.executor.writes.revision_writer):
        for name in methods:
            real = getattr(writer, name, None)
            if real is None:
                continue

            def wrapped(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
                if depth:  # the provider calling itself inside a write: that write's intent
                    return _real(*args, **kw)
                other = Journal(rig.journal_path)
                try:
                    pending = [i.command.type for i in other.intents("pending")]
                finally:
                    other.close()
                seen[_name].append(pending)
                depth.append(_name)
                try:
                    return _real(*args, **kw)
                finally:
                    depth.pop()

            setattr(writer, name, wrapped)
    rig.tracker.add_item("1")
    plan = PlannerResult(
        create=(PlannedWorkItem(temp_id="a", title="A", body="a"),),
        update=({"work_item_id": "1", "body": "new", "labels": ["x"]},),
        close=("1",),
    )
    rig.run(ApplyPlan(session_id="p", result=plan, spec_shas={"s.md": "x"}))
    rig.run(TransitionStatus(work_item_id="2", to="blocked"))
    [created] = rig.run(
        CreateRevision(
            session_id="s1", work_item_id="2", branch_name="cpe/2", title="t", body="b", patch="p"
        )
    )
    rid = created.revision.id
    rig.run(UpdateRevision(session_id="s2", work_item_id="2", revision_id=rid, patch="q"))
    review = AgentReview(verdict="approve", summary="ok")
    rig.run(
        PostReview(session_id="r", work_item_id="2", revision_id=rid, head_sha="h", review=review)
    )
    rig.run(MergeRevision(work_item_id="2", revision_id=rid))
    for name, calls in seen.items():
        assert calls, f"{name} was never called"
        for pending in calls:
            assert _METHOD_COMMANDS[name] in pending, f"{name} called with no intent: {pending}"


# ---------------------------------------------------------------------------- recovery at start


def _crashed_create(rig: Rig) -> CreateRevision:
    """A create-revision whose write reached the provider but whose intent a crash left
    pending (the answer, and the cycle's end, were lost)."""
    command = CreateRevision(
        session_id="s1", work_item_id="1", branch_name="cpe/1", title="t", body="b", patch="p"
    )
    key = idempotency_key(command)
    rig.journal.begin_intent(key, command)
    writer = rig.executor.writes.revision_writer
    writer.create_from_patch("1", "cpe/1", "t", "b", "p", idempotency_key=key)
    return command


def test_at_start_a_pending_write_is_made_again_with_its_key_and_answers_its_cycle(
    rig: Rig,
) -> None:
    command = _crashed_create(rig)
    assert rig.executor.writes.resume_pending(EngineState()) == 1
    assert rig.tracker.calls["create_from_patch"] == 2  # made again, with its key
    assert len(rig.tracker.revisions) == 1  # the provider found the first one
    assert rig.journal.intents("pending") == []
    [answer] = rig.run(command)  # the cycle that made it, processed again
    assert isinstance(answer, RevisionCreated)
    assert rig.tracker.calls["create_from_patch"] == 2  # answered from the journal
    rig.executor.writes.deliver_resumed()
    assert rig.queued() == []  # the cycle carries the results: not queued twice


def test_the_results_of_a_resumed_write_no_cycle_answered_are_queued(rig: Rig) -> None:
    _crashed_create(rig)
    rig.executor.writes.resume_pending(EngineState())
    rig.executor.writes.deliver_resumed()
    [queued] = rig.queued()
    assert isinstance(queued, RevisionCreated)


def test_a_pending_transition_is_left_to_its_cycle_and_settled_when_none_makes_it(
    rig: Rig,
) -> None:
    rig.tracker.add_item("1")
    command = TransitionStatus(work_item_id="1", to="blocked")
    rig.journal.begin_intent(idempotency_key(command), command, answer=False)
    assert rig.executor.writes.resume_pending(EngineState()) == 0
    assert rig.tracker.calls["transition_status"] == 0  # derived from the state: not made here
    rig.executor.writes.deliver_resumed()
    assert rig.journal.intents("pending") == []
    assert rig.queued() == []


def test_a_pending_transition_its_cycle_makes_again_keeps_that_result(rig: Rig) -> None:
    rig.tracker.add_item("1")
    command = TransitionStatus(work_item_id="1", to="blocked")
    key = idempotency_key(command)
    rig.journal.begin_intent(key, command, answer=False)
    assert rig.executor.writes.resume_pending(EngineState()) == 0
    [made] = rig.run(command)  # the cycle, processed again, makes it
    assert isinstance(made, StatusTransitioned)
    rig.executor.writes.deliver_resumed()
    settled = rig.journal.intent(key)
    assert settled.status == "done"
    assert settled.result == (made,)  # not overwritten as settled with nothing
    assert rig.tracker.calls["transition_status"] == 1


def test_a_resumed_write_that_fails_is_failed_and_the_others_are_still_resumed(
    rig: Rig,
) -> None:
    """Two writes a crash left pending; the first fails for good when made again: it is
    recorded failed (its cycle, processed again, deals with it), and the second is resumed
    all the same. A settled (done) intent is not delivered again."""
    merge = MergeRevision(work_item_id="9", revision_id="r9")
    rig.journal.begin_intent(idempotency_key(merge), merge)
    _crashed_create(rig)
    rig.tracker.fail_next("merge", ProviderError("no such pull request", status=404))
    assert rig.executor.writes.resume_pending(EngineState()) == 1
    failed = rig.journal.intent(idempotency_key(merge))
    assert failed.status == "failed"
    assert failed.error == "ProviderError: no such pull request (status 404)"
    assert rig.journal.intents("pending") == []
    rig.executor.writes.deliver_resumed()
    rig.executor.writes.deliver_resumed()  # once only
    [queued] = rig.queued()
    assert isinstance(queued, RevisionCreated)


def test_a_status_change_the_engine_makes_is_logged_with_why(rig: Rig) -> None:
    from structlog.testing import capture_logs  # noqa: PLC0415

    from domain.models import AgentRun, WorkItem  # noqa: PLC0415

    rig.tracker.add_item("1", "in-progress")
    params = ImplementorStartParams(session_id="s1", work_item_id="1", branch_name="cpe/1")
    run = AgentRun.model_validate(
        {"session_id": "s1", "params": params, "status": "failed", "failure_reason": "no key"}
    )
    snapshot = EngineState(
        work_items={"1": WorkItem(id="1", title="t", status="in-progress")},
        agent_runs={"s1": run},
        attempts={"1": 3},
    )
    with capture_logs() as logs:
        rig.executor.execute(TransitionStatus(work_item_id="1", to="blocked"), snapshot)
    [line] = [entry for entry in logs if entry["event"] == "status changed"]
    assert line["change"] == (
        "#1 in-progress → blocked: attempts exhausted (3 runs); last run: no key"
    )


def test_a_transition_whose_result_is_still_queued_is_not_written_or_recorded_twice(
    rig: Rig,
) -> None:
    rig.tracker.add_item("1", "approved")
    [first] = rig.run(TransitionStatus(work_item_id="1", to="done"))
    rig.inbox.put(first)  # its result, journaled and waiting behind the cycle that decided it
    # The same transition decided again before that result is processed (a poll saw the merge)
    assert rig.run(TransitionStatus(work_item_id="1", to="done")) == []
    assert rig.tracker.calls["transition_status"] == 1
    # Another transition of the item queued after it: the provider must hold the new one last
    rig.inbox.put(StatusTransitioned(work_item_id="1", to="blocked"))
    [again] = rig.run(TransitionStatus(work_item_id="1", to="done"))
    assert isinstance(again, StatusTransitioned)
    assert rig.tracker.calls["transition_status"] == 2
