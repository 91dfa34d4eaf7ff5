"""cpe init, cpe status, the runtimes a config builds and the systemd notify protocol."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
from pathlib import Path

import pytest

from actors.engine import CHILDREN_STOP_BUDGET, DRAIN_GRACE
from adapters.cli.build import build_app
from adapters.cli.init import init
from adapters.cli.services import dashboard_settings, follow_reloads
from adapters.cli.settings import CpeConfig
from adapters.cli.status import status
from adapters.cli.work import work_add
from adapters.dashboard.source import Source
from adapters.host.control import Control, ControlSettings
from adapters.host.notify import notify
from adapters.runtime.claude.sdk import ClaudeAdapter
from adapters.runtime.cli.cli_runtime import CliRuntime
from adapters.runtime.codex.runner import CodexCliRunner
from adapters.runtime.process.launcher import kill_tree
from domain.errors import ConfigError
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.fakes.codex_cli_fixture import FakeCodex
from tests.real_clis import WITHOUT_BWRAP, codex_path
from tests.support.git import make_repo

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # model keys, so that build_app gets past its preflight (no test reaches a model)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-sent")
    return make_repo(tmp_path / "repo", {".gitignore": "build/\n", "README.md": "x\n"})


def test_init_writes_the_defaults_once_and_keeps_what_exists(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "CLAUDE.md").write_text("ours\n")
    assert init(repo) == 0
    assert (repo / "supervisor.toml").read_text() == (ROOT / "supervisor.toml").read_text()
    assert (repo / ".claude" / "agents" / "implementor.md").exists()
    assert (repo / ".claude" / "CLAUDE.md").read_text() == "ours\n"
    assert (repo / ".gitignore").read_text().splitlines()[0] == "build/"
    assert {".worktrees/", ".cpe/"} <= set((repo / ".gitignore").read_text().splitlines())
    capsys.readouterr()
    assert init(repo) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_init_refuses_a_directory_that_is_not_a_repository(tmp_path: Path) -> None:
    assert init(tmp_path) == 78


def test_status_shows_work_items_and_runs(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    init(repo)
    assert work_add("Add a greeting", "greet(name)", None, repo) == 0
    capsys.readouterr()
    assert status(None, repo) == 0
    out = capsys.readouterr().out
    assert "#1" in out
    assert "pending" in out
    assert "Add a greeting" in out
    assert "agent runs" in out


def test_status_says_when_there_is_no_default_branch(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    assert status(None, tmp_path) == 78


def test_notify_sends_one_datagram_to_the_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        assert notify("READY=1", {"NOTIFY_SOCKET": str(path)}) is True
        assert server.recv(100) == b"READY=1"


def test_notify_without_a_socket_does_nothing() -> None:
    assert notify("READY=1", {}) is False


def test_the_unit_restarts_on_failure_but_not_on_a_config_error() -> None:
    unit = (ROOT / "deploy" / "cpe.service").read_text()
    for line in (
        "Type=notify",
        "Restart=on-failure",
        "RestartPreventExitStatus=78",
        "KillMode=mixed",
    ):
        assert line in unit
    stop = int(unit.split("TimeoutStopSec=")[1].split()[0])
    # A stop takes the shutdown timeout (cancelled runs reporting, then the drain) plus the
    # drain's own grace, a child that will not stop, and an agent's SIGTERM-to-SIGKILL grace:
    # systemd must not SIGKILL cpe before that.
    defaults = CpeConfig()
    longest = (
        defaults.engine.shutdown_timeout
        + DRAIN_GRACE
        + 2 * CHILDREN_STOP_BUDGET  # steps 4 (the pollers) and 6 (every other actor)
        + inspect.signature(kill_tree).parameters["grace"].default
    )
    assert stop > longest


def test_a_reload_reaches_the_control_socket_and_the_dashboard(repo: Path) -> None:
    """SIGHUP's new caps and breaker are what a person's requests are judged by and what the
    dashboard shows, not only what the engine dispatches by."""
    config = repo / "supervisor.toml"
    config.write_text("[provider.local]\npipeline_command = []\n")
    app = build_app(None, repo)
    settings = ControlSettings(app.config.breaker, app.config.workflow.max_concurrent)
    control = Control(app.engine, settings)
    source = Source(app.engine, dashboard_settings(app.config), app.state_dir, control=control)
    try:
        follow_reloads(app, control)
        follow_reloads(app, source)
        before = app.config.workflow.max_concurrent["implementor"]
        config.write_text(
            "[provider.local]\npipeline_command = []\n"
            f"[workflow.max_concurrent]\nimplementor = {before + 2}\n"
            "[breaker]\npause_initial = 77\n"
        )
        app.reload()
        assert control.settings.max_concurrent["implementor"] == before + 2
        assert control.settings.breaker.pause_initial == 77
        assert source.settings.workflow.max_concurrent["implementor"] == before + 2
        assert source.settings.breaker.pause_initial == 77
    finally:
        source.close()
        app.close()


def test_each_role_runs_on_the_runtime_the_config_names(repo: Path) -> None:
    (repo / "supervisor.toml").write_text(
        '[provider.local]\npipeline_command = []\n[runtime.roles]\nreviewer = "claude-cli"\n'
    )
    app = build_app(None, repo)
    try:
        adapters = app.engine.runtime_adapters
        assert isinstance(adapters["planner"], ClaudeAdapter)
        assert adapters["planner"] is adapters["implementor"]
        assert isinstance(adapters["reviewer"], CliRuntime)
    finally:
        app.close()


def test_a_role_can_run_on_codex_with_its_own_settings(repo: Path, tmp_path: Path) -> None:
    """Teams mix agents: here the implementor runs on codex, the others on the claude SDK."""
    fake = FakeCodex.install(tmp_path / "fake")
    (repo / "supervisor.toml").write_text(
        "[provider.local]\npipeline_command = []\n"
        '[runtime.roles]\nimplementor = "codex-cli"\n'
        f'[runtime.codex_cli]\ncli_path = "{fake.path}"\nmodel = "gpt-5"\n'
        "overrides = ['model_reasoning_effort=\"high\"']\nidle_timeout = 300\n"
    )
    app = build_app(None, repo, codex_overrides=['model_provider="scripted"'])
    try:
        adapters = app.engine.runtime_adapters
        assert isinstance(adapters["planner"], ClaudeAdapter)
        codex = adapters["implementor"]
        assert isinstance(codex, CliRuntime)
        assert isinstance(codex.runner, CodexCliRunner)
        assert codex.runner.cli_path == str(fake.path)
        assert codex.runner.overrides == (
            'model_reasoning_effort="high"',
            'model_provider="scripted"',
        )
        assert codex.config.model == "gpt-5"
        assert codex.config.idle_timeout == 300
    finally:
        app.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('cli_path = "/nonexistent/codex"', r"runtime\.codex_cli\.cli_path: the codex CLI was not"),
        ('model = "gpt-9"', r"runtime\.codex_cli\.model: 'gpt-9' is not in"),
        ('sandbox = "danger-full-access"', r"runtime\.codex_cli\.sandbox: danger-full-access"),
        ('overrides = ["no-equals"]', r"runtime\.codex_cli\.overrides: 'no-equals'"),
        ('sandbox = "yolo"', r"runtime\.codex_cli\.sandbox"),
    ],
)
def test_a_codex_setting_that_cannot_work_is_a_configuration_error_naming_the_key(
    repo: Path, tmp_path: Path, settings: str, message: str
) -> None:
    fake = FakeCodex.install(tmp_path / "fake")
    path = "" if settings.startswith("cli_path") else f'cli_path = "{fake.path}"\n'
    (repo / "supervisor.toml").write_text(
        f'[runtime.roles]\nreviewer = "codex-cli"\n[runtime.codex_cli]\n{path}{settings}\n'
    )
    with pytest.raises(ConfigError, match=message):
        build_app(None, repo)


def test_a_claude_cli_model_it_does_not_offer_is_a_configuration_error(repo: Path) -> None:
    (repo / "supervisor.toml").write_text(
        '[runtime.roles]\nplanner = "claude-cli"\n[runtime.claude_cli]\nmodel = "gpt-5"\n'
    )
    with pytest.raises(ConfigError, match=r"runtime\.claude_cli\.model: 'gpt-5'"):
        build_app(None, repo)


# ---------------------------------------------------------------------------- cpe init, as a user


def snapshot(repo: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(repo)): path.read_bytes()
        for path in sorted(repo.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(repo).parts
    }


def test_cpe_init_sets_up_a_fresh_repository_then_writes_nothing(tmp_path: Path) -> None:
    fresh = make_repo(tmp_path / "fresh", {"README.md": "x\n"})
    first = cpe("init", cwd=fresh)
    assert first.returncode == 0, first.stderr
    agents = [f".claude/agents/{role}.md" for role in ("planner", "implementor", "reviewer")]
    for path in ["supervisor.toml", ".claude/CLAUDE.md", *agents, ".gitignore"]:
        assert f"wrote {path}\n" in first.stdout
        assert (fresh / path).read_text().strip(), path
    toml = (fresh / "supervisor.toml").read_text()
    assert toml == (ROOT / "supervisor.toml").read_text()
    assert toml.startswith("# supervisor.toml")  # the commented default
    assert {".worktrees/", ".cpe/"} <= set((fresh / ".gitignore").read_text().splitlines())
    # what to do next: commit what it wrote, credentials, a work item, run
    steps = first.stdout.split("next steps:", 1)[1]
    assert "git add supervisor.toml .claude .gitignore && git commit" in steps
    for needle in ("ANTHROPIC_API_KEY", "cpe work add", "cpe run"):
        assert needle in steps
    assert "budgets ([budget] in supervisor.toml; 0 is none): $5 a run, $25 a work item" in steps
    before = snapshot(fresh)
    second = cpe("init", cwd=fresh)
    assert second.returncode == 0
    assert second.stdout.startswith("nothing to do: the repository is already set up\n")
    assert snapshot(fresh) == before


def test_cpe_init_ignores_the_state_dir_an_existing_config_names(tmp_path: Path) -> None:
    config = '[engine]\nstate_dir = "var/cpe-state"\n'
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": config, ".gitignore": "build\n"})
    result = cpe("init", "--repo", str(repo), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (repo / "supervisor.toml").read_text() == config  # kept as it was
    lines = (repo / ".gitignore").read_text().splitlines()
    assert lines[0] == "build"
    assert "var/cpe-state/" in lines
    assert ".worktrees/" in lines
    assert ".cpe/" not in lines


def test_cpe_init_refuses_a_state_dir_outside_the_repository_and_writes_nothing(
    tmp_path: Path,
) -> None:
    config = f'[engine]\nstate_dir = "{tmp_path / "state"}"\n'
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": config})
    before = snapshot(repo)
    line = one_line_error(cpe("init", cwd=repo))
    assert "engine.state_dir: expected a directory inside the repository" in line
    assert snapshot(repo) == before


def test_cpe_init_from_a_subdirectory_sets_up_the_repository_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"src/app.py": ""})
    result = cpe("init", cwd=repo / "src")
    assert result.returncode == 0, result.stderr
    assert (repo / "supervisor.toml").exists()
    assert not (repo / "src" / "supervisor.toml").exists()


def test_cpe_init_with_a_bad_config_names_it_and_writes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": "[engine]\nstate_dri = 'x'\n"})
    before = snapshot(repo)
    line = one_line_error(cpe("init", cwd=repo))
    assert f"{repo / 'supervisor.toml'}: engine.state_dri: unknown key; expected one of" in line
    assert snapshot(repo) == before


def test_with_the_sandbox_not_required_agents_run_without_it_and_their_runs_say_why(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", codex_path(WITHOUT_BWRAP, os.environ["PATH"], tmp_path / "bin"))
    (repo / "supervisor.toml").write_text(
        "[provider.local]\npipeline_command = []\n[sandbox]\nrequired = false\n"
    )
    app = build_app(None, repo)
    try:
        adapter = app.engine.runtime_adapters["implementor"]
        assert isinstance(adapter, ClaudeAdapter)
        assert adapter.config.sandbox is None
        assert adapter.config.sandbox_missing.startswith("[sandbox] required = false, and ")
        assert "bubblewrap (bwrap) is not installed" in adapter.config.sandbox_missing
    finally:
        app.close()


def test_with_bubblewrap_every_runtime_gets_the_sandbox(repo: Path) -> None:
    (repo / "supervisor.toml").write_text(
        '[provider.local]\npipeline_command = []\n[runtime.roles]\nreviewer = "claude-cli"\n'
    )
    app = build_app(None, repo)
    try:
        adapters = app.engine.runtime_adapters
        sdk, cli = adapters["implementor"], adapters["reviewer"]
        assert isinstance(sdk, ClaudeAdapter)
        assert isinstance(cli, CliRuntime)
        assert sdk.config.sandbox is not None
        assert cli.config.sandbox == sdk.config.sandbox
    finally:
        app.close()


def test_allow_install_starts_cpes_registry_proxy_for_the_runs_and_close_stops_it(
    repo: Path,
) -> None:
    (repo / "supervisor.toml").write_text(
        "[provider.local]\npipeline_command = []\n"
        '[sandbox]\nallow_install = true\nregistries = ["pypi.org"]\n'
    )
    app = build_app(None, repo)
    try:
        adapter = app.engine.runtime_adapters["implementor"]
        assert isinstance(adapter, ClaudeAdapter)
        sandbox = adapter.config.sandbox
        assert sandbox is not None
        assert sandbox.network == "registries"
        assert sandbox.registries == ("pypi.org",)
        assert sandbox.proxy_socket is not None
        assert Path(sandbox.proxy_socket).is_socket()
    finally:
        app.close()
    assert not Path(sandbox.proxy_socket).exists()
