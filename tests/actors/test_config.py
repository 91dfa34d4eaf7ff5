"""supervisor.toml loading: the shipped default loads; mistakes name the key path and what was
expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.cli.settings import load_config, parse_config
from domain.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_supervisor_toml_loads_with_its_documented_defaults() -> None:
    config = load_config(ROOT / "supervisor.toml")
    assert config.provider.work_items_kind == config.provider.revisions_kind == "local"
    assert config.supervisor.strategy == "one_for_one"
    assert config.handler_options().max_concurrent["implementor"] == 2
    assert config == parse_config({})  # every value shown is the default


@pytest.mark.parametrize(
    ("toml", "fragments"),
    [
        ("[engine]\nshutdown_timout = 3\n", ["engine.shutdown_timout: unknown key"]),
        ("[workflow]\nmax_attempts = 0\n", ["workflow.max_attempts", "greater than or equal to 1"]),
        ("[supervisor]\nstrategy = 'one_for_some'\n", ["supervisor.strategy", "one_for_one"]),
        ("[runtime.roles]\nplanner = 'gpt'\n", ["runtime.roles.planner", "claude-sdk"]),
        (
            "[provider]\nkind = 'github'\n[provider.github]\n",
            ["provider.github.repository: missing"],
        ),
        ("[pollers]\nspecs_interval = 'soon'\n", ["pollers.specs_interval", "'soon'"]),
    ],
)
def test_a_mistake_names_the_key_path_and_what_was_expected(
    tmp_path: Path, toml: str, fragments: list[str]
) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert str(path) in str(caught.value)


def test_invalid_toml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text("[engine\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.toml")


def test_the_file_maps_onto_the_engine_config(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.toml"
    path.write_text(
        f"[repository]\npath = '{tmp_path}'\n[pollers]\nspecs_interval = 5\n"
        "[workflow]\nauto_merge = true\n[supervisor]\nstrategy = 'rest_for_one'\n"
    )
    config = load_config(path).engine_config(
        provider=None,  # type: ignore[arg-type]
        create_runtime_adapters=None,  # type: ignore[arg-type]
        repo_root=tmp_path,
    )
    assert config.spec_poller.poll_interval == 5
    assert config.handlers.auto_merge is True
    assert config.supervisor.strategy == "rest_for_one"
    assert config.journal_path == str(tmp_path / ".cpe" / "journal.sqlite3")


def test_home_and_variables_in_configured_paths_are_expanded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/ops")
    monkeypatch.setenv("TOOLS", "/opt/tools")
    config = parse_config(
        {
            "repository": {"path": "~/repo"},
            "runtime": {
                "context_paths": ["~/notes/CLAUDE.md", ".claude/CLAUDE.md"],
                "claude_cli": {"cli_path": "$TOOLS/claude"},
                "codex_cli": {"cli_path": "~/.local/bin/codex"},
            },
        }
    )
    assert config.repository.path == "/home/ops/repo"
    assert config.runtime.context_paths == ["/home/ops/notes/CLAUDE.md", ".claude/CLAUDE.md"]
    assert config.runtime.claude_cli.cli_path == "/opt/tools/claude"
    assert config.runtime.codex_cli.cli_path == "/home/ops/.local/bin/codex"
