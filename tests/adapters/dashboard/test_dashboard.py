"""The dashboard's endpoints over a real engine (fake provider and runtime, a real journal):
the state, a run, server-sent events, the guarded actions and the metrics, each with its bad
input; the merge queue as the state holds it (an engine's store fed the queue's events); the
model's health as live runs report it (a run retrying the model API, an outage pause, model
accounts' usage windows and a spent one), in cpe status's words."""

from __future__ import annotations

import contextlib
import json
import math
import socket
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from actors.engine import Engine
from actors.services import Services
from actors.settings import SupervisorSettings
from adapters.cli.services import dashboard_settings
from adapters.cli.settings import CpeConfig, parse_config
from adapters.dashboard.server import DashboardServer
from adapters.dashboard.source import Source
from adapters.dashboard.web import create_app
from adapters.host.control import Control, ControlSettings
from domain.events import (
    AgentSignalled,
    BranchUpdated,
    EngineEvent,
    LandingRefused,
    MergeWaiting,
    RevisionChanged,
    RevisionMerged,
    StatusTransitioned,
    UserPausedDispatch,
    WorkItemChanged,
)
from domain.handlers.options import HandlerOptions
from domain.landing import describe_queue
from domain.models import (
    EngineState,
    InfrastructureStreak,
    Pipeline,
    PipelineStatus,
    QuotaWindow,
    Revision,
    RevisionId,
    RunSignal,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.signals import clock
from tests.actors.conftest import Harness, wait_until
from tests.fakes.runtime import FakeRun

TOKEN = "t0k3n-for-the-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Board:
    def __init__(self, harness: Harness, engine: Engine, config: CpeConfig | None = None):
        self.harness = harness
        self.engine = engine
        config = config or parse_config({})
        self.source = Source(
            engine,
            dashboard_settings(config),
            harness.tmp_path,
            control=Control(
                engine, ControlSettings(config.breaker, config.workflow.max_concurrent)
            ),
            title="/srv/repo",
        )
        self.client = TestClient(create_app(self.source, TOKEN), base_url="http://127.0.0.1")

    def running(self) -> FakeRun:
        """The implementor's run on #1, once the engine has seen #1 go in-progress."""
        [run] = self.harness.runtime.wait_runs(1)
        wait_until(
            lambda: self.engine.get_state().work_items["1"].status == "in-progress", self.engine
        )
        return run


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


@contextlib.contextmanager
def serving(harness: Harness, engine: Engine | None = None) -> Iterator[Board]:
    """A board on ``engine`` (by default the harness's own), made before the engine starts (so
    its source hears every decision), its client open while the block runs; its source closed
    after."""
    if engine is None:
        engine = harness.engine()
    made = Board(harness, engine)
    engine.start()
    try:
        with made.client:
            yield made
    finally:
        made.source.close()


@pytest.fixture
def board(harness: Harness) -> Iterator[Board]:
    harness.tracker.add_item("1", "pending", title="Greeting")
    harness.tracker.add_item("2", "pending", title="Farewell", blocked_by=["1"])
    with serving(harness) as made:
        yield made


def test_the_state_lists_items_runs_totals_and_whether_dispatch_is_paused(board: Board) -> None:
    run = board.running()
    run.say("Reading the work item.")
    state = board.client.get("/api/state").json()
    greeting, farewell = state["work_items"]
    assert (greeting["id"], greeting["status"], greeting["active_runs"]) == (
        "1",
        "in-progress",
        [run.session_id],
    )
    assert farewell["blocked_by"] == [{"id": "1", "status": "in-progress"}]
    assert [r["session_id"] for r in state["runs"]["active"]] == [run.session_id]
    assert state["runs"]["active"][0]["runtime"] == "claude-sdk"
    assert state["paused"] is None
    assert state["totals"]["runs"] == 1
    assert state["actions"] is True
    assert any("implementor dispatched" in d["text"] for d in state["decisions"])


def test_a_run_shows_its_live_output_and_an_unknown_one_is_404(board: Board) -> None:
    run = board.running()
    run.say("Reading the work item.")
    wait_until(lambda: "Reading" in _output(board, run), board.engine)
    detail = board.client.get(f"/api/runs/{run.session_id}").json()
    assert (detail["live"], detail["output"]) == (True, "Reading the work item.")
    missing = board.client.get("/api/runs/implementor-nope")
    assert missing.status_code == 404
    assert "unknown session 'implementor-nope'" in missing.json()["error"]
    assert board.client.get("/api/runs/..%2F..%2Fetc").status_code == 404


def _output(board: Board, run: FakeRun) -> str:
    buffer = board.engine.streams.buffer(run.session_id)
    return buffer.text() if buffer is not None else ""


def _next_event(lines: Iterator[str], kind: str | None = None) -> tuple[str, dict]:
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event and (kind is None or event == kind):
            return event, json.loads(line.removeprefix("data: "))
    raise AssertionError("the stream ended")


def test_an_action_without_the_token_is_401_and_changes_nothing(board: Board) -> None:
    run = board.running()
    answer = board.client.post("/api/work/1/cancel")
    assert answer.status_code == 401
    assert answer.json()["error"].startswith("missing token")
    wrong = board.client.post("/api/work/1/cancel", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403
    assert board.engine.get_state().agent_runs[run.session_id].is_active


def test_no_action_by_get(board: Board) -> None:
    for path in ("/api/work/1/retry", "/api/work/1/cancel", "/api/pause", "/api/resume"):
        assert board.client.get(path, headers=AUTH).status_code == 405


def test_a_cancel_with_the_token_blocks_the_item_then_a_retry_starts_it_again(
    board: Board,
) -> None:
    run = board.running()
    answer = board.client.post("/api/work/1/cancel", headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert "cancelling implementor run" in answer.json()["message"]
    # The retry is judged on the engine's state: wait until the engine, not only the tracker,
    # has the item blocked (the tracker is written a cycle before the engine takes the result).
    wait_until(
        lambda: (
            board.harness.tracker.work_items["1"].status == "blocked"
            and board.engine.get_state().work_items["1"].status == "blocked"
        ),
        board.engine,
    )
    retried = board.client.post("/api/work/1/retry", headers=AUTH)
    assert retried.status_code == 200, retried.text
    second = board.harness.runtime.wait_runs(2)[1]
    assert second.session_id != run.session_id
    wait_until(lambda: board.harness.tracker.work_items["1"].status == "in-progress", board.engine)


def test_a_status_set_from_the_dashboard_reaches_the_tracker(board: Board) -> None:
    board.running()
    answer = board.client.post("/api/work/2/status", headers=AUTH, json={"status": "blocked"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"] == "#2 'Farewell': pending → blocked"
    wait_until(lambda: board.harness.tracker.work_items["2"].status == "blocked", board.engine)


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/api/work/9/retry", None, 404, "unknown work item '9'"),
        ("/api/work/2/cancel", None, 409, "#2 has no active agent run"),
        ("/api/work/1/retry", None, 409, "#1 is in-progress"),
        ("/api/work/2/status", {"status": "finished"}, 422, "to: Input should be"),
        ("/api/work/2/status", [1], 422, "expected a JSON object"),
    ],
)
def test_bad_input_gets_its_status_and_one_line(
    board: Board, path: str, body: object, status: int, says: str
) -> None:
    board.running()
    answer = board.client.post(path, headers=AUTH, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert says in error
    assert "\n" not in error


def test_pause_and_resume_from_the_dashboard(board: Board) -> None:
    board.running()
    paused = board.client.post("/api/pause", headers=AUTH, json={"reason": "lunch"})
    assert paused.status_code == 200
    state = board.client.get("/api/state").json()
    since = state["paused"]["since"]
    stamp = datetime.fromisoformat(since).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = f"dispatch paused by a person since {stamp}: lunch"  # as cpe status says it
    assert state["paused"] == {
        "by": "person",
        "reason": "lunch",  # the person's words, once
        "since": since,
        "until": None,  # until a person resumes it
        "failures": None,
        "text": text,
        "detail": None,
    }
    assert state["pauses"] == [state["paused"]]
    page = board.client.get("/").text
    assert f'data-by="person">{text}</div>' in page  # said once, not "by a person: by a person"
    # a retry meanwhile is refused in the same words (domain.admission: the executor's too)
    refused = board.client.post("/api/work/2/retry", headers=AUTH)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"] == f"{text}; resume dispatch (cpe resume) to retry #2"
    assert board.client.post("/api/resume", headers=AUTH).status_code == 200
    assert board.client.get("/api/state").json()["paused"] is None


def test_the_page_renders_the_board_with_escaped_text(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked", title="<script>alert(1)</script>")
    engine = harness.engine()
    engine.start()
    made = Board(harness, engine)
    with made.client:
        page = made.client.get("/")
    made.source.close()
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert 'data-action="retry" data-item="1"' in page.text
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'self'
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


def test_a_host_that_is_not_the_loopback_is_refused(board: Board) -> None:
    assert board.client.get("/api/state", headers={"Host": "evil.example"}).status_code == 400


def test_metrics_are_valid_prometheus_text_with_the_engines_figures(board: Board) -> None:
    run = board.running()
    run.complete()
    board.harness.runtime.wait_runs(1)
    wait_until(
        lambda: board.engine.get_state().agent_runs[run.session_id].is_terminal, board.engine
    )
    board.engine.submit([UserPausedDispatch(reason="x")], 30)
    text = board.client.get("/metrics")
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(text.text)}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families.values()
        for s in family.samples
    }
    implementor = (("role", "implementor"), ("runtime", "claude-sdk"))
    assert samples[("cpe_runs_started_total", implementor)] >= 1
    assert samples[("cpe_runs_ended_total", (("outcome", "completed"), *implementor))] == 1
    assert samples[("cpe_run_duration_seconds_count", implementor)] == 1
    assert samples[("cpe_dispatch_paused", (("cause", "person"),))] == 1
    assert ("cpe_queue_depth", ()) in samples
    assert "cpe_provider_rate_limited" in families
    assert "cpe_run_cost_usd" in families


def test_a_dashboard_that_cannot_listen_is_given_up_and_the_engine_goes_on(
    board: Board,
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    services = Services(SupervisorSettings(backoff_initial=0, jitter=0, max_restarts=2))
    try:
        services.start(
            "dashboard", lambda: DashboardServer(board.source, f"127.0.0.1:{port}", TOKEN)
        )
        assert services.supervisor("dashboard").gave_up.wait(30)
        run = board.running()  # the engine works on
        run.complete()
        wait_until(
            lambda: board.harness.tracker.work_items["1"].status == "in-review", board.engine
        )
    finally:
        services.stop()
        taken.close()


def test_the_dashboard_serves_on_a_port_of_its_own_and_stops(board: Board) -> None:
    server = DashboardServer(board.source, "127.0.0.1:0", TOKEN)
    services = Services(SupervisorSettings(backoff_initial=0, jitter=0))
    services.start("dashboard", lambda: server)
    try:
        assert server.listening.wait(30)
        assert server.url is not None
        with urllib.request.urlopen(server.url + "api/state", timeout=30) as answer:
            assert json.load(answer)["work_items"][0]["id"] == "1"
    finally:
        services.stop()


def test_a_remote_run_shows_the_node_it_ran_on_as_cpe_status_does(board: Board) -> None:
    """A run placed on a Ray node (its ``remote.json``, as the remote runtime writes it) shows
    its node in the state and on the page; a local run has none."""
    run = board.running()
    local = board.client.get("/api/state").json()["runs"]["active"][0]
    assert local["node"] is None
    where = {
        "kind": "ray",
        "runtime": "claude-sdk",
        "node_id": "4f3c2a1b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c",
        "node_address": "10.0.0.7",
        "hostname": "worker-1",
        "namespace": "cpe-0123456789ab",
    }
    run_dir = board.harness.tmp_path / "runs" / run.session_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "remote.json").write_text(json.dumps(where))
    [active] = board.client.get("/api/state").json()["runs"]["active"]
    assert active["node"] == {
        "id": where["node_id"],
        "address": "10.0.0.7",
        "hostname": "worker-1",
        "label": "10.0.0.7/4f3c2a1b",
    }
    assert active["runtime"] == "claude-sdk"
    page = board.client.get("/board").text
    assert "claude-sdk<span" in page
    assert "@10.0.0.7/4f3c2a1b</span>" in page
    assert f'title="node {where["node_id"]} at 10.0.0.7"' in page


# ---------------------------------------------------------------------------- the merge queue

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
BASE = "b0" * 20  # the default branch's head the queue merged in
LEAKED = "ghp_" + "A1b2C3d4E5" * 4  # a token a provider's message carried


def _item(wid: str, title: str, status: Status = "in-review") -> EngineEvent:
    return WorkItemChanged(work_item=WorkItem(id=WorkItemId(wid), title=title, status=status))


def _revision(wid: str, head: str, pipeline: PipelineStatus = "success") -> Revision:
    return Revision(
        id=RevisionId(f"r{wid}"),
        title=f"revision of #{wid}",
        work_item_id=WorkItemId(wid),
        branch=f"cpe/{wid}",
        head_sha=head,
        pipeline=Pipeline(status=pipeline),
        reviewed_sha=head if pipeline == "success" else None,
    )


def _approved(wid: str, title: str, minutes: int) -> list[EngineEvent]:
    """#wid reviewed on a green head, approved ``minutes`` after T0 (its place in the queue)."""
    return [
        _item(wid, title),
        RevisionChanged(revision=_revision(wid, wid * 40)),
        StatusTransitioned(
            work_item_id=WorkItemId(wid), to="approved", at=T0 + timedelta(minutes=minutes)
        ),
    ]


def _brought_up_to_date(wid: str, head: str, minutes: int) -> EngineEvent:
    return BranchUpdated(
        work_item_id=WorkItemId(wid),
        revision=_revision(wid, head, pipeline="pending"),
        base_sha=BASE,
        at=T0 + timedelta(minutes=minutes),
    )


QUEUE_EVENTS: list[EngineEvent] = [
    # Two landings the state keeps: #5 tested twice on top of the default branch, #6 merged as
    # it was (already up to date).
    *_approved("5", "Landed after two tests", 0),
    _brought_up_to_date("5", "51" * 20, 2),
    _brought_up_to_date("5", "52" * 20, 9),
    RevisionMerged(revision_id=RevisionId("r5"), merge_sha="m5" * 20, at=T0 + timedelta(hours=1)),
    StatusTransitioned(work_item_id=WorkItemId("5"), to="done", at=T0 + timedelta(hours=1)),
    *_approved("6", "Landed as it was", 65),
    RevisionMerged(revision_id=RevisionId("r6"), merge_sha="m6" * 20, at=T0 + timedelta(hours=2)),
    StatusTransitioned(work_item_id=WorkItemId("6"), to="done", at=T0 + timedelta(hours=2)),
    # The queue now: #1 under test, #2 behind it, #3's merge held by the provider.
    *_approved("1", "Greeting", 130),
    _brought_up_to_date("1", "c1" * 20, 131),
    *_approved("2", "Farewell", 140),
    *_approved("3", "Welcome", 150),
    BranchUpdated(  # green on top of the default branch, then held by branch protection
        work_item_id=WorkItemId("3"),
        revision=_revision("3", "3" * 40, pipeline="success"),
        base_sha=BASE,
        at=T0 + timedelta(minutes=150),
    ),
    *[
        MergeWaiting(
            work_item_id=WorkItemId("3"),
            revision_id=RevisionId("r3"),
            head_sha="3" * 40,
            reason=f"branch protection:\n1 approving review is required ({LEAKED})",
            at=T0 + timedelta(minutes=minute),
        )
        for minute in (151, 152)
    ],
    # #4 sent back twice: its revision no longer merges with the default branch.
    _item("4", "Plural greetings", "in-progress"),
    RevisionChanged(revision=_revision("4", "4" * 40)),
    *[
        LandingRefused(
            work_item_id=WorkItemId("4"),
            revision_id=RevisionId("r4"),
            kind="conflict",
            reason=f"revision #r4 no longer merges with the default branch (round {n})",
            files=("greet.py", "README.md"),
            detail="<<<<<<< HEAD",
            at=T0 + timedelta(minutes=160 + n),
        )
        for n in (1, 2)
    ],
]


class QueueBoard:
    """A dashboard that only shows an engine whose state holds the merge queue above."""

    def __init__(self, harness: Harness, config: CpeConfig):
        self.engine = harness.engine()
        for event in QUEUE_EVENTS:
            self.engine.store.apply(event)  # the engine's one write path: apply_event
        self.source = Source(
            self.engine, dashboard_settings(config), harness.tmp_path, control=None, title="q"
        )
        self.client = TestClient(create_app(self.source, None), base_url="http://127.0.0.1")

    def close(self) -> None:
        self.client.close()
        self.source.close()


@pytest.fixture
def queue_board(harness: Harness) -> Iterator[QueueBoard]:
    made = QueueBoard(harness, parse_config({"workflow": {"auto_merge": True}}))
    yield made
    made.close()


def test_the_state_shows_the_merge_queue_in_order_with_each_step_and_test(
    queue_board: QueueBoard,
) -> None:
    queue = queue_board.client.get("/api/state").json()["merge_queue"]
    assert queue["active"] is True
    testing, waiting, held = queue["entries"]
    assert testing == {
        "position": 1,
        "item": {"id": "1", "title": "Greeting"},
        "revision_id": "r1",
        "step": f"testing {'c1' * 6} on top of the default branch at {'b0' * 6}: pipeline "
        "pending since 2025-03-01 11:11:00 UTC",
        "test": {
            "tested_sha": "c1" * 6,
            "base_sha": "b0" * 6,
            "tests": 1,
            "stale": False,
            "at": (T0 + timedelta(minutes=131)).isoformat(),
        },
    }
    assert (waiting["position"], waiting["item"]["id"], waiting["revision_id"]) == (2, "2", "r2")
    assert (waiting["step"], waiting["test"]) == ("waits its turn", None)
    assert (held["position"], held["item"]["id"]) == (3, "3")
    assert held["step"].startswith("merge held by the provider: branch protection: 1 approving")
    assert queue["landings_total"] == 2


def test_the_state_shows_a_held_merge_with_its_reason_redacted(queue_board: QueueBoard) -> None:
    [held] = queue_board.client.get("/api/state").json()["merge_queue"]["held"]
    assert held == {
        "revision_id": "r3",
        "item": {"id": "3", "title": "Welcome"},
        "head_sha": "3" * 12,
        "reason": "branch protection: 1 approving review is required ([redacted])",
        "tries": 2,
        "since": (T0 + timedelta(minutes=151)).isoformat(),
        "last_at": (T0 + timedelta(minutes=152)).isoformat(),
    }
    entries = queue_board.client.get("/api/state").json()["merge_queue"]["entries"]
    assert all(LEAKED not in entry["step"] for entry in entries)


def test_an_item_sent_back_by_the_queue_shows_the_last_send_back_in_its_view(
    queue_board: QueueBoard,
) -> None:
    items = {i["id"]: i for i in queue_board.client.get("/api/state").json()["work_items"]}
    sent = items["4"]["sent_back"]
    assert sent == {
        "problem": "conflict",
        "reason": "revision #r4 no longer merges with the default branch (round 2)",
        "files": ["greet.py", "README.md"],
        "rounds": 2,
        "max_rounds": queue_board.source.settings.workflow.max_landing_rounds,
        "revision_id": "r4",
        "moved_by": f"the merge of #5 (revision #r5, {'m5' * 6}), "
        f"the merge of #6 (revision #r6, {'m6' * 6})",  # the landings the state keeps
        "at": (T0 + timedelta(minutes=162)).isoformat(),
        "answered_by": None,
    }
    assert [wid for wid, item in items.items() if item["sent_back"]] == ["4"]


def test_the_board_shows_the_queue_the_held_merge_and_the_send_back(
    queue_board: QueueBoard,
) -> None:
    page = queue_board.client.get("/board").text
    queue = page[page.index('id="merge-queue"') :]
    rows = [queue.index(f'<tr data-item="{wid}">') for wid in ("1", "2", "3")]
    assert rows == sorted(rows)
    assert f"{'c1' * 6} on {'b0' * 6} · 1 pipeline run</td>" in queue
    assert "2 landed" in queue
    assert '<li data-revision="r3">' in queue
    assert "(2 tries)" in queue
    assert LEAKED not in page
    card = page[page.index('id="item-4"') :]
    assert "sent back by the merge queue: conflict in greet.py, README.md (round 2 of 3)" in card


def test_the_queue_is_off_when_approved_revisions_do_not_land_through_it(
    harness: Harness,
) -> None:
    made = QueueBoard(harness, parse_config({}))  # auto_merge off: a person merges
    try:
        queue = made.client.get("/api/state").json()["merge_queue"]
        page = made.client.get("/board").text
        samples = _samples(made.client.get("/metrics").text)
    finally:
        made.close()
    assert (queue["active"], queue["entries"]) == (False, [])
    assert [h["revision_id"] for h in queue["held"]] == ["r3"]  # the provider holds it still
    assert "off: approved revisions are not landed through the queue" in page
    assert samples[("cpe_merge_queue_length", ())] == 0


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _nearest_rank(values: list[float], q: float) -> float:
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q * len(ranked)) - 1)]


