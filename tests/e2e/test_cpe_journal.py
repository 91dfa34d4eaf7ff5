"""`cpe run` and its journal from the command line: a disk that fills up under a running
engine, and starting over deliberately on a lost journal."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
from pathlib import Path

from adapters.providers.local.provider import LocalProvider
from tests.e2e.running import CPE, MODEL_KEY, make_cpe_repo, wait_for

BASE_ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": MODEL_KEY}


def test_a_disk_that_fills_up_under_a_running_engine_stops_it_with_one_line_and_exit_74(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """The journal cannot grow past a file-size limit (what a full disk does to a write): cpe
    stops, exit 74 (EX_IOERR), with one line naming the journal, not a crash loop (75)."""
    repo = make_cpe_repo(tmp_path / "repo")
    provider = LocalProvider(repo, repo / ".cpe", "main")
    ids = [provider.work_item_writer.create_work_item(f"item {n}", "b") for n in range(3)]
    for wid in ids:  # never dispatched: only the journal grows, one change at a time
        provider.work_item_writer.transition_status(wid, "blocked")
    provider.close()  # the tracker's log is folded in: cpe's own writes to it stay small

    def limit_file_size() -> None:  # Python ignores SIGXFSZ: a write past it fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))

    cpe = subprocess.Popen(
        [str(CPE), "run", "--repo", str(repo)],
        preexec_fn=limit_file_size,  # noqa: PLW1509 - the child only sets a limit
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**BASE_ENV, "HOME": str(tmp_path)},
    )
    processes.append(cpe)
    provider = LocalProvider(repo, repo / ".cpe", "main")
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(cpe.stdout or ()), daemon=True)
    reader.start()
    changes = 0
    # Under a running engine: once it serves its control socket its start, which writes the
    # tracker too, is behind it, so the first write the limit refuses is the journal's.
    up = wait_for(lambda: (repo / ".cpe" / "control.sock").exists() or cpe.poll() is not None)
    assert up, "".join(output[-20:])
    assert cpe.poll() is None, "".join(output[-20:])
    try:
        # every change of a label is an event the engine journals
        while cpe.poll() is None and changes < 2_000:
            provider.work_item_writer.update_work_item(ids[changes % 3], labels=[f"n{changes}"])
            changes += 1
            wait_for(lambda: cpe.poll() is not None, 0.1)
    finally:
        provider.close()
    code = cpe.wait(120)
    reader.join(30)
    if cpe.stdout is not None:
        cpe.stdout.close()
    assert code == 74, "".join(output[-20:])
    journal = repo / ".cpe" / "journal.sqlite3"
    [line] = [text for text in output if text.startswith("cpe: ")]
    assert line.startswith(f"cpe: journal error: {journal}: ")
    assert "free space or fix the state directory" in line
    assert not any("restart intensity exceeded" in text for text in output)


def start_over(repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]) -> str:
    """``cpe run --new-journal`` until its engine starts, then SIGTERM: exit 0; its log. The
    journal it found is kept beside the new one."""
    log = tmp_path / "cpe.log"
    with log.open("w") as out:
        cpe = subprocess.Popen(
            [str(CPE), "run", "--repo", str(repo), "--new-journal"],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**BASE_ENV, "HOME": str(tmp_path)},
        )
        processes.append(cpe)
        assert wait_for(lambda: "engine starting" in log.read_text(), 60), log.read_text()
        cpe.send_signal(signal.SIGTERM)
        assert cpe.wait(120) == 0, log.read_text()
    state = repo / ".cpe"
    assert [p.name for p in state.glob("journal.sqlite3.old-*")], "the old journal is kept"
    return log.read_text()


def test_cpe_run_new_journal_sets_a_lost_one_aside_and_starts(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    state = repo / ".cpe"
    (state / "runs" / "planner-1").mkdir(parents=True)
    (state / "journal.sqlite3").write_bytes(b"")
    assert "the old journal is set aside" in start_over(repo, tmp_path, processes)


def test_a_damaged_journal_says_how_to_start_over_and_new_journal_does(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """A journal sqlite cannot read ("file is not a database"): one line naming it and the way
    out, exit 65; cpe run --new-journal sets it aside and starts."""
    repo = make_cpe_repo(tmp_path / "repo")
    state = repo / ".cpe"
    state.mkdir(exist_ok=True)
    (state / "journal.sqlite3").write_bytes(b"not a journal at all, " * 100)
    refused = subprocess.run(
        [str(CPE), "run", "--repo", str(repo)],
        capture_output=True,
        text=True,
        env={**BASE_ENV, "HOME": str(tmp_path)},
        timeout=120,
        check=False,
    )
    assert refused.returncode == 65, refused.stderr
    [said] = [line for line in refused.stderr.splitlines() if line.startswith("cpe: ")]
    assert "journal.sqlite3: cannot open the journal: file is not a database" in said, said
    assert "cpe run --new-journal" in said, said
    start_over(repo, tmp_path, processes)
