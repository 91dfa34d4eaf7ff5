"""``cpe status``, ``cpe work add``, ``cpe runs show`` and ``cpe replay`` from the command line,
on a repository whose engine has worked: local work items and a revision (the local provider's
own API, its pipeline run for real) and agent runs in the journal (the events the executor
journals: requested, started, completed or failed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actors.journal import Journal
from adapters.providers.local.pipeline import LocalPipeline
from adapters.providers.local.provider import LocalProvider
from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentStarted,
    BranchUpdated,
    EngineEvent,
    ImplementorCompleted,
    MergeWaiting,
    RevisionChanged,
    SpecChanged,
    StatusTransitioned,
    WorkItemChanged,
)
from domain.models import (
    ImplementorStartParams,
    Pipeline,
    PlannerStartParams,
    ReviewerStartParams,
    Revision,
    RevisionId,
    SentBack,
    SessionId,
    Spec,
    WorkItem,
    WorkItemId,
)
from domain.results import ImplementorResult
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.support.git import make_repo

CONFIG = "[provider.local]\npipeline_command = []\n"
PATCH = """diff --git a/greet.py b/greet.py
new file mode 100644
--- /dev/null
+++ b/greet.py
@@ -0,0 +1,2 @@
+def greet(name):
+    return f"hello {name}"
"""
T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
IMPLEMENTOR = SessionId("implementor-0a1b2c3d4e5f")
PLANNER = SessionId("planner-9f8e7d6c5b4a")
REVIEWER = SessionId("reviewer-112233445566")
TRANSCRIPT = (
    "03:04:06 system  implementor started on work item #1\n03:04:09 tool    Write greet.py\n"
)


@dataclass
class Worked:
    repo: Path
    state_dir: Path
    greeting: WorkItemId
    farewell: WorkItemId
    revision: RevisionId


def journal(state_dir: Path, events: list[EngineEvent]) -> None:
    """Journal ``events`` as the engine does: appended, then marked processed (replay and
    status show processed events only)."""
    store = Journal(state_dir / "journal.sqlite3")
    try:
        for event in events:
            store.mark_processed(store.append(event))
    finally:
        store.close()


def run_events(greeting: WorkItemId, revision: RevisionId) -> list[EngineEvent]:
    """Three runs as the executor journals them: an implementor that completed in 12.5 s for
    $0.0123, a planner that failed, and a reviewer still running."""
    implementor = ImplementorStartParams(
        session_id=IMPLEMENTOR, work_item_id=greeting, branch_name="cpe/1-greeting"
    )
    planner = PlannerStartParams(session_id=PLANNER, spec_paths=("specs/greeting.md",))
    reviewer = ReviewerStartParams(session_id=REVIEWER, work_item_id=greeting, revision_id=revision)
    result = ImplementorResult(outcome="completed", summary="greet(name)", patch=PATCH)
    return [
        AgentRequested(session_id=IMPLEMENTOR, params=implementor, at=T0),  # seq 1
        AgentStarted(session_id=IMPLEMENTOR, at=T0 + timedelta(seconds=1)),  # seq 2
        ImplementorCompleted(  # seq 3
            session_id=IMPLEMENTOR,
            result=result,
            cost_usd=0.0123,
            turns=4,
            model="claude-sonnet-5",
            at=T0 + timedelta(seconds=13.5),
        ),
        AgentRequested(session_id=PLANNER, params=planner, at=T0 + timedelta(seconds=20)),
        AgentStarted(session_id=PLANNER, at=T0 + timedelta(seconds=21)),
        AgentFailed(
            session_id=PLANNER,
            role="planner",
            kind="failed",
            reason="the model returned no plan",
            cost_usd=0.5,
            at=T0 + timedelta(seconds=23),
        ),
        AgentRequested(session_id=REVIEWER, params=reviewer, at=T0 + timedelta(seconds=30)),
        AgentStarted(session_id=REVIEWER, at=T0 + timedelta(seconds=31)),
    ]


@pytest.fixture
def worked(tmp_path: Path) -> Worked:
    return make_worked(tmp_path)


def make_worked(tmp_path: Path) -> Worked:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG, "README.md": "x\n"})
    state_dir = repo / ".cpe"
    with LocalProvider(repo, state_dir, "main", LocalPipeline(["true"], 60)) as provider:
        writer = provider.work_item_writer
        greeting = writer.create_work_item("Greeting", "Add greet(name).")
        farewell = writer.create_work_item("Farewell", "Add bye(name).", blocked_by=[greeting])
        writer.transition_status(greeting, "in-review")
        revision = provider.revision_writer.create_from_patch(
            greeting, "cpe/1-greeting", "Add greet(name)", "", PATCH
        )
        assert provider.wait_for_pipelines(60), "the local pipeline did not finish"
    journal(state_dir, run_events(greeting, revision.id))
    runs = state_dir / "runs" / IMPLEMENTOR
    runs.mkdir(parents=True)
    (runs / "transcript.log").write_text(TRANSCRIPT)
    (runs / "runner_metadata.json").write_text(json.dumps({"agent_family": "claude_sdk"}))
    return Worked(repo, state_dir, greeting, farewell, revision.id)


def sections(stdout: str) -> dict[str, list[str]]:
    """``cpe status`` output as {section title: its lines}."""
    blocks = [block.splitlines() for block in stdout.strip().split("\n\n")]
    return {block[0]: [line.strip() for line in block[1:]] for block in blocks}


def line_with(lines: list[str], text: str) -> str:
    [line] = [line for line in lines if text in line]
    return line


# ---------------------------------------------------------------------------- cpe status


def test_status_shows_work_items_with_status_and_blockers(worked: Worked) -> None:
    result = cpe("status", cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    items = sections(result.stdout)["work items"]
    # each with what its runs cost: the greeting's implementor $0.0123, its reviewer not yet
    greeting = line_with(items, "Greeting").split()[:3]
    assert greeting == [f"#{worked.greeting}", "in-review", "$0.01"]
    farewell = line_with(items, "Farewell")
    assert farewell.split()[:3] == [f"#{worked.farewell}", "pending", "$0.00"]
    assert farewell.endswith(f"blocked by #{worked.greeting}")


def test_status_and_work_list_name_only_the_blockers_not_yet_done(worked: Worked) -> None:
    """Once the greeting is done, the farewell is blocked by nothing any more: neither view
    says "blocked by" for it (a done blocker used to be listed as if it still blocked)."""
    with LocalProvider(worked.repo, worked.state_dir, "main", LocalPipeline(["true"], 60)) as p:
        p.work_item_writer.transition_status(worked.greeting, "done")
    status = cpe("status", cwd=worked.repo)
    assert status.returncode == 0, status.stderr
    farewell = line_with(sections(status.stdout)["work items"], "Farewell")
    assert farewell.split()[:2] == [f"#{worked.farewell}", "pending"]
    assert "blocked by" not in farewell
    listed = cpe("work", "list", cwd=worked.repo)
    assert listed.returncode == 0, listed.stderr
    [line] = [line for line in listed.stdout.splitlines() if "Farewell" in line]
    assert line.endswith("Farewell"), line
    shown = cpe("work", "show", worked.farewell, cwd=worked.repo)
    assert f"blocked by #{worked.greeting} (done)" in shown.stdout


def test_status_marks_an_items_cost_with_a_run_that_reported_none(worked: Worked) -> None:
    """A run that ended without a cost makes the item's figure a lower bound: `?`."""
    params = ImplementorStartParams(
        session_id=SessionId("implementor-ffff"),
        work_item_id=worked.farewell,
        branch_name="cpe/2-farewell",
    )
    journal(
        worked.state_dir,
        [
            AgentRequested(session_id=params.session_id, params=params, at=T0),
            AgentFailed(
                session_id=params.session_id,
                role="implementor",
                kind="timed-out",
                reason="exceeded max_agent_duration",
                at=T0 + timedelta(seconds=5),
            ),
        ],
    )
    items = sections(cpe("status", cwd=worked.repo).stdout)["work items"]
    assert line_with(items, "Farewell").split()[:3] == [f"#{worked.farewell}", "pending", "$0.00?"]


