"""The runtimes' typed common part (adapters/runtime/settings.py) and what a remote run ships:
the same settings come out of a trip through JSON, and a field one side does not know is an
error on the other, never a setting silently dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.bash_guard.config import BashGuardConfig
from adapters.runtime.pricing import ModelPrice
from adapters.runtime.remote.node import Shipment, _build
from adapters.runtime.runners.runtime import CliRuntimeConfig
from adapters.runtime.sandbox.config import SandboxConfig
from adapters.runtime.settings import RuntimeCommon, RuntimeContext, runtime_config
from adapters.runtime.workspace.agents import AgentSpec
from adapters.runtime.workspace.provision import Provisioner
from domain.models import PlannerStartParams, SessionId
from tests.adapters.runtime.driving import provider_deps


def common(**changes: Any) -> RuntimeCommon:
    """A common part with no field at its usual value: a field lost on the way shows."""
    fields: dict[str, Any] = {
        "max_agent_duration": 1234.0,
        "max_budget_usd": 2.5,
        "repeat_limit": 7,
        "unchanged_limit": 40,
        "agent_sessions": False,
        "context_paths": ("docs/CONTEXT.md", "AGENTS.md"),
        "setup_command": "make setup",
        "setup_timeout": 120.0,
        "hooks": {"before_run": ("make lint", 30.0), "after_run": ("", 600.0)},
        "agent_env": {"PIP_INDEX_URL": "https://mirror.example/simple"},
        "isolated_home": True,
        "bash_guard": BashGuardConfig(deny_commands=("terraform",)),
        "prices": {"m-1": ModelPrice(input=1.0, cached_input=0.1, output=4.0)},
        "sandbox": SandboxConfig(required=False, registries=("pypi.example.org",)),
        "models": {"planner": "opus"},
        "idle_timeout": 90.0,
        "codex_overrides": ('model_provider="scripted"',),
    }
    return RuntimeCommon(**{**fields, **changes})


def through_json(data: Any) -> Any:
    return json.loads(json.dumps(data))


def test_the_common_part_comes_back_from_json_as_it_went() -> None:
    sent = common()
    assert RuntimeCommon.model_validate(through_json(sent.model_dump(mode="json"))) == sent


def test_a_shipment_comes_back_from_json_as_it_went() -> None:
    sent = Shipment(
        kind="codex-cli",
        section="codex_cli",
        runtime={"cli_path": "codex", "model": "gpt-5"},
        common=common(),
    )
    assert Shipment.model_validate(through_json(sent.model_dump(mode="json"))) == sent


@pytest.mark.parametrize(("old", "new"), [("repeat_limit", "repeat_limits"), ("hooks", "hook")])
def test_a_renamed_field_is_refused_by_the_other_side(old: str, new: str) -> None:
    data = through_json(common().model_dump(mode="json"))
    data[new] = data.pop(old)
    with pytest.raises(ValidationError) as raised:
        RuntimeCommon.model_validate(data)
    problems = {(error["type"], error["loc"]) for error in raised.value.errors()}
    assert problems == {("extra_forbidden", (new,)), ("missing", (old,))}


def test_an_unknown_field_in_a_shipment_fails_the_node_build_naming_it(tmp_path: Path) -> None:
    shipment = through_json(
        Shipment(kind="claude-sdk", section=None, runtime={}, common=common()).model_dump(
            mode="json"
        )
    )
    shipment["common"]["sandbox_settings"] = {}
    payload = {"shipment": shipment, "prompt": "p", "spec": {}}
    with pytest.raises(ValidationError, match="sandbox_settings"):
        _build(tmp_path, payload)


def test_a_runtime_config_takes_every_common_setting() -> None:
    """What a runtime's config holds of the common part is the common part's, field for field
    (``models``, ``idle_timeout`` and ``codex_overrides`` are each kind's to use, in build())."""
    sent = common()
    context = RuntimeContext(
        sent,
        repo_root="/repo",
        default_branch="main",
        logs_dir="/state/runs",
        sandbox=None,
        sandbox_missing="[sandbox] required = false",
    )
    config = runtime_config(CliRuntimeConfig, context, model="gpt-5")
    kept = set(RuntimeCommon.model_fields) - {
        "agent_sessions",
        "sandbox",
        "models",
        "idle_timeout",
        "codex_overrides",
    }
    assert {name: getattr(config, name) for name in kept} == {
        name: getattr(sent, name) for name in kept
    }
    assert config.logging.agent_sessions is False
    assert config.logging.logs_dir == "/state/runs"
    assert (config.repo_root, config.default_branch) == ("/repo", "main")
    assert (config.sandbox, config.sandbox_missing) == (None, "[sandbox] required = false")
    assert config.model == "gpt-5"
    assert config.assembled is None


def test_a_provisioner_built_with_an_assembled_prompt_uses_it(tmp_path: Path) -> None:
    """A remote run's node: the head's prompt and agent definition, not its own reading."""
    spec = AgentSpec(role="planner", description="plans", prompt="You plan.")
    provisioner = Provisioner(
        repo_root=tmp_path,
        default_branch="main",
        setup_command="",
        setup_timeout=1,
        context_paths=(),
        deps=provider_deps(),
        assembled=("the head's prompt", spec),
    )
    params = PlannerStartParams(session_id=SessionId("planner-1"), spec_paths=("specs/a.md",))
    assert provisioner.prompt(params) == "the head's prompt"
    assert provisioner.spec("planner") is spec
