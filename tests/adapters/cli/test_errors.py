"""Each configuration mistake a user can make, from the command line: exit 78 (systemd does not
restart it) and ONE line on stderr naming what was wrong and what was expected."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from actors.journal_file import InstanceLock
from tests.adapters.cli.test_cli import ROOT, cpe, one_line_error
from tests.real_clis import WITHOUT_BWRAP, codex_path
from tests.support.git import make_repo
from tests.support.journal import journal_with_one_bad_row

# The dashboard on a free port: the default one may be another cpe's on this machine (then a
# warning says it moved, a line these one-line tests do not expect).
GOOD = '[provider.local]\npipeline_command = []\n[dashboard]\nlisten = "127.0.0.1:0"\n'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "x\n"})


def write_config(repo: Path, text: str) -> Path:
    path = repo / "supervisor.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- the repository


@pytest.mark.parametrize("command", ["run", "init", "status"])
def test_a_directory_that_is_not_a_repository_is_named_with_what_is_expected(
    tmp_path: Path, command: str
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    # git must not find a repository above tmp_path either
    result = cpe(command, cwd=plain, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    line = one_line_error(result)
    assert f"{plain}: not a git repository" in line
    assert "expected a git repository (git init)" in line


@pytest.mark.parametrize("command", ["run", "init"])
def test_a_repository_git_refuses_as_another_users_says_why_and_how_to_allow_it(
    tmp_path: Path, command: str
) -> None:
    """A tarball unpacked as root, a checkout mounted into a container: git refuses a
    repository another user owns, which cpe said was no repository at all. (Git's own test
    switch makes it see another owner, whoever runs the test.)"""
    repo = make_repo(tmp_path / "theirs")
    result = cpe(command, cwd=repo, env={"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"})
    line = one_line_error(result)
    assert f"{repo}: git refuses this repository: it belongs to another user" in line
    assert f"git config --global --add safe.directory {repo}" in line
    assert "not a git repository" not in line


def test_a_repo_option_naming_no_directory_says_so(tmp_path: Path) -> None:
    line = one_line_error(cpe("status", "--repo", str(tmp_path / "missing"), cwd=tmp_path))
    assert f"{tmp_path / 'missing'}: no such directory" in line
    assert "expected a git repository" in line


@pytest.mark.parametrize("command", ["run", "status"])
def test_a_repository_without_commits_has_no_default_branch(tmp_path: Path, command: str) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    line = one_line_error(cpe(command, cwd=tmp_path))
    assert "no default branch" in line
    assert "expected a first commit" in line


def test_a_configured_default_branch_that_does_not_exist_is_named(repo: Path) -> None:
    write_config(repo, GOOD + '[repository]\ndefault_branch = "trunk"\n')
    line = one_line_error(cpe("run", cwd=repo))
    assert "no default branch: 'trunk' (repository.default_branch)" in line
    assert "expected a first commit on it, or repository.default_branch naming a branch" in line


# ---------------------------------------------------------------------------- the provider


@pytest.mark.parametrize(
    ("token_line", "variable"),
    [("", "GITHUB_TOKEN"), ('token_env = "CPE_TEST_TOKEN"\n', "CPE_TEST_TOKEN")],
)
def test_a_missing_github_token_names_the_variable(
    repo: Path, token_line: str, variable: str
) -> None:
    write_config(
        repo, f'[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"\n{token_line}'
    )
    line = one_line_error(cpe("run", cwd=repo))  # the clean environment has no token
    assert f"provider.github.token_env: the environment variable {variable} is not set" in line
    assert "expected a GitHub token in that variable" in line


def test_a_github_setting_the_provider_does_not_know_lists_the_known_ones(repo: Path) -> None:
    write_config(
        repo, '[provider]\nkind = "github"\n[provider.github]\nrepository = "o/r"\nbase_ulr = "x"\n'
    )
    line = one_line_error(cpe("run", cwd=repo, env={"GITHUB_TOKEN": "not-used"}))
    assert "provider.github.base_ulr: unknown key; expected one of" in line
    assert "base_url" in line


# ---------------------------------------------------------------------------- supervisor.toml


def test_an_unknown_runtime_names_the_role_and_the_runtimes_there_are(repo: Path) -> None:
    write_config(repo, GOOD + '[runtime.roles]\nimplementor = "nope"\n')
    line = one_line_error(cpe("run", cwd=repo))
    assert "runtime.roles.implementor: expected 'claude-sdk', 'claude-cli' or 'codex-cli'" in line
    assert "(got 'nope')" in line


@pytest.mark.parametrize(
    ("toml", "fragments"),
    [
        pytest.param(
            '[engine]\nshutdown_timeout = "soon"\n',
            ["engine.shutdown_timeout: expected a valid number", "(got 'soon')"],
            id="wrong-type",
        ),
        pytest.param(
            "[engine]\nshutdwn_timeout = 3\n",
            ["engine.shutdwn_timeout: unknown key; expected one of", "shutdown_timeout"],
            id="unknown-key",
        ),
        pytest.param(
            "[engin]\nlog_level = 'info'\n",
            ["engin: unknown key; expected one of", "engine, logging"],
            id="unknown-section",
        ),
        pytest.param(
            "[workflow.max_concurrent]\nimplementer = 2\n",
            ["workflow.max_concurrent.implementer: expected 'planner', 'implementor' or"],
            id="unknown-role-key",
        ),
        pytest.param(
            "[engine\nlog_level = 'info'\n",
            ["not valid TOML", "line 1", "expected TOML syntax"],
            id="toml-syntax",
        ),
    ],
)
@pytest.mark.parametrize("command", ["run", "status"])
def test_a_bad_supervisor_toml_names_the_file_the_key_path_and_what_was_expected(
    repo: Path, command: str, toml: str, fragments: list[str]
) -> None:
    """cpe run stops on it (exit 78); cpe status, read-only, says it in one line on stderr and
    shows the state with the default settings (a file being edited must not hide it)."""
    path = write_config(repo, toml)
    result = cpe(command, cwd=repo)
    if command == "run":
        line = one_line_error(result)
    else:
        assert result.returncode == 0, result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith("cpe: warning: configuration error: ")
        assert line.endswith(f"shown with the default settings (state in {repo / '.cpe'})")
        assert result.stdout.startswith("engine not running (never started on this state)")
    assert f"configuration error: {path}: " in line
    for fragment in fragments:
        assert fragment in line


def test_a_bad_bash_guard_key_stops_run_with_the_keys_there_are(repo: Path) -> None:
    """[bash_guard] is checked when the agents' runtime is built (run), as one line too."""
    write_config(repo, GOOD + '[bash_guard]\ndeny_comands = ["make deploy"]\n')
    line = one_line_error(cpe("run", cwd=repo))
    assert "bash_guard.deny_comands: unknown key; expected one of" in line
    assert "deny_commands" in line