def test_metrics_give_the_merge_queue_as_the_state_holds_it(queue_board: QueueBoard) -> None:
    state = queue_board.engine.get_state()
    samples = _samples(queue_board.client.get("/metrics").text)
    assert samples[("cpe_merge_queue_length", ())] == len(describe_queue(state)) == 3
    assert samples[("cpe_merge_queue_held", ())] == len(state.merge_waits) == 1
    assert samples[("cpe_landings_total", ())] == state.landings_total == 2
    assert samples[("cpe_merge_queue_sent_back_items", (("problem", "conflict"),))] == 1
    assert samples[("cpe_merge_queue_sent_back_items", (("problem", "failed"),))] == 0
    waits = [
        (landed.at - landed.approved_at).total_seconds()
        for landed in state.landed
        if landed.at and landed.approved_at
    ]
    assert waits == [3600.0, 3600.0 * 2 - 65 * 60]  # approval to merge, as the events say
    _assert_summary(samples, "cpe_merge_queue_wait_seconds", waits)
    tests = [float(landed.tests) for landed in state.landed]
    assert tests == [2.0, 0.0]  # #5 tested on two heads, #6 merged as it was
    _assert_summary(samples, "cpe_merge_queue_tests_per_landing", tests)


def _assert_summary(samples: dict[Any, float], name: str, values: list[float]) -> None:
    assert samples[(f"{name}_count", ())] == len(values)
    assert samples[(f"{name}_sum", ())] == sum(values)
    for q in (0.5, 0.9, 0.99):
        assert samples[(name, (("quantile", f"{q:g}"),))] == _nearest_rank(values, q)


