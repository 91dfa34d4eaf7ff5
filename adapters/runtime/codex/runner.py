"""The ``codex-cli`` runner (S003-10, S004-10): ``codex exec --json``, headless.

The command, as ``codex exec`` 0.169.0 really accepts it (observed on that version)::

    codex exec --json -c approval_policy="never" --sandbox SANDBOX -C WORKTREE
               --output-schema SCHEMA_FILE --output-last-message LAST_FILE
               [-m MODEL] [-c developer_instructions="…"] [-c OVERRIDE]… -- PROMPT

``--approval-policy`` does not exist and ``exec -a`` is a usage error, so approvals go through
``-c``. SANDBOX is ``workspace-write`` unless the runner is built with another mode (S003-10's
``danger-full-access`` gives up the ``sandboxed_execution`` guarantee). The schema file holds
the *strict* form of the requested schema (codex sends it with ``strict: true``).

stdin is ``/dev/null``, never a pipe: codex reads a non-TTY stdin to EOF and an open pipe
hangs it for ever (a known codex hang). A prompt too long for argv goes on stdin from a file, with
``-`` as the prompt. Every stdout line is a JSON event, kept as ``runner_transcript``; the
``--output-last-message`` file becomes ``runner_final_response`` (and is kept as the optional
``codex_last_message``); the metadata, with the prompt, is written before the process starts
(S003-05). Agent instructions go in as ``-c developer_instructions=…``.

How a run ends, and what its events mean, is ``run.CodexCliRun``'s.

A runner built with ``isolated_home`` gives each run its own ``CODEX_HOME`` (never the user's),
placed where codex accepts it and removed or kept as ``home`` explains.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from adapters.runtime.artifacts.store import RunArtifacts
from adapters.runtime.cli.cli_runtime import CliRuntime, CliRuntimeConfig
from adapters.runtime.cli.jsonl import EventCallback
from adapters.runtime.cli.request import RunnerCapabilities, RunRequest
from adapters.runtime.cli.runner import ARGV_PROMPT_BYTES, JsonlCliRunner, Prepared
from adapters.runtime.codex.home import CodexHome, codex_home_of
from adapters.runtime.codex.run import CodexCliRun
from adapters.runtime.codex.signals import CodexSignals
from adapters.runtime.sandbox.runs import sandbox_record
from domain.ports import RuntimeAdapterDeps
from domain.results import OUTPUT_MODELS, output_schema, strict_output_schema

__all__ = [
    "CODEX_CAPABILITIES",
    "CODEX_MODEL_VARIABLES",
    "CodexCliRun",
    "CodexCliRunner",
    "SandboxMode",
    "codex_schema",
    "create_codex_runtime",
    "toml_string",
]

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]

CODEX_CAPABILITIES = RunnerCapabilities(
    name="codex-cli",
    supports_model=True,  # -m
    supports_non_interactive=True,  # exec
    supports_prompt_file_inclusion=False,
    available_models=("gpt-5-codex", "gpt-5"),
    writable_workspace=True,  # --sandbox workspace-write (the default; not read-only)
    sandboxed_execution=True,  # --sandbox workspace-write (the default; not danger-full-access)
    approval_controls=True,  # -c approval_policy="never"
    tool_allow_deny=False,  # exec has no per-tool allow or deny list
    structured_event_stream=True,  # --json
    interactive_prompt_suppression=True,  # exec, approval never, stdin /dev/null
    live_token_usage=True,  # token_count events in its session log, after each model response
)
# The model credentials and endpoint codex reads, passed to it on purpose (nothing else secret).
CODEX_MODEL_VARIABLES = ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME")
SCHEMA_FILE = "codex-output-schema.json"  # attached: the strict schema codex was given
_APPLIES_TO = (
    "codex exec and every command it runs (codex's own sandbox confines the commands further)"
)
LAST_MESSAGE_CAPTURE = ".codex-last-message"  # codex's -o file, attached at the end


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string, for a ``-c key=value`` override."""
    out = ['"']
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def installation(cli_path: str) -> tuple[str, ...]:
    """Where the codex executable lives, to show in its sandbox wherever that is (``/tmp``
    included): its directory, and for an npm install the whole ``node_modules`` (the launcher
    script finds its native binary in a sibling package)."""
    found = shutil.which(cli_path)
    if found is None:
        return ()
    places: list[str] = []
    for path in dict.fromkeys([os.path.abspath(found), os.path.realpath(found)]):
        parts = Path(path).parts
        top = max((k for k, part in enumerate(parts) if part == "node_modules"), default=None)
        place = str(Path(*parts[: top + 1])) if top is not None else os.path.dirname(path)
        if os.path.isdir(place):
            places.append(place)
    return tuple(dict.fromkeys(places))