def test_a_config_that_is_not_a_file_is_one_line_not_a_traceback(
    repo: Path, tmp_path: Path
) -> None:
    line = one_line_error(cpe("run", "--config", str(tmp_path), cwd=repo))
    assert f"{tmp_path}: cannot read it" in line
    assert "expected a readable file" in line


def test_a_config_that_is_not_text_is_one_line_not_a_traceback(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe[engine]\n")
    line = one_line_error(cpe("status", "--config", str(path), cwd=repo))
    assert f"{path}: not UTF-8 text" in line


# ---------------------------------------------------------------------------- runtime CLIs


def test_a_codex_cli_path_pointing_nowhere_is_named(repo: Path) -> None:
    write_config(
        repo,
        GOOD + '[runtime.roles]\nimplementor = "codex-cli"\n'
        '[runtime.codex_cli]\ncli_path = "/nonexistent/bin/codex"\n',
    )
    line = one_line_error(cpe("run", cwd=repo))
    assert "runtime.codex_cli.cli_path: the codex CLI was not found ('/nonexistent/bin/codex')" in (
        line
    )
    assert "expected codex on PATH" in line


def test_codex_missing_from_path_is_named(repo: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with git and nothing else: no codex on it
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    write_config(repo, GOOD + '[runtime.roles]\nreviewer = "codex-cli"\n')
    line = one_line_error(cpe("run", cwd=repo, env={"PATH": str(bin_dir)}))
    assert "runtime.codex_cli.cli_path: the codex CLI was not found ('codex')" in line
    assert "expected codex on PATH (npm install -g @openai/codex) or its path" in line


def test_a_claude_cli_path_pointing_nowhere_is_named(repo: Path) -> None:
    write_config(
        repo,
        GOOD + '[runtime.roles]\nplanner = "claude-cli"\n'
        '[runtime.claude_cli]\ncli_path = "/nonexistent/bin/claude"\n',
    )
    line = one_line_error(cpe("run", cwd=repo))
    assert (
        "runtime.claude_cli.cli_path: the claude CLI was not found at '/nonexistent/bin/claude'"
        in (line)
    )
    assert "expected an executable claude, or empty for the bundled one" in line


def test_a_claude_cli_path_that_is_not_executable_is_named(repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\n")  # there, but not executable
    write_config(
        repo,
        f'{GOOD}[runtime.roles]\nreviewer = "claude-cli"\n'
        f'[runtime.claude_cli]\ncli_path = "{script}"\n',
    )
    line = one_line_error(cpe("run", cwd=repo))
    assert f"runtime.claude_cli.cli_path: the claude CLI was not found at '{script}'" in line


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            'echo "1.0.44 (Claude Code)"\n',
            "claude 1.0.44 at {path} is older than runtime claude-cli",
        ),
        ('echo "Segmentation fault" >&2; exit 139\n', "exited 139 and said 'Segmentation fault'"),
        ("echo hello\n", "exited 0 and said 'hello'"),
    ],
    ids=["too old", "crashes", "no version"],
)
def test_a_claude_cli_too_old_or_broken_is_refused_before_any_run(
    repo: Path, tmp_path: Path, body: str, said: str
) -> None:
    """Checked at start, as the credentials are: a CLI that lacks what cpe passes it, or that
    cannot even say its version, would fail every run."""
    script = _script(tmp_path / "claude", body)
    write_config(
        repo,
        f'{GOOD}[runtime.roles]\nreviewer = "claude-cli"\n'
        f'[runtime.claude_cli]\ncli_path = "{script}"\n',
    )
    line = one_line_error(cpe("run", cwd=repo))
    assert line.startswith("cpe: configuration error: runtime.claude_cli.cli_path: ")
    assert said.format(path=script) in line
    assert "expected claude 2.1.0 or newer (npm install -g @anthropic-ai/claude-code" in line


