"""The dashboard tells the whole truth, readably, over a real engine (fake provider and runtime,
a real journal) and, where ``cpe status`` says the same thing, beside the real command:

- a red default branch is a banner on the board, and an approved item's card says why it has
  not merged, in ``cpe status``'s words;
- a run's page (``/runs/<session>``): its header, activity and result, live while it runs; the
  board links to it, not to JSON; an item's page (``/items/<id>``): what ``cpe work show``
  prints; an unknown one is a page saying what was expected;
- the panels agree: the runs table and the decisions come from one state; the card and the
  decisions count the attempt under way alike; a card shows its current run's end only; a run
  cpe's own stop interrupted is no failure; "no run is active" never beside a starting run;
- ``/favicon.ico`` answers.
"""

from __future__ import annotations

import html
import re
import tomllib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from actors.engine import Engine
from adapters.cli.services import dashboard_settings
from adapters.cli.settings import parse_config
from adapters.dashboard.pages import _linker
from adapters.dashboard.source import Source
from adapters.dashboard.web import create_app
from adapters.describe.items import item_sections
from domain.events import (
    BaselineChanged,
    BranchUpdated,
    EngineEvent,
    RevisionChanged,
    StatusTransitioned,
    WorkItemChanged,
)
from domain.handlers.options import HandlerOptions
from domain.models import (
    Baseline,
    Pipeline,
    Revision,
    RevisionId,
    SessionId,
    WorkItem,
    WorkItemId,
)
from tests.actors.conftest import Harness, wait_until
from tests.adapters.cli.test_cli import cpe
from tests.adapters.cli.test_status import T0, journal, sections
from tests.adapters.dashboard.test_dashboard import AUTH, Board, harness, serving
from tests.adapters.dashboard.test_dashboard_activity import WORKTREE, record, reviewed
from tests.support.git import make_repo
from tests.support.transcripts import assistant, text, tool

__all__ = ["harness", "reviewed"]  # the fixtures, shared with the dashboard's other tests


@pytest.fixture
def board(harness: Harness) -> Iterator[Board]:
    harness.tracker.add_item("1", "pending", title="Greeting", body="Add greet(name).")
    with serving(harness) as made:
        yield made


def card(page: str, wid: str) -> str:
    return page.split(f'id="item-{wid}"', 1)[1].split("</article>", 1)[0]


