"""`cpe demo` as a newcomer runs it: a subprocess that must exit 0, leaving the sample
repository in the state it claims."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from actors.journal import Journal
from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE
from tests.e2e.running import CPE, Reader, run_command
from tests.real_clis import bwrap_variants, codex_path, real_codex

RUNS_HEADING = "agent runs (costs simulated: the scripted model reports made-up usage)"
ROOT = Path(__file__).resolve().parents[2]


def run_demo(
    tmp_path: Path, *options: str, path: str | None = None, env: dict[str, str] | None = None
) -> tuple[Path, str]:
    """``cpe demo`` in a subprocess; it must exit 0 and say OK. Returns the sample repo and
    what the demo printed."""
    result = run_command(
        [str(CPE), "demo", "--dir", str(tmp_path), *options],
        home=tmp_path,
        timeout=580,
        path=path,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "cpe demo: OK" in result.stdout
    return tmp_path / "sample", result.stdout


@pytest.mark.timeout(600)
def test_cpe_demo_exits_0_and_the_sample_repository_is_done(tmp_path: Path) -> None:
    repo, stdout = run_demo(tmp_path)
    assert_loop_done(repo)
    # progress as it goes, then the timeline, the agent runs and where the transcripts are
    assert f"work item #1 {ITEM_ONE_TITLE!r}: new, pending" in stdout
    assert "revision 1: open, pipeline success" in stdout
    timeline = stdout.split("\ntimeline\n", 1)[1]
    assert "review posted on 1: needs-changes" in timeline
    assert "revision 2 merged" in timeline
    transcripts = repo / ".cpe" / "runs"
    assert f"transcripts: {transcripts}/<session>/transcript.log" in stdout
    assert len(list(transcripts.glob("*/transcript.log"))) >= 6  # 1 plan, 3 implement, 3 review
    assert_review_comments_shown(repo)


def assert_review_comments_shown(repo: Path) -> None:
    """``cpe work show 1``: the review that asked for changes, its inline comments under it."""
    shown = run_command([str(CPE), "work", "show", "1", "--repo", str(repo)], home=repo.parent)
    assert shown.returncode == 0, shown.stderr
    reviews = shown.stdout.split("\nreviews\n", 1)[1].splitlines()
    [asked] = [n for n, line in enumerate(reviews) if " needs-changes on revision " in line]
    assert "the whitespace around the name is kept" in reviews[asked]  # its summary
    assert reviews[asked + 1].startswith('    greetings/greet.py:5 — greet("  ") returns')
    assert reviews[asked + 2] == (
        "    tests/test_greet.py — Add tests for the stripped name and for an empty and a "
        "whitespace-only name."
    )
    assert " approve on revision " in reviews[asked + 3]  # the second review, no comments


@pytest.mark.timeout(600)
def test_a_demo_that_cannot_finish_fails_saying_what_stalled_and_where(tmp_path: Path) -> None:
    """The implementor reports ``blocked`` on the first item: only a person can unblock it,
    so the demo stops at once, exits 1 and names the item, its last run and its transcript."""
    script = f"""