# ---------------------------------------------------------------------------- the model's health

# The breaker's pause outlasts the test by far; the runs retrying the model are left to retry
# (not cancelled), so a live run shows its retry while dispatch is paused for the outage.
MODEL_CONFIG = {"breaker": {"pause_initial": 600, "cancel_retrying": False}}
RETRY_WORDS = "the model API is unreachable (ECONNREFUSED), retry 4/10 in 8 s"
OUTAGE_WORDS = "the model API is unreachable (ECONNREFUSED)"  # the pause's: no run's count


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


class ModelBoard:
    """#1's implementor run retried the model API three times over 18 s (an outage: dispatch
    paused until 600 s after the last retry); the anthropic account reported its headroom, the
    openai account a spent window (held until its reset plus the 60 s margin)."""

    def __init__(self, harness: Harness):
        harness.tracker.add_item("1", "pending", title="Greeting")
        config = parse_config(MODEL_CONFIG)
        engine = harness.engine(
            handlers=HandlerOptions(auto_merge=True, outage_after=15, cancel_retrying=False)
        )
        self.board = Board(harness, engine, config)
        engine.start()
        self.run = self.board.running()
        now = datetime.now(UTC).replace(microsecond=0)
        self.last_retry = now - timedelta(seconds=2)
        self.five_hour = now + timedelta(hours=3)
        self.seven_day = now + timedelta(days=4)
        self.spent_until = now + timedelta(hours=2)
        self.secondary = now + timedelta(days=6)
        retries = [
            AgentSignalled(
                session_id=self.run.session_id,
                signal=RunSignal(
                    kind="retrying",
                    account="anthropic",
                    cause="unreachable",
                    detail="ECONNREFUSED",
                    attempt=attempt,
                    max_attempts=10,
                    retry_in=8,
                ),
                at=now - timedelta(seconds=ago),
            )
            for attempt, ago in ((2, 20), (3, 10), (4, 2))
        ]
        headroom = RunSignal(
            kind="quota",
            account="anthropic",
            windows=(
                QuotaWindow(name="five_hour", utilization=0.42, resets_at=self.five_hour),
                QuotaWindow(name="seven_day", utilization=0.1, resets_at=self.seven_day),
            ),
        )
        spent = RunSignal(
            kind="rate_limited",
            account="openai",
            window="primary",
            until=self.spent_until,
            detail="usage_limit_reached",
            windows=(
                QuotaWindow(
                    name="primary",
                    utilization=1.0,
                    resets_at=self.spent_until,
                    status="rejected",
                ),
                QuotaWindow(name="secondary", utilization=0.3, resets_at=self.secondary),
            ),
        )
        elsewhere = "implementor-on-codex"  # a run of the other account, ended already
        reports = [
            AgentSignalled(session_id=elsewhere, signal=signal, at=now)
            for signal in (headroom, spent)
        ]
        assert engine.submit([*retries, *reports], 30)
        self.probing = self.last_retry + timedelta(seconds=600)
        self.resumes = self.spent_until + timedelta(seconds=60)
        self.spent_words = (
            f"rate-limited: primary spent until {clock(self.spent_until)} (usage_limit_reached)"
        )

    def close(self) -> None:
        self.board.client.close()
        self.board.source.close()