def shown(fragment: str) -> str:
    """What a person reads of an HTML fragment: its text, tags taken out."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


# ---------------------------------------------------------------------------- red, not merged

SHA_BASE, SHA_HEAD, SHA_TESTED = "b0" * 20, "a" * 40, "c" * 40
FAILURE = "E   ModuleNotFoundError: No module named 'greeting'\nFAILED tests/test_x.py::test_a"
GITHUB = '[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"\n'


def _red_revision(head: str, pipeline: str = "failure") -> Revision:
    return Revision(
        id=RevisionId("7"),
        title="Answer",
        work_item_id=WorkItemId("3"),
        branch="cpe/3-answer",
        head_sha=head,
        pipeline=Pipeline(
            status=pipeline,  # type: ignore[arg-type]  # a PipelineStatus, given as text
            failed_checks=("pytest",) if pipeline == "failure" else (),
        ),
        reviewed_sha=SHA_HEAD,
    )


# The default branch is red (pytest); #3 was approved on a head red only there, and the merge
# queue tested it on top of the default branch: red there too, only where the branch is.
RED: list[EngineEvent] = [
    BaselineChanged(
        baseline=Baseline(
            sha=SHA_BASE,
            pipeline=Pipeline(status="failure", failed_checks=("pytest",), reason=FAILURE),
        ),
        at=T0,
    ),
    WorkItemChanged(work_item=WorkItem(id=WorkItemId("3"), title="Answer", status="in-review")),
    RevisionChanged(revision=_red_revision(SHA_HEAD), at=T0),
    StatusTransitioned(work_item_id=WorkItemId("3"), to="approved", at=T0),
    BranchUpdated(
        work_item_id=WorkItemId("3"),
        revision=_red_revision(SHA_TESTED, "pending"),
        base_sha=SHA_BASE,
        at=T0 + timedelta(minutes=1),
    ),
    RevisionChanged(revision=_red_revision(SHA_TESTED), at=T0 + timedelta(minutes=2)),
]


@pytest.mark.parametrize("auto_merge", [True, False], ids=["merge-queue", "auto-merge-off"])
def test_a_red_default_branch_and_why_an_approved_item_has_not_merged_read_as_cpe_status(
    harness: Harness, tmp_path: Path, auto_merge: bool
) -> None:
    toml = f"{GITHUB}[workflow]\nauto_merge = {str(auto_merge).lower()}\n"
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": toml})
    journal(repo / ".cpe", RED)
    status = cpe("status", cwd=repo)
    assert status.returncode == 0, status.stderr
    said = sections(status.stdout)
    [red] = [title for title in said if title.startswith("default branch pipeline: red")]
    if auto_merge:
        [queue] = [title for title in said if title.startswith("merge queue")]
        [entry] = said[queue]
        step = entry.removeprefix("1. #3 revision 7: ")
        assert step.startswith(f"held: {SHA_TESTED[:12]} on top of the default branch at ")
        assert step.endswith("fails only where the default branch fails too")
        why = f"merge queue 1: {step}"
    else:
        why = "[workflow] auto_merge is off: a person merges it"
        assert said["approved, not merged"] == [f"#3 {why}"]

    engine = harness.engine()
    for event in RED:
        engine.store.apply(event)  # the engine's one write path, as its loop applies them
    source = Source(
        engine,
        dashboard_settings(parse_config(tomllib.loads(toml))),
        harness.tmp_path,
        control=None,
    )
    try:
        with TestClient(create_app(source, None), base_url="http://127.0.0.1") as http:
            state = http.get("/api/state").json()
            page = http.get("/board").text
    finally:
        source.close()
    [item] = state["work_items"]
    assert item["not_merged"] == why
    assert f"not merged: {why}" in shown(card(page, "3"))
    banner = shown(page.split('id="baseline">', 1)[1].split("</div></div>", 1)[0])
    assert banner.startswith(red)
    for line in said[red]:  # the failure's last lines, what it means: as cpe status says them
        assert line in banner, line


# ---------------------------------------------------------------------------- a run's page


def test_a_runs_page_shows_its_header_activity_and_result_live_then_ended(board: Board) -> None:
    run = board.running()
    sid = run.session_id
    files = record(board.harness, sid)
    files.record_native(
        assistant(
            text("Writing <greet>."), tool("Write", file_path=f"{WORKTREE}/g.py", content="x")
        )
    )
    live = board.client.get(f"/runs/{sid}")
    assert live.status_code == 200
    assert live.headers["content-type"].startswith("text/html")
    page = live.text
    assert 'data-live="true"' in page
    assert f'data-part="/runs/{sid}?part=body"' in page  # its script redraws the body
    facts = shown(page.split('<dl class="run-facts">', 1)[1].split("</dl>", 1)[0])
    for fact in (
        "roleimplementor",
        "item#1 Greeting in-progress",
        "runtimeclaude-sdk",
        "statusrunning",
        "attempt1 of 3",
    ):
        assert fact in facts, facts
    assert 'href="/items/1"' in page
    activity = page.split('<pre id="activity">', 1)[1].split("</pre>", 1)[0]
    assert activity == "assistant: Writing &lt;greet&gt;.\ntool Write: g.py (1 chars)"
    assert "running…" in shown(page.split('id="result">', 1)[1])
    body = board.client.get(f"/runs/{sid}?part=body").text
    assert not body.startswith("<!doctype")
    assert '<pre id="activity">' in body

    files.finish("completed", 0)
    run.complete()
    wait_until(lambda: board.engine.get_state().agent_runs[sid].is_terminal, board.engine)
    ended = board.client.get(f"/runs/{sid}").text
    assert 'data-live="false"' in ended
    facts = shown(ended.split('<dl class="run-facts">', 1)[1].split("</dl>", 1)[0])
    assert "statuscompleted" in facts
    assert "cost$0.0100" in facts
    assert "outcome completed" in shown(ended.split('id="result">', 1)[1])


def test_a_reviewers_page_gives_its_verdict_summary_and_inline_comments(reviewed: Board) -> None:
    [run] = [r for r in reviewed.engine.get_state().agent_runs.values() if r.role == "reviewer"]
    page = reviewed.client.get(f"/runs/{run.session_id}").text
    said = page.split('id="result">', 1)[1].split("</section>", 1)[0]
    assert '<span class="badge needs-changes">needs-changes</span> on head r1-h1' in said
    assert '<p class="summary">Two problems.</p>' in said
    assert '<code class="where">greet.py:5</code>' in said
    assert "And reject &lt;b&gt;blank&lt;/b&gt;." in said  # the model's text, escaped
    assert "<b>blank</b>" not in said


def test_a_run_a_person_cancelled_says_so_once_on_its_page_and_its_card(board: Board) -> None:
    run = board.running()
    assert board.client.post("/api/work/1/cancel", headers=AUTH).status_code == 200
    wait_until(
        lambda: board.engine.get_state().agent_runs[run.session_id].is_terminal, board.engine
    )
    page = board.client.get(f"/runs/{run.session_id}").text
    said = shown(page.split('id="result">', 1)[1].split("</section>", 1)[0])
    assert said == "Resultcancelled by a person"  # not "cancelled: cancelled by a person"
    note = card(board.client.get("/board").text, "1").split('class="ended-note"', 1)[1]
    assert shown(note.split("</div>", 1)[0]).endswith(">cancelled by a person")


def test_the_board_links_each_run_to_its_page_not_to_json(board: Board) -> None:
    run = board.running()
    page = board.client.get("/board").text
    assert f'<a href="/runs/{run.session_id}">{run.session_id}</a>' in page
    assert "/api/runs/" not in page
    assert board.client.get(f"/api/runs/{run.session_id}").json()["session_id"] == run.session_id


def test_an_unknown_run_or_item_is_a_page_saying_what_was_expected(board: Board) -> None:
    for path, says in (
        ("/runs/implementor-nope", "unknown session 'implementor-nope': expected one the board"),
        ("/runs/a%20b", "unknown session 'a b'"),
        ("/items/9", "unknown work item '9': expected one the board shows"),
    ):
        answer = board.client.get(path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("text/html")
        assert says in html.unescape(answer.text), answer.text


# ---------------------------------------------------------------------------- an item's page


def test_an_items_page_shows_what_cpe_work_show_prints(board: Board) -> None:
    run = board.running()
    page = board.client.get("/items/1")
    assert page.status_code == 200
    state = board.engine.get_state()
    item = state.work_items[WorkItemId("1")]
    printed = item_sections(  # what cpe work show prints, section by section
        item,
        state.work_items,
        state,
        board.source.settings.workflow,
        board.harness.tmp_path,
        "Add greet(name).",
    )
    blocks = re.findall(
        r'<section class="item-section"><h2[^>]*>(.*?)</h2><pre>(.*?)</pre>', page.text, re.S
    )
    assert [(shown(h), shown(p).splitlines()) for h, p in blocks] == [
        (heading, [line.removeprefix("  ") for line in lines]) for heading, lines in printed
    ]
    facts = dict(blocks)["#1 Greeting"]
    assert "attempts  1 of 3" in facts
    assert "pending → in-progress" in shown(dict(blocks)["status history (oldest first)"])
    runs = dict(blocks)["agent runs"]
    assert f'<a href="/runs/{run.session_id}">{run.session_id}</a>' in runs


# ---------------------------------------------------------------------------- panels agree


def test_the_runs_table_and_the_decisions_come_from_one_state(board: Board) -> None:
    run = board.running()
    views: list[dict[str, Any]] = []
    # A store listener runs mid-event: the state has the run's end, its decision is not told
    # yet. A page drawn then must not show one without the other.
    unsubscribe = board.engine.subscribe(
        lambda _: views.append(board.client.get("/api/state").json())
    )
    try:
        run.complete()
        wait_until(lambda: any(not v["runs"]["active"] for v in views), board.engine)
    finally:
        unsubscribe()
    told = f"implementor {run.session_id} completed"
    for view in views:
        ended = not any(r["session_id"] == run.session_id for r in view["runs"]["active"])
        said = any(told in d["text"] for d in view["decisions"])
        assert ended == said, (ended, [d["text"] for d in view["decisions"]])


def _active(engine: Engine, session_id: SessionId) -> bool:
    run = engine.get_state().agent_runs.get(session_id)
    return run is not None and run.is_active


def test_the_card_and_the_decisions_count_the_attempt_under_way_alike(harness: Harness) -> None:
    harness.tracker.add_item("1", "pending", title="Greeting")
    quick = HandlerOptions(auto_merge=True, retry_backoff_initial=0.01, retry_backoff_max=0.01)
    engine = harness.engine(handlers=quick)
    with serving(harness, engine) as made:
        first = made.running()
        first.fail("failed", "tests failed: 3 red")
        second = harness.runtime.wait_runs(2)[1]
        # the runtime has it before the engine has processed its request: wait for the state
        wait_until(lambda: _active(engine, second.session_id), engine)
        state = made.client.get("/api/state").json()
        page = made.client.get("/board").text
        earlier = made.client.get(f"/runs/{first.session_id}").text
    [item] = state["work_items"]
    assert item["attempts"] == 2  # the one under way
    assert f"attempts 2/{item['max_attempts']}" in card(page, "1")
    told = [d["text"] for d in state["decisions"]]
    assert f"#1 'Greeting': implementor dispatched, attempt 2 ({second.session_id})" in told
    assert state["runs"]["active"][0]["attempt"] == 2
    # the card shows its current run, not the previous one's failure
    assert (item["last_end"], item["last_failure"]) == (None, None)
    assert "tests failed" not in card(page, "1")
    assert "attempt1 of 3" in shown(earlier.split('<dl class="run-facts">', 1)[1])
    assert "failed: tests failed: 3 red" in shown(earlier.split('id="result">', 1)[1])


def test_a_run_cpes_own_stop_interrupted_is_shown_as_interrupted_not_as_a_failure(
    board: Board,
) -> None:
    run = board.running()
    board.engine.stop(reason="a graceful stop")
    wait_until(
        lambda: board.engine.get_state().agent_runs[run.session_id].is_terminal, board.engine
    )
    state = board.client.get("/api/state").json()
    page = board.client.get("/board").text
    assert state["failures"] == []
    [row] = state["runs"]["recent"]
    assert (row["status"], row["ending"]) == ("cancelled", "interrupted")
    [item] = state["work_items"]
    assert item["last_end"]["ending"] == "interrupted"
    assert item["last_failure"] is None
    shown_card = card(page, "1")
    assert 'class="ended-note" data-ending="interrupted"' in shown_card
    assert "interrupted: the engine is shutting down" in shown(shown_card)
    assert 'class="failure"' not in shown_card
    assert '<span class="badge interrupted">interrupted</span>' in page
    assert '<li class="none">none</li>' in page.split("Recent failures", 1)[1]


def test_no_run_is_active_is_never_said_beside_a_run_still_starting(harness: Harness) -> None:
    harness.tracker.add_item("1", "pending", title="Greeting")
    harness.script(block_start=lambda p: True)
    engine = harness.engine()
    made = Board(harness, engine)
    idle = made.client.get("/").text
    assert '<p class="none" id="live-none">no run is active</p>' in idle
    engine.start()
    try:
        with made.client:
            wait_until(lambda: bool(harness.runtime.starting), engine)
            [sid] = harness.runtime.starting
            wait_until(lambda: sid in engine.get_state().agent_runs, engine)
            page = made.client.get("/").text
            harness.runtime.release_start.set()
    finally:
        made.source.close()
    live = page.split('<div id="live">', 1)[1].split("</section>", 1)[0]
    assert '<p class="none" id="live-none" hidden>no run is active</p>' in live
    assert f'<article class="run-output" id="live-{sid}" data-session="{sid}">' in live
    assert f"implementor · #1 · {sid}" in live


def test_the_favicon_answers(board: Board) -> None:
    icon = board.client.get("/favicon.ico")
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg")
    assert '<link rel="icon" href="/favicon.ico"' in board.client.get("/").text


def test_the_pause_button_sends_the_reason_typed_beside_it(board: Board) -> None:
    page = board.client.get("/board").text
    assert '<input id="pause-reason" name="reason"' in page  # the field beside the button
    board.client.post("/api/pause", headers=AUTH, json={"reason": "deploy freeze"})
    banner = board.client.get("/api/state").json()["paused"]["text"]
    assert banner.startswith("dispatch paused by a person since ")
    assert banner.endswith(" UTC: deploy freeze")


def test_lines_link_the_items_they_name_by_number_or_by_key() -> None:
    """Narration names a key without '#' (ENG-12): a known one is linked like #7; an unknown
    one, or a key inside a word or a branch name, is left as text."""
    link = _linker([], ["7", "ENG-12"])
    assert link("#7 blocked by ENG-12") == (
        '<a href="/items/7">#7</a> blocked by <a href="/items/ENG-12">ENG-12</a>'
    )
    assert link("ENG-99 and XENG-12 and cpe/ENG-12-add") == "ENG-99 and XENG-12 and cpe/ENG-12-add"