def codex_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema codex gets: a role's output schema in its strict form, anything else as is."""
    for role in OUTPUT_MODELS:
        strict = strict_output_schema(role)
        if schema == strict or schema == output_schema(role):
            return strict
    return dict(schema)


class CodexCliRunner(JsonlCliRunner[CodexCliRun]):
    """The runner of ``codex exec``; runs land in ``<state_dir>/runs/<run_id>``."""

    agent_family = "codex_cli"
    invocation_mode = "exec"
    capture_format = "codex_exec_jsonl"
    model_variables = CODEX_MODEL_VARIABLES

    def __init__(
        self,
        state_dir: Path,
        *,
        cli_path: str = "codex",
        kill_grace: float = 5.0,
        wall_timeout: float | None = None,
        idle_timeout: float | None = None,
        models: Sequence[str] | None = None,
        overrides: Sequence[str] = (),
        sandbox: SandboxMode = "workspace-write",
        argv_prompt_bytes: int = ARGV_PROMPT_BYTES,
        isolated_home: bool = False,
        home_roots: Sequence[Path] | None = None,
    ) -> None:
        for override in overrides:
            key, equals, _ = override.partition("=")
            if not equals or not key.strip():
                raise ValueError(f"a -c override must be key=value, not {override!r}")
        self.state_dir = Path(state_dir).absolute()
        self.cli_path = cli_path
        self.kill_grace = kill_grace
        self.wall_timeout = wall_timeout
        self.idle_timeout = idle_timeout
        self.overrides = tuple(overrides)
        self.argv_prompt_bytes = argv_prompt_bytes
        self.sandbox = sandbox
        self.isolated_home = isolated_home
        self.home_roots = None if home_roots is None else tuple(home_roots)  # home.py's
        self.capabilities = replace(
            CODEX_CAPABILITIES,
            writable_workspace=sandbox != "read-only",
            sandboxed_execution=sandbox != "danger-full-access",
        )
        if models is not None:
            self.capabilities = replace(self.capabilities, available_models=tuple(models))

    def get_capabilities(self) -> RunnerCapabilities:
        return self.capabilities

    def sandbox_for(self, run: RunRequest) -> SandboxMode:
        """``read-only`` for a run with no reason to write (a planner or reviewer runs in the
        user's checkout), whatever the configured mode; the configured mode otherwise."""
        return "read-only" if run.read_only else self.sandbox

    def command(
        self, run: RunRequest, prompt: str | None, run_dir: Path, schema_file: Path | None
    ) -> list[str]:
        """The argv; prompt None: codex reads it from stdin (a file, never a pipe)."""
        argv = [self.cli_path, "exec", "--json", "-c", 'approval_policy="never"']
        argv += ["--sandbox", self.sandbox_for(run), "-C", str(Path(run.worktree_path).absolute())]
        if schema_file is not None:
            argv += ["--output-schema", str(schema_file)]
        argv += ["--output-last-message", str(run_dir / LAST_MESSAGE_CAPTURE)]
        if run.model is not None:
            argv += ["-m", run.model]
        if run.agent is not None and run.agent.instructions.strip():
            argv += ["-c", f"developer_instructions={toml_string(run.agent.instructions)}"]
        for override in self.overrides:
            argv += ["-c", override]
        return [*argv, "-"] if prompt is None else [*argv, "--", prompt]

    def _argv(self, run: RunRequest, prompt: str | None) -> list[str]:
        run_dir = self.state_dir / "runs" / run.run_id
        schema_file = run_dir / SCHEMA_FILE if run.output_schema is not None else None
        return self.command(run, prompt, run_dir, schema_file)

    def effective_policy(self, run: RunRequest, via_stdin: bool) -> dict[str, Any]:
        return {
            "approval_policy": "never",
            "sandbox": self.sandbox_for(run),
            "non_interactive": "exec, stdin " + ("the prompt file" if via_stdin else "/dev/null"),
            "enforced": sorted(run.requested_policy),
            "output_schema": "strict" if run.output_schema is not None else "none",
            **(
                {"max_turns": f"{run.counted_max_turns} tool calls, counted by cpe"}
                if run.counted_max_turns is not None
                else {}
            ),
            **({"not_enforced": run.extra["not_enforced"]} if "not_enforced" in run.extra else {}),
            "os_sandbox": sandbox_record(run.sandbox, run.sandbox_missing, _APPLIES_TO),
        }

    def _prepare(
        self,
        run: RunRequest,
        argv: list[str],
        env: Mapping[str, str] | None,
        artifacts: RunArtifacts,
        on_event: EventCallback | None,
    ) -> Prepared[CodexCliRun]:
        """The strict schema attached, the run's own ``CODEX_HOME`` (``isolated_home``), and
        codex, with its own sandbox inside, in cpe's."""
        run_dir = self.state_dir / "runs" / run.run_id
        if run.output_schema is not None:
            artifacts.attach(
                "codex_output_schema", SCHEMA_FILE, json.dumps(codex_schema(run.output_schema))
            )
        last = run_dir / LAST_MESSAGE_CAPTURE
        env = dict(env or {})
        home = None
        if self.isolated_home:
            home = CodexHome.isolated(self.state_dir, run.run_id, env, self.home_roots)
            env["CODEX_HOME"] = str(home.path)
            artifacts.annotate(
                codex_home=str(home.path),
                codex_home_kept=not home.removable,
                codex_home_accepted=home.accepted,  # False: codex makes no helper aliases
            )
        launched = argv
        if run.sandbox is not None:
            # codex, and its own sandbox inside, in cpe's: its home, the run's directory and
            # (implementor) the worktree writable; its credentials in its own environment.
            codex_home = codex_home_of(env)
            writable = [run_dir, *([codex_home] if codex_home is not None else [])]
            for place in writable:
                place.mkdir(parents=True, exist_ok=True)
            outer = run.sandbox.model_copy(
                update={
                    "extra_writable": tuple(os.path.realpath(p) for p in writable),
                    "extra_readable": installation(self.cli_path),
                    "keep_env": True,
                }
            )
            launched = outer.wrap_argv(argv, str(Path(run.worktree_path).absolute()))
            artifacts.annotate(sandbox_command=launched[: launched.index("--") + 1])
        return Prepared(
            launched,
            env,
            lambda process: CodexCliRun(
                run, artifacts, process, last, on_event, codex_home_of(env), home
            ),
            home.release if home is not None else lambda: None,
        )

    @staticmethod
    def text_chunks(event: Mapping[str, Any]) -> list[str]:
        """The text of an ``agent_message`` item."""
        if event.get("type") == "item.completed":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "agent_message" and item.get("text"):
                return [str(item["text"])]
        return []