@pytest.fixture
def model_board(harness: Harness) -> Iterator[ModelBoard]:
    made = ModelBoard(harness)
    yield made
    made.close()


def test_a_retrying_run_and_the_outage_pause_read_as_cpe_status_says_them(
    model_board: ModelBoard,
) -> None:
    state = model_board.board.client.get("/api/state").json()
    [active] = state["runs"]["active"]
    assert active["session_id"] == model_board.run.session_id
    assert active["signal"] == {
        "kind": "retrying",
        "cause": "unreachable",
        "text": f"retrying: {RETRY_WORDS}",
    }
    banner = f"dispatch paused: {OUTAGE_WORDS}; probing at {_stamp(model_board.probing)}"
    assert state["paused"] == {
        "by": "outage",
        "reason": OUTAGE_WORDS,
        "since": None,
        "until": model_board.probing.isoformat(),
        "failures": 3,
        "text": banner,
        "detail": "3 retries by live runs with no answer in between; no attempt is spent meanwhile",
    }
    page = model_board.board.client.get("/").text
    assert 'data-by="outage" title="3 retries by live runs' in page
    assert f">{banner}</div>" in page
    sid = model_board.run.session_id  # its words on a row of their own, under the run's
    after_run = page.index("</tr>", page.index(f'<tr data-session="{sid}"')) + len("</tr>")
    assert page[after_run:].startswith(
        f'<tr class="signal retrying" data-signal-of="{sid}"><td colspan="8">'
        f"retrying: {RETRY_WORDS}</td></tr>"
    )
    assert 'data-action="resume"' in page  # a person may end the pause at once