import sys
from pathlib import Path
from adapters.demo.book import demo_book
from adapters.cli.demo import demo
from adapters.scripted_model import Match, load_scenario
book = [s for s in demo_book() if s.match is not None and s.match.role == "planner"]
book.append(load_scenario("blocked", match=Match(role="implementor")))
sys.exit(demo(Path({str(tmp_path)!r}), book=book))
"""
    result = run_command([sys.executable, "-c", script], home=tmp_path, cwd=ROOT, timeout=580)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "cpe demo: FAILED — stalled (a work item is blocked):" in out
    assert f"work item #1 {ITEM_ONE_TITLE!r} is blocked" in out
    assert f"work item #2 {ITEM_TWO_TITLE!r} is pending" in out
    [where] = [line.split()[-1] for line in out.splitlines() if "transcript /" in line]
    assert Path(where).is_file(), "the transcript named is there to read"
    [last_run] = [line for line in out.splitlines() if "last run implementor-" in line]
    assert "completed, blocked" in last_run  # the run completed with the outcome "blocked"


@pytest.fixture
def cache() -> Iterator[Path]:
    """The demo's ``XDG_CACHE_HOME``, outside the temporary directory (its ``HOME`` is not)."""
    directory = Path(tempfile.mkdtemp(prefix="cpe-demo-cache-", dir="/var/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.timeout(600)
@pytest.mark.spec("S003-15")
@pytest.mark.parametrize("bwrap", bwrap_variants())
@pytest.mark.parametrize(
    "roles",
    [
        {"planner": "claude-sdk", "implementor": "codex-cli", "reviewer": "claude-cli"},
        {"planner": "codex-cli", "implementor": "codex-cli", "reviewer": "codex-cli"},
    ],
    ids=["mixed", "all-codex"],
)
def test_the_demo_loop_runs_on_other_runtimes(
    tmp_path: Path, cache: Path, roles: dict[str, str], bwrap: str
) -> None:
    """Teams mix agents: the real codex (its default model, code mode) and the real claude CLI
    in -p mode take roles in the same loop; the engine does not change. codex runs with the
    system ``bwrap`` on its PATH (where there is one) and without; the demo's state is under
    the temporary directory, so each codex run's home is made in the cache and removed."""
    options = [arg for role, kind in roles.items() for arg in ("--runtime", f"{role}={kind}")]
    path = f"{real_codex().parent}{os.pathsep}{os.environ['PATH']}"
    path = codex_path(bwrap, path, tmp_path / "path")
    repo, stdout = run_demo(tmp_path, *options, path=path, env={"XDG_CACHE_HOME": str(cache)})
    assert_loop_done(repo)
    assert list((cache / "cpe" / "codex-homes").iterdir()) == []  # made there, then removed
    families: dict[str, set[str]] = {}
    for metadata in (repo / ".cpe" / "runs").glob("*/runner_metadata.json"):
        meta = json.loads(metadata.read_text())
        families.setdefault(metadata.parent.name.split("-")[0], set()).add(meta["agent_family"])
        assert meta["termination"] == "completed"
    assert families == {role: {kind.replace("-", "_")} for role, kind in roles.items()}
    # the timeline names the runtime of every run
    timeline = stdout.split(f"\n{RUNS_HEADING}\n", 1)[1]
    for line in timeline.splitlines():
        if line.startswith("  ") and "-" in line.split()[0]:
            role, runtime = line.split()[1:3]
            assert runtime == roles[role], line


def test_a_codex_demo_without_codex_says_how_to_install_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(CPE), "demo", "--dir", str(tmp_path), "--runtime", "implementor=codex-cli"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    assert result.returncode == 2
    assert "codex CLI is not on PATH" in result.stdout
    assert not (tmp_path / "sample").exists()


def assert_loop_done(repo: Path) -> None:
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        state = journal.replay()
    finally:
        journal.close()
    assert sorted(i.status for i in state.work_items.values()) == ["done", "done"]
    assert sorted(r.state for r in state.revisions.values()) == ["merged", "merged"]
    titles = {i.id: i.title for i in state.work_items.values()}
    changes = [
        titles[r.subject]
        for r in state.agent_runs.values()
        if r.role == "reviewer" and r.outcome == "needs-changes"
    ]
    assert changes == [ITEM_ONE_TITLE]  # one round of refinement, on the first item
    # both features are on the default branch itself, not only in the checkout
    greet = subprocess.run(
        ["git", "-C", str(repo), "show", "main:greetings/greet.py"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "def greet(" in greet
    assert "def greet_all(" in greet
    tests = subprocess.run(
        ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert tests.returncode == 0, tests.stderr
    assert not any((repo / ".worktrees").glob("*/*"))  # no worktree left


@pytest.mark.timeout(600)
def test_ctrl_c_stops_the_demo_with_one_line_and_exit_130_no_traceback(tmp_path: Path) -> None:
    """A newcomer presses Ctrl-C while the demo runs: the engine stops its runs, one line says
    so, no KeyboardInterrupt traceback, exit 130 (as a shell reports Ctrl-C), no agent left."""
    demo = subprocess.Popen(
        [str(CPE), "demo", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    try:
        assert demo.stdout is not None
        assert demo.stderr is not None
        out, err = Reader(demo.stdout), Reader(demo.stderr)
        assert out.wait_for("implementor running", 300), out.text + err.text
        demo.send_signal(signal.SIGINT)
        assert demo.wait(300) == 130, out.text + err.text
        out.join()
        err.join()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(60)
        for pipe in (demo.stdout, demo.stderr):
            if pipe is not None:
                pipe.close()
    assert "Traceback" not in out.text + err.text, out.text + err.text
    assert out.lines[-1] == "cpe demo: interrupted (Ctrl-C); its runs were stopped", out.text
    left = [
        p
        for p in psutil.process_iter(["cwd"])
        if (p.info.get("cwd") or "").startswith(str(tmp_path / "sample"))
    ]
    assert left == [], f"agent processes left: {left}"