def create_codex_runtime(
    config: CliRuntimeConfig,
    deps: RuntimeAdapterDeps,
    *,
    cli_path: str = "codex",
    overrides: Sequence[str] = (),
    models: Sequence[str] | None = None,
    sandbox: SandboxMode = "workspace-write",
    kill_grace: float = 5.0,
) -> CliRuntime:
    """The ``codex-cli`` runtime: ``CliRuntime`` over this runner, runs where the SDK's land.

    ``overrides`` are extra ``-c`` values (e.g. a ``model_providers`` entry; the scripted
    model's is ``codex_overrides(base_url)``). codex has no per-tool lists and no hook for cpe's
    Bash guard, so its runs are confined by its sandbox: ``workspace-write`` for an implementor,
    ``read-only`` for a planner or reviewer; ``danger-full-access`` confines nothing and is
    refused. The agent gets codex's own credentials (``CODEX_MODEL_VARIABLES``), no others.
    """
    runner = CodexCliRunner(
        Path(config.logging.logs_dir).parent,
        cli_path=cli_path,
        kill_grace=kill_grace,
        idle_timeout=config.idle_timeout,
        overrides=overrides,
        models=models,
        sandbox=sandbox,
        isolated_home=config.isolated_home,
    )
    return CliRuntime(runner, config, deps, signals=CodexSignals)
