"""The scripted model as a newcomer uses it on a repository of their own: ``cpe scripted-model
serve`` in one process, its printed ``export`` line in front of a real ``cpe run`` in another;
or ``cpe run --scripted``, no model account at all. The real CLIs run their real tools; the
shipped example book (``books/one_file.json``) writes the file an item names and approves."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.running import (
    CPE,
    Reader,
    agent_runs,
    make_cpe_repo,
    run_command,
    start_cpe,
    wait_for,
    work_items,
)
from tests.real_clis import real_codex
from tests.support.git import git_raw

NAMED = "file: GREETING.md\nHello from the scripted model.\n\nA second paragraph."


def cpe_command(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_command([str(CPE), *args], home=home)


def work_add(repo: Path, title: str, body: str) -> None:
    added = cpe_command(repo.parent, "work", "add", title, "--body", body, "--repo", str(repo))
    assert added.returncode == 0, added.stderr


def stop(process: subprocess.Popen[str], signum: int = signal.SIGTERM) -> int:
    process.send_signal(signum)
    return process.wait(120)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@contextlib.contextmanager
def serving(
    home: Path, processes: list[subprocess.Popen[str]], *args: str
) -> Iterator[tuple[subprocess.Popen[str], Reader]]:
    """``cpe scripted-model serve ARGS`` running, its banner printed."""
    server = subprocess.Popen(
        [str(CPE), "scripted-model", "serve", *args],
        cwd=home,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes.append(server)
    assert server.stdout is not None
    out = Reader(server.stdout)
    assert out.wait_for("Ctrl-C stops it", 60), out.text
    yield server, out


def exported(banner: str) -> dict[str, str]:
    """The variables of the banner's ``export`` line, as a shell would set them."""
    [line] = [line for line in banner.splitlines() if line.startswith("  export ")]
    return dict(word.split("=", 1) for word in shlex.split(line)[1:])