def test_a_codex_cli_too_old_is_refused_with_its_version(repo: Path, tmp_path: Path) -> None:
    script = _script(tmp_path / "codex", 'echo "codex-cli 0.41.0"\n')
    write_config(
        repo,
        GOOD + '[runtime.roles]\nimplementor = "codex-cli"\n'
        f'[runtime.codex_cli]\ncli_path = "{script}"\n',
    )
    line = one_line_error(cpe("run", cwd=repo))
    assert (
        f"runtime.codex_cli.cli_path: codex 0.41.0 at {script} is older than runtime codex-cli"
        in line
    )
    assert "expected codex 0.169.0 or newer (npm install -g @openai/codex)" in line


# The real claude-agent-sdk, seen from a directory that lacks its bundled CLI: the same package
# (its code runs from its own directory), as if installed without the CLI.
SDK_WITHOUT_CLI = """\
import pathlib
_real = pathlib.Path({real!r})
__path__.append(str(_real))
exec(compile((_real / "__init__.py").read_text(), str(_real / "__init__.py"), "exec"))
"""


def test_a_missing_bundled_claude_cli_is_named(repo: Path, tmp_path: Path) -> None:
    spec = importlib.util.find_spec("claude_agent_sdk")  # where it is, without importing it
    assert spec is not None
    assert spec.origin is not None
    real = Path(spec.origin).parent
    shadow = tmp_path / "shadow" / "claude_agent_sdk"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(SDK_WITHOUT_CLI.format(real=str(real)))
    write_config(repo, GOOD)  # every role on claude-sdk, the default
    result = cpe("run", cwd=repo, env={"PYTHONPATH": f"{shadow.parent}:{ROOT}"})
    line = one_line_error(result)
    assert (
        f"runtime claude-sdk: the claude CLI was not found at {shadow / '_bundled' / 'claude'}"
        in line
    )
    assert "expected claude-agent-sdk installed with its bundled CLI" in line


# ---------------------------------------------------------------------------- --config PATH