def test_the_model_accounts_show_their_windows_and_a_spent_one_holds_its_account(
    model_board: ModelBoard,
) -> None:
    b = model_board
    anthropic, openai = b.board.client.get("/api/state").json()["accounts"]
    assert anthropic["account"] == "anthropic"
    assert anthropic["roles"] == ["planner", "implementor", "reviewer"]  # claude-sdk's account
    assert anthropic["usage"] == (
        f"5-hour 42% used (resets {clock(b.five_hour)}), "
        f"7-day 10% used (resets {clock(b.seven_day)})"
    )
    assert [(w["name"], w["utilization"]) for w in anthropic["windows"]] == [
        ("five_hour", 0.42),
        ("seven_day", 0.1),
    ]
    assert anthropic["hold"] is None
    assert openai["usage"] == (
        f"primary 100% used, spent (resets {clock(b.spent_until)}), "
        f"secondary 30% used (resets {clock(b.secondary)})"
    )
    hold = f"dispatch paused for openai: {b.spent_words}; resumes at {clock(b.resumes)}"
    assert openai["hold"] == {
        "until": b.resumes.isoformat(),
        "reason": b.spent_words,
        "text": hold,
    }
    page = b.board.client.get("/board").text
    assert f'<div class="banner held" data-account="openai">{hold}</div>' in page  # at the top
    accounts = page[page.index('id="model-accounts"') :]
    assert f'<span class="usage">{anthropic["usage"]}</span>' in accounts
    assert f'<span class="usage">{openai["usage"]}</span>' in accounts
    assert f'<div class="hold">{hold}</div>' in accounts
    assert 'class="meter spent" data-window="primary"' in accounts


