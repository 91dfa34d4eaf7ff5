"""The dashboard shows what live runs do and what reviews said, over a real engine (fake
provider and runtime, a real journal): each run's transcript written by the real artifact
store, as a runtime writes it.

- the live box (``GET /api/events``' ``output`` events) carries the run's activity from its
  transcript: the tool calls with their commands and paths, the results' first lines, the
  text; from the start of the run, as it comes, then the run's end; never a secret;
- ``GET /api/runs/{session}`` gives the same lines;
- a review's inline comments are under its verdict on the item, escaped on the page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actors.engine import Engine
from adapters.runtime.artifacts.store import RunArtifacts
from domain.models import Pipeline, Revision, RevisionId, SessionId, WorkItemId
from domain.results import AgentReview, AgentReviewComment, ReviewerResult
from tests.actors.conftest import Harness, wait_until
from tests.adapters.dashboard.test_dashboard import Board, _next_event, harness, serving
from tests.fakes.runtime import FakeRun
from tests.support.transcripts import assistant, open_record, text, tool

WORKTREE = "/srv/worktrees/cpe/1-greeting"
SECRET = "ghp_" + "Z9y8X7w6V5" * 4  # a token an agent's command carried

__all__ = ["harness"]  # the fixture, shared with the dashboard's other tests


@pytest.fixture
def board(harness: Harness) -> Iterator[Board]:
    harness.tracker.add_item("1", "pending", title="Greeting")
    with serving(harness) as made:
        yield made


def record(harness: Harness, session_id: str) -> RunArtifacts:
    """The run's artifact store, opened as its runtime opens it."""
    return open_record(harness.tmp_path, session_id, WORKTREE)


def recording(board: Board) -> tuple[FakeRun, RunArtifacts]:
    """The implementor's run on #1 (``Board.running``) and its artifact store."""
    run = board.running()
    return run, record(board.harness, run.session_id)