def test_run_reads_the_config_given_with_config_not_the_repositorys(
    repo: Path, tmp_path: Path
) -> None:
    """The repository's own supervisor.toml is fine; the one passed with --config, outside the
    repository, is what run uses (and so what it reports)."""
    write_config(repo, GOOD)
    outside = tmp_path / "etc" / "supervisor.toml"
    outside.parent.mkdir()
    outside.write_text("[workflow]\nmax_attempts = 0\n")
    line = one_line_error(cpe("run", "--config", str(outside), "--repo", str(repo), cwd=tmp_path))
    assert f"{outside}: workflow.max_attempts: expected greater than or equal to 1" in line


def test_run_builds_the_runtimes_the_config_given_with_config_names(
    repo: Path, tmp_path: Path
) -> None:
    """A config outside the repository, naming the repository with [repository] path: run
    takes its runtime settings (here a codex that is not there, so it stops before starting)."""
    outside = tmp_path / "etc" / "supervisor.toml"
    outside.parent.mkdir()
    outside.write_text(
        f'[repository]\npath = "../repo"\n{GOOD}[runtime.roles]\nplanner = "codex-cli"\n'
        '[runtime.codex_cli]\ncli_path = "/from/the/outside/config/codex"\n'
    )
    line = one_line_error(cpe("run", "--config", str(outside), cwd=tmp_path))
    assert "'/from/the/outside/config/codex'" in line