def test_status_shows_revisions_with_their_pipeline_state(worked: Worked) -> None:
    result = cpe("status", cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    revision = line_with(sections(result.stdout)["revisions"], "Add greet(name)")
    assert revision.split()[:4] == [worked.revision, "open", "pipeline", "success"]
    assert f"work item #{worked.greeting}" in revision


def test_status_shows_ended_runs_with_role_duration_cost_and_outcome(worked: Worked) -> None:
    result = cpe("status", cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    recent = sections(result.stdout)["recent agent runs (the last 20, newest last)"]
    assert len(recent) == 3  # two runs, and the failed one's whole reason on a line of its own
    assert recent[2] == "why: the model returned no plan"
    implementor = line_with(recent, IMPLEMENTOR).split()
    assert implementor[1:5] == ["implementor", "claude-sdk", worked.greeting, "completed"]
    assert implementor[5:] == ["12.5s", "$0.0123", "completed"]
    planner = line_with(recent, PLANNER)
    assert planner.split()[1] == "planner"
    assert " failed " in planner
    assert "2.0s" in planner
    assert "$0.5000" in planner
    assert planner.endswith("the model returned no plan")


def test_status_shows_active_runs_apart_from_ended_ones(worked: Worked) -> None:
    """No engine runs on this journal: its active run is shown as the engine left it."""
    result = cpe("status", cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    shown = sections(result.stdout)
    [active] = shown["agent runs left active when the engine stopped (the next start ends them)"]
    assert active.split()[:2] == [REVIEWER, "reviewer"]
    assert " running when the engine stopped (" in active
    assert REVIEWER not in "\n".join(shown["recent agent runs (the last 20, newest last)"])


def test_status_with_nothing_done_yet_says_none_in_each_section(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    result = cpe("status", cwd=repo)
    assert result.returncode == 0, result.stderr
    shown = sections(result.stdout)
    assert shown["work items"] == ["(none)"]
    assert shown["revisions"] == ["(none)"]
    assert shown["active agent runs (duration so far)"] == ["(none)"]


def test_status_lists_the_specs_it_skips_with_why(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    odd = Spec(path="specs/logo.md", blob_sha="b1", problem="not UTF-8 text (byte 0: b'\\x89')")
    journal(
        repo / ".cpe", [SpecChanged(spec=odd), SpecChanged(spec=Spec(path="a.md", blob_sha="a"))]
    )
    result = cpe("status", cwd=repo)
    assert result.returncode == 0, result.stderr
    shown = sections(result.stdout)
    assert shown["specs skipped (planned again once they change)"] == [
        "specs/logo.md",
        "not UTF-8 text (byte 0: b'\\x89')",
    ]


def test_status_from_a_subdirectory_uses_the_repositorys_config(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo", {"supervisor.toml": '[engine]\nstate_dir = "var/state"\n', "src/x": ""}
    )
    result = cpe("status", cwd=repo / "src")
    assert result.returncode == 0, result.stderr
    assert f"state in {repo / 'var' / 'state'}" in result.stdout


def test_status_honours_a_config_given_with_config(worked: Worked, tmp_path: Path) -> None:
    """A config outside the repository, with its own state dir: status reads that state (none
    yet), not the repository's .cpe/, even though the repository's own config is broken."""
    (worked.repo / "supervisor.toml").write_text("[engine]\nbroken = true\n")
    outside = tmp_path / "elsewhere.toml"
    outside.write_text(CONFIG + '[engine]\nstate_dir = "other-state"\n')
    result = cpe("status", "--config", str(outside), "--repo", str(worked.repo), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"state in {worked.repo / 'other-state'}" in result.stdout
    assert sections(result.stdout)["work items"] == ["(none)"]


def test_status_on_github_shows_the_engines_last_view_without_a_token(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"supervisor.toml": '[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"\n'},
    )
    item = WorkItem(id=WorkItemId("42"), title="From an issue", status="pending")
    journal(repo / ".cpe", [WorkItemChanged(work_item=item, at=T0)])
    result = cpe("status", cwd=repo)  # no GITHUB_TOKEN in the environment
    assert result.returncode == 0, result.stderr
    assert "GitHub o/r" in result.stdout
    assert line_with(sections(result.stdout)["work items"], "From an issue").startswith("#42")


def test_status_shows_a_merge_held_by_branch_protection_and_why(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"supervisor.toml": '[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"\n'},
    )
    item = WorkItem(id=WorkItemId("3"), title="Answer", status="approved")
    revision = Revision(
        id=RevisionId("7"),
        title="Answer",
        work_item_id=item.id,
        branch="cpe/3-a",
        head_sha="a" * 40,
    )
    reason = 'Required status check "deploy" is expected.'
    waiting = MergeWaiting(
        work_item_id=item.id, revision_id=revision.id, head_sha="a" * 40, reason=reason, at=T0
    )
    journal(
        repo / ".cpe",
        [
            WorkItemChanged(work_item=item, at=T0),
            RevisionChanged(revision=revision, at=T0),
            waiting,
            waiting.model_copy(update={"at": T0 + timedelta(minutes=1)}),
        ],
    )
    result = cpe("status", cwd=repo)
    assert result.returncode == 0, result.stderr
    [title] = [t for t in sections(result.stdout) if t.startswith("merges held")]
    lines = sections(result.stdout)[title]
    assert lines[0] == "revision 7 (work item #3) since 2025-01-02 03:04:05 UTC, 2 tries"
    assert lines[1] == reason


# ---------------------------------------------------------------------------- cpe work add


def test_work_add_creates_an_item_that_status_then_shows(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    added = cpe("work", "add", "Add a greeting", "--body", "greet(name) returns hello", cwd=repo)
    assert (added.returncode, added.stdout) == (0, "created work item #1\n"), added.stderr
    shown = cpe("status", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    item = line_with(sections(shown.stdout)["work items"], "Add a greeting")
    assert item.split()[:2] == ["#1", "pending"]
    with LocalProvider(repo, repo / ".cpe", "main") as provider:
        body = provider.work_item_reader.get_work_item_body(WorkItemId("1"))
    assert body == "greet(name) returns hello"


def test_work_add_on_github_is_a_one_line_error_saying_what_to_do(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"supervisor.toml": '[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"\n'},
    )
    line = one_line_error(cpe("work", "add", "Add a greeting", cwd=repo))
    assert "work add: provider.kind is 'github'; expected 'local'" in line
    assert "open an issue in o/r" in line


# ---------------------------------------------------------------------------- cpe runs show


def test_runs_show_prints_the_runs_summary_and_transcript(worked: Worked) -> None:
    result = cpe("runs", "show", IMPLEMENTOR, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    summary, transcript = result.stdout.split("\n", 1)
    assert summary.split()[:6] == [
        "run",
        IMPLEMENTOR,
        "implementor",
        "claude-sdk",
        "1",
        "completed",
    ]
    assert transcript == TRANSCRIPT


def test_runs_show_an_unknown_session_is_a_one_line_error(worked: Worked) -> None:
    line = one_line_error(cpe("runs", "show", "implementor-nosuchrun", cwd=worked.repo), 1)
    assert "unknown session 'implementor-nosuchrun': no such agent run" in line
    assert "expected a session id that cpe status lists" in line


def test_runs_show_a_run_without_a_transcript_says_where_it_looked(worked: Worked) -> None:
    line = one_line_error(cpe("runs", "show", PLANNER, cwd=worked.repo), 1)
    assert f"session {PLANNER}: no transcript at {worked.state_dir / 'runs' / PLANNER}" in line
    assert "(the run is failed)" in line


def test_runs_show_refuses_a_path_for_a_session(worked: Worked) -> None:
    line = one_line_error(cpe("runs", "show", "../journal.sqlite3", cwd=worked.repo), 1)
    assert "is not a session id" in line


# ---------------------------------------------------------------------------- cpe replay


def replayed(repo: Path, *options: str) -> dict[str, object]:
    result = cpe("replay", *options, cwd=repo)
    assert result.returncode == 0, result.stderr
    state: dict[str, object] = json.loads(result.stdout)
    return state


def test_replay_until_n_shows_the_state_after_event_n(worked: Worked) -> None:
    requested = replayed(worked.repo, "--until", "1")["agent_runs"]
    assert isinstance(requested, dict)
    assert list(requested) == [IMPLEMENTOR]
    assert requested[IMPLEMENTOR]["status"] == "requested"
    completed = replayed(worked.repo, "--until", "3")["agent_runs"]
    assert isinstance(completed, dict)
    assert completed[IMPLEMENTOR]["status"] == "completed"
    assert completed[IMPLEMENTOR]["cost_usd"] == 0.0123


def test_replay_without_until_shows_the_whole_journal(worked: Worked) -> None:
    runs = replayed(worked.repo)["agent_runs"]
    assert isinstance(runs, dict)
    assert {sid: run["status"] for sid, run in runs.items()} == {
        IMPLEMENTOR: "completed",
        PLANNER: "failed",
        REVIEWER: "running",
    }


def test_replay_without_a_journal_is_a_one_line_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    line = one_line_error(cpe("replay", cwd=repo), 1)
    assert f"no journal at {repo / '.cpe' / 'journal.sqlite3'}" in line


def test_status_shows_when_a_failed_item_is_retried_and_why(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    now = datetime.now(UTC)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-1"), work_item_id=WorkItemId("1"), branch_name="cpe/1"
    )
    item = WorkItem(id=WorkItemId("1"), title="Greeting", status="pending")
    journal(
        repo / ".cpe",
        [
            WorkItemChanged(work_item=item),
            AgentRequested(session_id=params.session_id, params=params, at=now),
            AgentFailed(
                session_id=params.session_id,
                role="implementor",
                kind="failed",
                reason="the tests failed:\n  test_greet",
                at=now,
            ),
        ],
    )
    result = cpe("status", cwd=repo)
    assert result.returncode == 0, result.stderr
    shown = sections(result.stdout)
    [retry, why] = shown["retries waiting (a failed attempt backs off before the next)"]
    assert retry.startswith("#1    retry at ")
    assert retry.endswith("(attempt 1 failed)")
    assert why == "why: the tests failed: test_greet"


@pytest.mark.parametrize("by", ["item", "role", "runtime", "model", "day"])
def test_costs_add_up_to_what_the_runs_recorded(worked: Worked, by: str) -> None:
    """`cpe costs`: every group, and the total, is the sum of the journal's recorded costs; a
    run without a cost is counted as unknown, never as 0."""
    store = Journal(worked.state_dir / "journal.sqlite3")
    try:
        runs = [r for r in store.replay().agent_runs.values() if r.ended_at is not None]
    finally:
        store.close()
    result = cpe("costs", "--by", by, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    header, *rows, total = result.stdout.strip().splitlines()
    assert header.split() == [by, "runs", "cost", "(USD)", "unknown"]
    figures = {row.split()[0]: row.split()[1:] for row in rows}
    assert sum(int(f[0]) for f in figures.values()) == len(runs)
    recorded = sum(r.cost_usd or 0.0 for r in runs)
    assert sum(float(f[1]) for f in figures.values()) == pytest.approx(recorded, abs=1e-3)
    assert total.split() == [
        "total",
        str(len(runs)),
        f"{recorded:.4f}",
        str(sum(1 for r in runs if r.cost_usd is None)),
    ]
    if by == "role":
        implementors = sum(r.cost_usd or 0.0 for r in runs if r.role == "implementor")
        assert float(figures["implementor"][1]) == pytest.approx(implementors, abs=1e-4)
    if by == "model":  # the planner's run named no model
        assert figures["claude-sonnet-5"] == ["1", "0.0123", "0"]
        assert figures["unknown"] == ["1", "0.5000", "0"]


def test_costs_refuses_a_date_it_cannot_read(worked: Worked) -> None:
    line = one_line_error(cpe("costs", "--since", "yesterday", cwd=worked.repo), code=2)
    assert "--since 'yesterday': not a date; expected YYYY-MM-DD" in line


def test_status_shows_the_cost_today_against_the_daily_budget(worked: Worked) -> None:
    result = cpe("status", cwd=worked.repo)
    [line] = [x for x in result.stdout.splitlines() if x.startswith("cost: ")]
    assert line.endswith("in all (cpe costs: the details)")
    assert "of $100.00 a day" in line


def test_status_shows_the_merge_queue_in_order_and_the_items_it_sent_back(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "supervisor.toml": '[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"'
            "\n[workflow]\nauto_merge = true\n"
        },
    )
    first = WorkItem(id=WorkItemId("1"), title="One", status="in-review", linked_revision="7")
    second = WorkItem(id=WorkItemId("2"), title="Two", status="in-review", linked_revision="8")
    third = WorkItem(id=WorkItemId("3"), title="Three", status="approved")
    revisions = [
        Revision(id=RevisionId(r), title=t, work_item_id=WorkItemId(w), branch=f"cpe/{w}",
                 head_sha=h * 40, reviewed_sha=h * 40, pipeline=Pipeline(status="success"))
        for r, t, w, h in (("7", "One", "1", "a"), ("8", "Two", "2", "b"))
    ]  # fmt: skip
    tested = revisions[0].model_copy(
        update={"head_sha": "c" * 40, "pipeline": Pipeline(status="pending")}
    )
    report = SentBack(
        revision_id=RevisionId("9"), problem="conflict", reason="conflicts in app.py",
        files=("app.py",), moved_by="the merge of #1 (revision #7, dddddddddddd)",
    )  # fmt: skip
    journal(
        repo / ".cpe",
        [
            *(WorkItemChanged(work_item=i, at=T0) for i in (first, second, third)),
            *(RevisionChanged(revision=r, at=T0) for r in revisions),
            StatusTransitioned(work_item_id=first.id, to="approved", at=T0),
            StatusTransitioned(work_item_id=second.id, to="approved", at=T0 + timedelta(1)),
            BranchUpdated(work_item_id=first.id, revision=tested, base_sha="e" * 40, at=T0),
            StatusTransitioned(work_item_id=third.id, to="needs-refinement", landing=report, at=T0),
        ],
    )
    result = cpe("status", cwd=repo)
    assert result.returncode == 0, result.stderr
    shown = sections(result.stdout)
    [queue] = [t for t in shown if t.startswith("merge queue")]
    assert shown[queue] == [
        f"1. #1 revision 7: testing {'c' * 12} on top of the default branch at {'e' * 12}: "
        "pipeline pending since 2025-01-02 03:04:05 UTC",
        "2. #2 revision 8: waits its turn",
    ]
    [back] = [t for t in shown if t.startswith("sent back by the merge queue")]
    [line] = shown[back]
    assert line.startswith("#3 conflicts with the default branch in app.py (round 1 of 3, ")
    assert line.endswith("moved by the merge of #1 (revision #7, dddddddddddd)")