def test_metrics_give_the_model_accounts_the_retrying_runs_and_the_outage(
    model_board: ModelBoard,
) -> None:
    b = model_board
    samples = _samples(b.board.client.get("/metrics").text)

    def window(account: str, name: str) -> tuple[tuple[str, str], ...]:
        return (("account", account), ("window", name))

    assert samples[("cpe_model_quota_utilization", window("anthropic", "five_hour"))] == 0.42
    assert samples[("cpe_model_quota_utilization", window("openai", "primary"))] == 1.0
    assert samples[("cpe_model_quota_utilization", window("openai", "secondary"))] == 0.3
    resets = "cpe_model_quota_resets_at_seconds"
    assert samples[(resets, window("anthropic", "seven_day"))] == b.seven_day.timestamp()
    assert samples[(resets, window("openai", "primary"))] == b.spent_until.timestamp()
    assert samples[("cpe_model_quota_held", (("account", "openai"),))] == 1
    assert samples[("cpe_model_quota_held", (("account", "anthropic"),))] == 0
    assert samples[("cpe_agent_runs_retrying", (("cause", "unreachable"),))] == 1
    assert samples[("cpe_agent_runs_retrying", (("cause", "rate_limit"),))] == 0
    paused = {
        cause: samples[("cpe_dispatch_paused", (("cause", cause),))]
        for cause in ("person", "breaker", "outage")
    }
    assert paused == {"person": 0, "breaker": 0, "outage": 1}