def result(output: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": "toolu_Bash", "content": output}
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def outputs_until(lines: Iterator[str], wanted: str, session: str) -> str:
    """The text of the run's ``output`` events, read until ``wanted`` is in it."""
    seen = ""
    while wanted not in seen:
        _, data = _next_event(lines, "output")
        assert data["session"] == session
        assert not data.get("end"), seen
        seen += data["text"] + "\n"
    return seen


def test_events_give_the_state_then_what_a_run_does_from_its_start_as_it_comes(
    board: Board,
) -> None:
    run, files = recording(board)
    files.record_native(
        assistant(
            text("Writing greet(name)."),
            tool("Write", file_path=f"{WORKTREE}/greet.py", content="x\n"),
        )
    )
    run.say("prose from the engine's stream")  # the live box shows the transcript, not this
    with board.client.stream("GET", "/api/events") as events:
        lines = events.iter_lines()
        kind, state = _next_event(lines)  # the state at once
        assert kind == "state"
        assert state["runs"]["active"][0]["session_id"] == run.session_id
        early = outputs_until(lines, "tool Write: greet.py (2 chars)", run.session_id)
        assert early.startswith("assistant: Writing greet(name).\n")  # from the start
        files.record_native(assistant(tool("Bash", command="python3 -m unittest -q")))
        files.record_native(result("OK\nRan 1 test in 0.001s"))
        later = outputs_until(lines, "tool result: OK (+1 line)", run.session_id)
        assert "tool Bash: python3 -m unittest -q\n" in later
        assert "prose from the engine's stream" not in early + later


def test_a_run_ends_its_live_box_after_its_last_lines(board: Board) -> None:
    run, files = recording(board)
    with board.client.stream("GET", "/api/events") as events:
        lines = events.iter_lines()
        files.record_native(assistant(text("Done.")))
        files.finish("completed", 0)
        run.complete()
        assert "assistant: Done." in outputs_until(lines, "assistant: Done.", run.session_id)
        _, data = _next_event(lines, "output")
        assert data == {"session": run.session_id, "end": True}


def test_a_run_still_starting_when_the_page_connects_shows_its_activity_once_started(
    harness: Harness,
) -> None:
    # The page connects while the run is requested but its runtime has not started it: it has
    # no transcript yet. What it does must still reach the page once it starts.
    harness.tracker.add_item("1", "pending", title="Greeting")
    harness.script(block_start=lambda p: True)
    with serving(harness) as board, board.client.stream("GET", "/api/events") as events:
        lines = events.iter_lines()
        wait_until(lambda: bool(harness.runtime.starting), board.engine)
        [sid] = harness.runtime.starting
        while True:  # the state that shows the run, before its start has returned
            _, view = _next_event(lines, "state")
            if [r["session_id"] for r in view["runs"]["active"]] == [sid]:
                break
        harness.runtime.release_start.set()
        harness.runtime.wait_runs(1)
        record(harness, sid).record_native(assistant(tool("Read", file_path=f"{WORKTREE}/a.py")))
        assert "tool Read: a.py" in outputs_until(lines, "tool Read: a.py", sid)


def test_the_live_box_and_the_runs_view_never_show_a_secret_a_command_carried(
    board: Board,
) -> None:
    run, files = recording(board)
    files.record_native(
        assistant(tool("Bash", command=f"curl -H 'Authorization: Bearer {SECRET}' x"))
    )
    files.record_native(result(f"token {SECRET}"))
    with board.client.stream("GET", "/api/events") as events:
        shown = outputs_until(events.iter_lines(), "tool result: ", run.session_id)
    assert "tool Bash: curl -H" in shown
    detail = board.client.get(f"/api/runs/{run.session_id}").json()
    assert "tool Bash: curl -H" in detail["output"]
    for where in (shown, detail["output"]):
        assert SECRET not in where
        assert "[REDACTED]" in where


def test_a_runs_view_gives_its_activity_live_and_once_ended(board: Board) -> None:
    run, files = recording(board)
    files.record_native(assistant(text("Editing."), tool("Edit", file_path=f"{WORKTREE}/g.py")))
    live = board.client.get(f"/api/runs/{run.session_id}").json()
    assert (live["live"], live["output"]) == (True, "assistant: Editing.\ntool Edit: g.py")
    files.finish("completed", 0)
    run.complete()
    wait_until(
        lambda: board.engine.get_state().agent_runs[run.session_id].is_terminal, board.engine
    )
    ended = board.client.get(f"/api/runs/{run.session_id}").json()
    assert (ended["live"], ended["output"]) == (False, "assistant: Editing.\ntool Edit: g.py")


# ---------------------------------------------------------------------------- review comments

COMMENTS = (
    AgentReviewComment(path="greet.py", line=5, body="Strip the name.\nAnd reject <b>blank</b>."),
    AgentReviewComment(path="tests/test_greet.py", line=None, body="Test a blank name."),
)


@pytest.fixture
def reviewed(harness: Harness) -> Iterator[Board]:
    """Item 1 in review: its reviewer asked for changes with two inline comments."""
    harness.tracker.add_item("1", "in-review", title="Greeting")
    harness.tracker.revisions["r1"] = Revision(
        id=RevisionId("r1"),
        title="Greeting",
        work_item_id=WorkItemId("1"),
        branch="cpe/1-greeting",
        head_sha="r1-h1",
        pipeline=Pipeline(status="success"),
    )
    with serving(harness) as made:
        [run] = harness.runtime.wait_runs(1)
        assert run.params.role == "reviewer"
        review = AgentReview(verdict="needs-changes", summary="Two problems.", comments=COMMENTS)
        finish_review(harness, run, review)
        engine = made.engine
        wait_until(lambda: _outcome(engine, run.session_id) == "needs-changes", engine)
        yield made


def _outcome(engine: Engine, session_id: SessionId) -> str | None:
    """The run's outcome once the engine has it (the runtime has a run before the engine has
    processed its request)."""
    run = engine.get_state().agent_runs.get(session_id)
    return None if run is None else run.outcome


def finish_review(harness: Harness, run: FakeRun, review: AgentReview) -> None:
    """The reviewer's final response recorded as its runtime records it, then its result."""
    output = ReviewerResult(review=review).model_dump(mode="json")
    files = record(harness, run.session_id)
    files.finish("completed", 0, final_response={"type": "result", "structured_output": output})
    run.complete(ReviewerResult(review=review))


def test_the_state_gives_each_review_its_summary_and_inline_comments(reviewed: Board) -> None:
    [item] = reviewed.client.get("/api/state").json()["work_items"]
    [review] = item["reviews"]
    assert (review["verdict"], review["summary"]) == ("needs-changes", "Two problems.")
    assert review["comments"] == [
        {"path": "greet.py", "line": 5, "where": "greet.py:5", "body": COMMENTS[0].body},
        {
            "path": "tests/test_greet.py",
            "line": None,
            "where": "tests/test_greet.py",
            "body": "Test a blank name.",
        },
    ]


def test_the_item_card_folds_the_inline_comments_under_the_verdict_escaped(
    reviewed: Board,
) -> None:
    board = reviewed.client.get("/board").text
    card = board.split('id="item-1"', 1)[1].split("</article>", 1)[0]
    verdict = card.index('class="badge needs-changes"')
    folded = card.index('<details class="comments"')
    assert verdict < folded
    assert "<summary>needs-changes: 2 inline comments</summary>" in card
    assert '<code class="where">greet.py:5</code>' in card
    assert '<code class="where">tests/test_greet.py</code>' in card
    assert "And reject &lt;b&gt;blank&lt;/b&gt;." in card
    assert "<b>blank</b>" not in card
