"""The runtimes' typed common part (adapters/runtime/settings.py) and what a remote run ships:
the same settings come out of a trip through JSON, and a field one side does not know is an
error on the other, never a setting silently dropped."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from adapters.bash_guard.config import BashGuardConfig
from adapters.cli.settings import parse_config
from adapters.runtime.claude.settings import ClaudeCliRuntime, ClaudeSdkRuntime
from adapters.runtime.cli.cli_runtime import CliRuntimeConfig
from adapters.runtime.codex.settings import CodexCliRuntime
from adapters.runtime.common import RuntimeCommon, RuntimeContext, runtime_config
from adapters.runtime.pricing import ModelPrice
from adapters.runtime.prompt.agents import AgentSpec
from adapters.runtime.remote.node import Shipment, _build
from adapters.runtime.sandbox.config import SandboxConfig
from adapters.runtime.settings import RUNTIME_KINDS, RuntimeSettings
from adapters.runtime.workspace.provision import Provisioner
from domain.models import AGENT_ROLES, PlannerStartParams, SessionId
from tests.adapters.runtime.driving import provider_deps

ROOT = Path(__file__).resolve().parents[3]


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
    sent = Shipment(runtime=CodexCliRuntime(cli_path="codex", model="gpt-5"), common=common())
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
        Shipment(runtime=ClaudeSdkRuntime(), common=common()).model_dump(mode="json")
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


# ---------------------------------------------------------------------------- the kinds


@pytest.mark.parametrize(
    "runtime",
    [
        ClaudeSdkRuntime(),
        ClaudeCliRuntime(cli_path="/opt/claude", model="opus", idle_timeout=60),
        CodexCliRuntime(model="gpt-5", overrides=['model_reasoning_effort="high"']),
    ],
    ids=lambda runtime: runtime.kind,
)
def test_each_kind_comes_back_from_json_as_itself(runtime: BaseModel) -> None:
    sent = Shipment(runtime=runtime, common=common())
    back = Shipment.model_validate(through_json(sent.model_dump(mode="json")))
    assert back == sent
    assert type(back.runtime) is type(runtime)


def test_the_kind_picks_the_model_and_its_fields_only() -> None:
    kinds = TypeAdapter(RuntimeSettings)
    assert kinds.validate_python({"kind": "codex-cli"}) == CodexCliRuntime()
    assert kinds.validate_python({"kind": "claude-sdk"}) == ClaudeSdkRuntime()
    with pytest.raises(ValidationError, match="sandbox"):  # a codex field on claude-cli
        kinds.validate_python({"kind": "claude-cli", "sandbox": "workspace-write"})
    with pytest.raises(ValidationError, match="union_tag_invalid"):
        kinds.validate_python({"kind": "gemini-cli"})
    with pytest.raises(ValidationError, match="union_tag_not_found"):
        kinds.validate_python({"cli_path": "codex"})


def test_the_kinds_are_the_unions_members() -> None:
    members = get_args(get_args(RuntimeSettings)[0])
    assert tuple(member.model_fields["kind"].default for member in members) == RUNTIME_KINDS


def test_every_kind_has_a_model_and_a_section_or_none() -> None:
    """``[runtime.roles]`` may name every kind: each has its model, with its own ``kind``."""
    section = parse_config({}).runtime
    assert [section.runtime(kind).kind for kind in RUNTIME_KINDS] == list(RUNTIME_KINDS)
    assert parse_config({}).accounts() == dict.fromkeys(AGENT_ROLES, "anthropic")
    codex = parse_config({"runtime": {"roles": {"reviewer": "codex-cli"}}})
    assert codex.accounts()["reviewer"] == "openai"


def test_the_kinds_import_no_vendor_until_one_is_built() -> None:
    """A codex-only configuration does not import claude_agent_sdk: reading the kinds, checking
    and describing one imports no runtime (build() imports its own)."""
    probe = (
        "import sys\n"
        "from pydantic import TypeAdapter\n"
        "from adapters.runtime.settings import RuntimeSettings\n"
        "codex = TypeAdapter(RuntimeSettings).validate_python("
        "{'kind': 'codex-cli', 'cli_path': sys.executable})\n"
        "codex.check(); codex.cli()\n"
        "print(sorted(m for m in sys.modules if m.startswith('claude_agent_sdk') or ("
        "m.startswith(('adapters.runtime.claude.', 'adapters.runtime.codex.', "
        "'adapters.runtime.cli')) and not m.endswith('.settings'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_no_runtime_module_imports_the_composition_root() -> None:
    """The arrow goes one way: adapters/cli builds the runtimes from their settings; nothing
    under adapters/runtime (the Ray node among them) imports adapters.cli."""
    offenders = []
    for path in sorted((ROOT / "adapters" / "runtime").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [
                f"{path.relative_to(ROOT)}: {name}"
                for name in names
                if name == "adapters.cli" or name.startswith("adapters.cli.")
            ]
    assert offenders == []