def test_resume_from_the_dashboard_ends_the_outage_pause_and_the_accounts_hold(
    model_board: ModelBoard,
) -> None:
    client = model_board.board.client
    answer = client.post("/api/resume", headers=AUTH)
    assert answer.status_code == 200, answer.text
    state = client.get("/api/state").json()
    assert (state["paused"], state["pauses"]) == (None, [])
    assert [a["hold"] for a in state["accounts"]] == [None, None]
    assert "dispatch running" in client.get("/board").text
    samples = _samples(client.get("/metrics").text)
    assert samples[("cpe_dispatch_paused", (("cause", "outage"),))] == 0
    assert samples[("cpe_model_quota_held", (("account", "openai"),))] == 0


def test_the_breakers_pause_for_runs_failing_under_the_agent_keeps_its_cause(
    harness: Harness,
) -> None:
    """Runs failing under the agent pause dispatch as the breaker (not an outage): its banner
    says how many failed in a row and the last reason, as cpe status does."""
    engine = harness.engine()
    last = datetime.now(UTC).replace(microsecond=0)
    streak = InfrastructureStreak(count=3, last_at=last, last_reason="API Error: refused")
    engine.store.set_state(EngineState(infrastructure=streak))  # three such runs, ended
    source = Source(
        engine, dashboard_settings(parse_config({})), harness.tmp_path, control=None, title="b"
    )
    client = TestClient(create_app(source, None), base_url="http://127.0.0.1")
    try:
        paused = client.get("/api/state").json()["paused"]
        page = client.get("/board").text
        samples = _samples(client.get("/metrics").text)
    finally:
        client.close()
        source.close()
    probing = _stamp(last + timedelta(seconds=30))  # [breaker] pause_initial
    assert (paused["by"], paused["failures"]) == ("breaker", 3)
    assert paused["text"] == (
        "dispatch paused: 3 agent runs in a row failed under the agent (last reason: API Error: "
        f"refused); probing at {probing}"
    )
    assert paused["text"] in page
    assert samples[("cpe_dispatch_paused", (("cause", "breaker"),))] == 1
    assert samples[("cpe_dispatch_paused", (("cause", "outage"),))] == 0
    assert samples[("cpe_agent_runs_retrying", (("cause", "unreachable"),))] == 0