def test_a_config_outside_the_repository_without_a_repository_says_how_to_name_one(
    repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "etc" / "supervisor.toml"
    outside.parent.mkdir()
    outside.write_text(GOOD)
    result = cpe(
        "status",
        "--config",
        str(outside),
        cwd=repo,
        env={"GIT_CEILING_DIRECTORIES": str(tmp_path)},
    )
    line = one_line_error(result)
    assert f"{outside.parent}: not a git repository" in line
    assert f"[repository] path in {outside}, or --repo PATH" in line


def test_a_missing_config_file_is_named(repo: Path, tmp_path: Path) -> None:
    line = one_line_error(cpe("run", "--config", str(tmp_path / "nope.toml"), cwd=repo))
    assert f"{tmp_path / 'nope.toml'}: no such file; expected a supervisor.toml" in line


# ---------------------------------------------------------------------------- the journal


@pytest.mark.parametrize(
    "command", [("run",), ("status",), ("replay",), ("runs", "show", "implementor-1")]
)
def test_a_journal_that_cannot_be_read_is_one_line_and_exit_65(
    repo: Path, command: tuple[str, ...]
) -> None:
    """A damaged journal (or one from a newer cpe) will not heal on a restart: exit 65
    (EX_DATAERR, which the systemd unit does not restart either), naming the file."""
    write_config(repo, GOOD)
    journal = repo / ".cpe" / "journal.sqlite3"
    journal.parent.mkdir()
    journal.write_bytes(b"this is not a sqlite database, " * 100)
    line = one_line_error(cpe(*command, cwd=repo), code=65)
    assert line.startswith("cpe: journal error: ")
    assert str(journal) in line


def test_a_journal_from_a_newer_cpe_is_refused_in_one_line(repo: Path) -> None:
    write_config(repo, GOOD)
    journal = repo / ".cpe" / "journal.sqlite3"
    journal.parent.mkdir()
    with sqlite3.connect(journal) as db:
        db.execute("PRAGMA user_version = 99")
    line = one_line_error(cpe("status", cwd=repo), code=65)
    assert "journal schema version 99" in line


def test_a_lock_file_that_cannot_be_opened_is_one_line_not_a_traceback(repo: Path) -> None:
    """What another user's lock file or a read-only directory does (as root, which may open any
    file, a directory where the file should be): exit 74, the path named."""
    write_config(repo, GOOD)
    lock = repo / ".cpe" / "journal.sqlite3.lock"
    lock.mkdir(parents=True)
    line = one_line_error(cpe("run", cwd=repo), code=74)
    assert f"{lock}: cannot open the lock file that keeps one engine per state directory" in line


def test_a_second_cpe_run_on_the_same_state_is_refused_naming_the_first(repo: Path) -> None:
    write_config(repo, GOOD)
    first = InstanceLock(str(repo / ".cpe" / "journal.sqlite3"))
    first.acquire()  # what a running cpe holds
    try:
        line = one_line_error(cpe("run", cwd=repo), code=65)
    finally:
        first.release()
    assert f"in use by another cpe (pid {os.getpid()})" in line
    assert "one engine per state directory" in line


def _journal_with_one_bad_row(repo: Path, body: str) -> Path:
    return journal_with_one_bad_row(repo / ".cpe" / "journal.sqlite3", body)


@pytest.mark.parametrize("command", ["run", "status", "replay"])
@pytest.mark.parametrize(
    "body",
    ['{"type": "EventFromTheFuture", "at": "2026-01-01T00:00:00Z"}', "{not json"],
    ids=["unknown type", "unparsable"],
)
def test_one_journal_row_that_cannot_be_read_is_one_line_and_exit_65(
    repo: Path, command: str, body: str
) -> None:
    write_config(repo, GOOD)
    journal = _journal_with_one_bad_row(repo, body)
    line = one_line_error(cpe(command, cwd=repo), code=65)
    assert f"{journal}: event 1 cannot be read" in line


@pytest.mark.parametrize("journal", ["missing", "empty"])
def test_a_lost_journal_beside_earlier_agent_runs_is_refused_saying_how_to_start_over(
    repo: Path, journal: str
) -> None:
    """Starting afresh would plan the specs again and forget every attempt: refuse, exit 65."""
    write_config(repo, GOOD)
    (repo / ".cpe" / "runs" / "planner-1").mkdir(parents=True)
    path = repo / ".cpe" / "journal.sqlite3"
    if journal == "empty":
        path.write_bytes(b"")
    line = one_line_error(cpe("run", cwd=repo), code=65)
    assert f"{path}: the journal is missing or empty" in line
    assert "cpe run --new-journal" in line
    assert not path.exists() or path.stat().st_size == 0  # refused without touching it


def test_a_state_directory_that_cannot_be_written_is_one_line_and_exit_74(repo: Path) -> None:
    """A file where the state directory should be (or a full or read-only disk): EX_IOERR."""
    write_config(repo, GOOD)
    (repo / ".cpe").write_text("in the way\n")
    line = one_line_error(cpe("run", cwd=repo), code=74)
    assert f"{repo / '.cpe'}: the state directory cannot be written" in line


@pytest.mark.parametrize(
    ("toml", "key", "expected"),
    [
        ("[workflow.max_concurrent]\nimplementor = 0", "workflow.max_concurrent.implementor",
         "greater than or equal to 1"),
        ("[workflow.max_concurrent]\nimplementor = -1", "workflow.max_concurrent.implementor",
         "greater than or equal to 1"),
        ("[workflow.max_concurrent]\nimplementor = 1e11", "workflow.max_concurrent.implementor",
         "less than or equal to 256"),
        ('[workflow]\nbranch_prefix = "../"', "workflow.branch_prefix", "one safe name"),
        ('[workflow]\nbranch_prefix = "-x/"', "workflow.branch_prefix", "one safe name"),
        ('[workflow]\nbranch_prefix = ".git/"', "workflow.branch_prefix", "one safe name"),
        ('[workflow]\nbranch_prefix = "x.lock/"', "workflow.branch_prefix", "one safe name"),
        ('[engine]\nstate_dir = ""', "engine.state_dir", "inside the repository"),
        ('[engine]\nstate_dir = "../x"', "engine.state_dir", "inside the repository"),
        ('[engine]\nstate_dir = "/tmp/x"', "engine.state_dir", "inside the repository"),
        ('[engine]\nstate_dir = ".git"', "engine.state_dir", "not .git"),
        ('[engine]\nstate_dir = "."', "engine.state_dir", "not .git"),
        ("[engine]\nshutdown_timeout = 1e400", "engine.shutdown_timeout", "a finite number"),
        ("[engine]\nshutdown_timeout = 1e9", "engine.shutdown_timeout", "less than or equal"),
        ("[runtime]\nmax_agent_duration = nan", "runtime.max_agent_duration", "a finite number"),
        ("[pollers]\nspecs_interval = inf", "pollers.specs_interval", "a finite number"),
    ],
)  # fmt: skip
def test_a_hostile_value_is_refused_at_start_naming_the_key_the_value_and_what_is_allowed(
    repo: Path, toml: str, key: str, expected: str
) -> None:
    write_config(repo, GOOD + toml + "\n")
    line = one_line_error(cpe("run", cwd=repo))
    assert f"{key}: expected " in line
    assert expected in line
    assert "(got " in line


# ---------------------------------------------------------------------------- pipes and the demo


def _read_one_line_then_close(*args: str, cwd: Path) -> tuple[int, str]:
    """``cpe ARGS | head -1``: the reader takes one line and goes away."""
    process = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    code = process.wait(120)
    errors = process.stderr.read().decode()
    process.stderr.close()
    return code, errors


@pytest.mark.parametrize("command", ["status", "replay"])
def test_a_reader_that_goes_away_ends_the_output_quietly_with_exit_0(
    repo: Path, command: str
) -> None:
    from actors.journal import Journal  # noqa: PLC0415
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415
    from domain.events import WorkItemChanged  # noqa: PLC0415
    from domain.models import WorkItem  # noqa: PLC0415

    write_config(repo, GOOD)
    provider = LocalProvider(repo, repo / ".cpe", "main")
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        for n in range(1, 3001):  # far more output than a pipe holds
            wid = provider.work_item_writer.create_work_item(f"item {n} " + "x" * 60, "b")
            item = WorkItem(id=wid, title=f"item {n}", status="pending")
            journal.append(WorkItemChanged(work_item=item))
        journal.mark_processed(journal.last_seq())
    finally:
        journal.close()
        provider.close()
    code, errors = _read_one_line_then_close(command, cwd=repo)
    assert (code, errors) == (0, "")


@pytest.mark.parametrize("taken", ["sample", "file"])
def test_cpe_demo_refuses_a_dir_that_is_taken_in_one_line(tmp_path: Path, taken: str) -> None:
    target = tmp_path / "demo"
    if taken == "sample":
        (target / "sample").mkdir(parents=True)
        (target / "sample" / "x").write_text("mine\n")
    else:
        target.write_text("a file\n")
    result = cpe("demo", "--dir", str(target), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.strip().startswith("cpe demo: ")
    assert "exists" in result.stdout
    assert len(result.stdout.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_no_model_credential_stops_cpe_run_at_once_with_exit_78_saying_what_to_set(
    repo: Path,
) -> None:
    """Before anything starts: no agent run, no journal."""
    write_config(repo, GOOD)
    result = cpe("run", cwd=repo, env={"ANTHROPIC_API_KEY": "", "HOME": str(repo / "home")})
    line = one_line_error(result)
    assert "runtime claude-sdk: no model credential for the claude CLI" in line
    assert "expected ANTHROPIC_API_KEY" in line
    assert not (repo / ".cpe" / "journal.sqlite3").exists()
    assert not (repo / ".cpe" / "runs").exists()


def test_a_failed_preflight_runs_no_pipeline_and_sets_no_journal_aside(repo: Path) -> None:
    """The local pipeline (the default branch's baseline) does not start, and `--new-journal`
    leaves the journal where it is, when cpe cannot run agents anyway."""
    write_config(repo, '[provider.local]\npipeline_command = ["sh", "-c", "echo RAN"]\n')
    journal = repo / ".cpe" / "journal.sqlite3"
    journal.parent.mkdir()
    journal.write_bytes(b"kept")
    env = {"ANTHROPIC_API_KEY": "", "HOME": str(repo / "home")}
    result = cpe("run", "--new-journal", cwd=repo, env=env)
    assert "no model credential" in one_line_error(result)
    assert journal.read_bytes() == b"kept"
    assert sorted(p.name for p in journal.parent.iterdir()) == ["journal.sqlite3"]
    assert "RAN" not in result.stdout + result.stderr


# ---------------------------------------------------------------------------- the sandbox


def test_without_bubblewrap_cpe_run_refuses_to_start_agents_naming_the_protection(
    repo: Path, tmp_path: Path
) -> None:
    """Before anything starts: no agent run, no journal."""
    write_config(repo, GOOD)
    path = codex_path(WITHOUT_BWRAP, "/usr/bin:/bin", tmp_path / "bin")
    line = one_line_error(cpe("run", cwd=repo, env={"PATH": path}))
    assert "sandbox: bubblewrap (bwrap) is not installed" in line
    assert "cannot be confined by the kernel" in line
    assert "[sandbox] required = false" in line
    assert not (repo / ".cpe" / "journal.sqlite3").exists()
    assert not (repo / ".cpe" / "runs").exists()


def test_a_bad_sandbox_key_stops_run_with_the_keys_there_are(repo: Path) -> None:
    write_config(repo, GOOD + '[sandbox]\nprotected_paths = ["secrets"]\n')
    line = one_line_error(cpe("run", cwd=repo))
    assert "sandbox.protected_paths: 'secrets' must be an absolute path or start with ~/" in line