def test_cpe_run_with_the_printed_exports_brings_an_item_to_done_with_the_file_it_names(
    tmp_path: Path, home: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    work_add(repo, "Add a greeting", NAMED)
    with serving(home, processes) as (server, out), (home / "cpe.log").open("a") as log:
        url = re.search(r" on (http://127\.0\.0\.1:\d+)$", out.lines[0])
        assert url is not None, out.lines[0]
        env = exported(out.text)
        assert env == {
            "ANTHROPIC_BASE_URL": url.group(1),
            "ANTHROPIC_API_KEY": "scripted-model",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        run = start_cpe(repo, home, log, env)
        processes.append(run)
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 300)
        assert stop(run) == 0
        assert done, (home / "cpe.log").read_text()[-3000:]
        assert stop(server) == 0
    assert git_raw(repo, "show", "main:GREETING.md") == (
        "Hello from the scripted model.\n\nA second paragraph.\n"
    )
    # each request it answered, with the role and the scenario that played it
    assert re.search(r"  implementor +write_the_named_file turn 2 → text, tool_use:Write", out.text)
    assert re.search(r"  reviewer +approve turn 1 → tool_use:StructuredOutput", out.text)
    runs = agent_runs(repo)
    assert {run.role for run in runs} == {"implementor", "reviewer"}
    assert [run.cost_usd for run in runs] == [0.0, 0.0]  # the answers reported no tokens


def test_cpe_run_scripted_needs_no_model_account_and_its_runs_cost_nothing(
    tmp_path: Path, home: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    work_add(repo, "Say hello", "Greet the people who read this repository.")
    with (home / "cpe.log").open("a") as log:
        # no ANTHROPIC_API_KEY, no login in HOME: the scripted model needs none
        run = start_cpe(repo, home, log, {}, ["--scripted"], without=["ANTHROPIC_API_KEY"])
        processes.append(run)
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 300)
        assert stop(run) == 0
    said = (home / "cpe.log").read_text()
    assert done, said[-3000:]
    assert "every agent talks to the scripted model on http://127.0.0.1:" in said
    # the shipped book writes an item that names no file down in notes/work-item-<id>.md
    assert git_raw(repo, "show", "main:notes/work-item-1.md") == (
        "# Say hello\n\nGreet the people who read this repository.\n"
    )
    costs = cpe_command(home, "costs", "--by", "role", "--repo", str(repo))
    assert costs.returncode == 0, costs.stderr
    assert costs.stdout.splitlines()[-1].split() == ["total", "2", "0.0000", "0"]


def test_cpe_run_scripted_points_a_codex_role_at_the_same_book(
    tmp_path: Path, home: Path, processes: list[subprocess.Popen[str]]
) -> None:
    roles = '[runtime.roles]\nimplementor = "codex-cli"\n'
    repo = make_cpe_repo(tmp_path / "repo", extra=roles)
    work_add(repo, "Add hello", "file: hello.txt\nhi")
    path = f"{real_codex().parent}{os.pathsep}{os.environ['PATH']}"
    with (home / "cpe.log").open("a") as log:
        run = start_cpe(
            repo,
            home,
            log,
            {"PATH": path},
            ["--scripted"],
            without=["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
        )
        processes.append(run)
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 300)
        assert stop(run) == 0
    assert done, (home / "cpe.log").read_text()[-3000:]
    assert git_raw(repo, "show", "main:hello.txt") == "hi\n"
    implementor = next(run for run in agent_runs(repo) if run.role == "implementor")
    assert not implementor.cost_usd  # no tokens: $0, or unknown for codex's unpriced default


def imported_modules(log: str) -> set[str]:
    """The modules a process run with ``PYTHONPROFILEIMPORTTIME=1`` imported, from its stderr
    (``import time: self | cumulative | name``, the name indented by its depth)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in log.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_a_codex_only_run_never_imports_the_claude_agent_sdk(
    tmp_path: Path, home: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """Every role on codex-cli: the run does its work and imports nothing of the Claude vendor's
    SDK (issue 36: no vendor leans on another)."""
    roles = "[runtime.roles]\n" + "".join(
        f'{role} = "codex-cli"\n' for role in ("planner", "implementor", "reviewer")
    )
    repo = make_cpe_repo(tmp_path / "repo", extra=roles)
    work_add(repo, "Add hello", "file: hello.txt\nhi")
    path = f"{real_codex().parent}{os.pathsep}{os.environ['PATH']}"
    with (home / "cpe.log").open("a") as log:
        run = start_cpe(
            repo,
            home,
            log,
            {"PATH": path, "PYTHONPROFILEIMPORTTIME": "1"},
            ["--scripted"],
            without=["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
        )
        processes.append(run)
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 300)
        assert stop(run) == 0
    said = (home / "cpe.log").read_text()
    assert done, said[-3000:]
    assert git_raw(repo, "show", "main:hello.txt") == "hi\n"
    modules = imported_modules(said)
    assert "adapters.runtime.codex.runner" in modules  # the import log is read right
    assert not {m for m in modules if m.split(".")[0] == "claude_agent_sdk"}
    assert "adapters.runtime.claude.sdk" not in modules


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_signal_ends_serve_with_exit_0_and_no_traceback(
    home: Path, processes: list[subprocess.Popen[str]], signum: int
) -> None:
    with serving(home, processes, "--listen", "127.0.0.1:0") as (server, out):
        assert stop(server, signum) == 0
        out.join()
        assert server.stderr is not None
        assert server.stderr.read() == ""
    assert out.lines[-1] == "cpe scripted-model: stopped after 0 request(s)"


def test_serve_on_an_address_in_use_says_so_exit_78(home: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        result = cpe_command(home, "scripted-model", "serve", "--listen", taken)
    assert result.returncode == 78
    assert result.stderr == f"cpe: --listen {taken}: cannot listen there: Address already in use\n"
    assert result.stdout == ""
