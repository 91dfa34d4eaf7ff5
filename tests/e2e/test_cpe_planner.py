"""`cpe run` when the planner keeps failing on the specs: it stops by itself.

Each spec version gets at most ``max_attempts`` planner runs, however the specs were grouped
into runs (here a second spec arrives after the first run failed, so the runs are split), the
runs back off between failures, and the log and `cpe status` say which specs wait for a new
version. The real `claude` CLI, the scripted model answering every planner with a plan that does
not validate."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import agent_runs, make_cpe_repo, start_cpe, wait_for
from tests.support.git import git_raw

GAVE_UP = "planner runs failed on this version: planned again once it changes"


def _commit_spec(repo: Path, name: str) -> None:
    (repo / "specs").mkdir(exist_ok=True)
    (repo / "specs" / name).write_text(f"# {name}\n\nAdd a function named after {name}.\n")
    git_raw(repo, "add", "specs")
    git_raw(repo, "commit", "-q", "-m", f"spec {name}")


def test_specs_failing_in_separate_planner_runs_get_at_most_max_attempts_runs_each(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    _commit_spec(repo, "a.md")
    home = tmp_path / "home"
    home.mkdir()
    status = ""

    def status_says(texts: str | tuple[str, ...], count: int) -> bool:
        """``cpe status`` says one of ``texts`` at least ``count`` times."""
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        alternatives = (texts,) if isinstance(texts, str) else texts
        return any(status.count(text) >= count for text in alternatives)

    book = [load_scenario("invalid_output", match=Match(role="planner"))]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        # b arrives once a's first run has failed: the runs that follow group them otherwise.
        # (On a loaded machine a's three runs may all fail between two looks: then b's runs
        # are its own, split all the same.)
        failed = ("planner run(s) failed", GAVE_UP)
        assert wait_for(lambda: status_says(failed, 1), 180), status
        _commit_spec(repo, "b.md")
        assert wait_for(lambda: status_says(GAVE_UP, 2), 300), (
            status + (home / "cpe.log").read_text()[-3000:]
        )
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    planners = [run for run in agent_runs(repo) if run.role == "planner"]
    per_spec = {
        path: sum(1 for run in planners if path in run.spec_shas)
        for path in ("specs/a.md", "specs/b.md")
    }
    assert per_spec == {"specs/a.md": 3, "specs/b.md": 3}, [r.spec_shas for r in planners]
    assert any(len(run.spec_shas) == 1 for run in planners), "the runs were split"
    assert all(run.status == "failed" and run.failure_class == "work" for run in planners)
    log_text = (home / "cpe.log").read_text()
    assert log_text.count('"spec not planned again until it changes"') == 2
    assert '"planner run deferred"' in log_text  # the retries backed off


def test_a_spec_whose_planning_spent_its_budget_waits_for_its_next_version(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """[budget] per_spec_usd: the first failed planner run on a.md costs more than the spec's
    planning budget, so no second run comes although attempts are left; the log and `cpe
    status` say why; a new version of the spec is planned again."""
    repo = make_cpe_repo(tmp_path / "repo", extra="[budget]\nper_spec_usd = 0.000001\n")
    _commit_spec(repo, "a.md")
    home = tmp_path / "home"
    home.mkdir()
    status = ""

    def status_says(text: str) -> bool:
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        return text in status

    book = [load_scenario("invalid_output", match=Match(role="planner"))]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        assert wait_for(lambda: status_says("spent [budget] per_spec_usd"), 180), status
        assert "planned again once it changes" in status
        logged = home / "cpe.log"
        assert wait_for(lambda: "its planning budget is spent" in logged.read_text(), 60)
        # a new version is planned (and fails, and waits) in its turn
        (repo / "specs" / "a.md").write_text("# a.md\n\nAdd a function a() returning 1.\n")
        git_raw(repo, "commit", "-qam", "spec a, second version")
        assert wait_for(
            lambda: (
                sum(
                    1
                    for run in agent_runs(repo)
                    if run.role == "planner" and run.status == "failed"
                )
                == 2
            ),
            180,
        )
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    planners = [run for run in agent_runs(repo) if run.role == "planner"]
    assert len(planners) == 2  # one per version: attempts were left, the budget was not
    assert len({run.spec_shas["specs/a.md"] for run in planners}) == 2
    assert all((run.cost_usd or 0) > 0 for run in planners)
