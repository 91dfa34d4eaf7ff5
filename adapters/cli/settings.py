"""``supervisor.toml``: its schema (``CpeConfig``) and loading it (``load_config``).

The composition root owns the file. Its sections are this module's models, the engine's own
settings (``SupervisorSettings``, ``BreakerSettings`` from actors/) and the adapters' own settings
models, embedded as they are (``[provider]``'s ``GitHubSettings`` and ``GitLabSettings`` in
provider_settings.py, ``BashGuardConfig``, ``SandboxConfig``, the runtime kinds'
``ClaudeCliRuntime`` and ``CodexCliRuntime`` from their vendors' packages), so each section is
checked once, when the file loads. Every model forbids unknown keys: a typo
or a wrong type fails at start with a ``ConfigError`` that names the key path and what was
expected.
``CpeConfig.engine_config`` maps the file onto the engine's ``EngineConfig`` (actors/config.py).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from actors.config import EngineConfig, LogLevel, PollerSettings
from actors.journal import JOURNAL_NAME
from actors.settings import BreakerSettings, DailyBudget, QuotaSettings, SupervisorSettings
from adapters.bash_guard.config import BashGuardConfig
from adapters.cli.provider_settings import ProviderSection
from adapters.host.webhooks.settings import WebhooksSection
from adapters.runtime.claude.settings import ClaudeCliRuntime, ClaudeSdkRuntime
from adapters.runtime.codex.settings import CodexCliRuntime
from adapters.runtime.common import DAY, ExpandedPath, Seconds
from adapters.runtime.remote.settings import RemoteSettings
from adapters.runtime.sandbox.config import SandboxConfig
from adapters.runtime.settings import RuntimeKind, RuntimeSettings
from adapters.support.addresses import check_listen
from domain.errors import ConfigError
from domain.handlers.options import HandlerOptions
from domain.models import AGENT_ROLES, AgentRole
from domain.policy import Policy
from domain.ports import (
    ProviderInterfaces,
    RuntimeAdapterFactory,
)


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Interval = Annotated[float, Field(ge=0, le=DAY, allow_inf_nan=False)]
Concurrency = Annotated[int, Field(ge=1, le=256)]


# ---------------------------------------------------------------------------- supervisor.toml


class EngineSection(_Section):
    log_level: LogLevel = "info"
    shutdown_timeout: float = Field(default=300, gt=0, le=3600, allow_inf_nan=False)
    stall_timeout: Seconds = Field(
        default=300, description="seconds one event may take before the watchdog stops"
    )
    state_dir: str = ".cpe"

    @field_validator("state_dir")
    @classmethod
    def _inside_the_repository(cls, value: str) -> str:
        parts = PurePosixPath(value).parts
        if not value.strip() or value.startswith(("/", "~")) or ".." in parts:
            raise ValueError(
                "expected a directory inside the repository (a relative path without '..'), "
                "e.g. .cpe"
            )
        if not parts or parts[0] == ".git":
            raise ValueError("expected a directory of its own, not .git or the repository's top")
        return value


class RepositorySection(_Section):
    path: ExpandedPath = "."
    default_branch: str = ""


class SpecsSection(_Section):
    globs: list[str] = Field(default_factory=lambda: ["specs/**/*.md"], min_length=1)
    max_bytes: int = Field(
        default=256_000, ge=1, le=4_000_000, description="a larger spec is skipped, saying why"
    )


def _default_concurrency() -> dict[AgentRole, int]:
    return {"planner": 1, "implementor": 2, "reviewer": 2}


_REF_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class WorkflowSection(_Section):
    """``[workflow]``: the handlers' options (``HandlerOptions`` in domain/handlers/options.py),
    each under its own name, with the file's bounds and messages."""

    max_attempts: int = Field(default=3, ge=1, le=100)
    auto_merge: bool = False
    merge_queue: bool = True
    max_landing_rounds: int = Field(default=3, ge=1, le=100)
    retry_backoff_initial: Seconds = 30
    retry_backoff_max: Seconds = 900
    charge_baseline_failures: bool = False
    pipeline_required: bool | Literal["auto"] = "auto"
    branch_prefix: str = "cpe/"
    max_concurrent: dict[AgentRole, Concurrency] = Field(default_factory=_default_concurrency)

    @field_validator("branch_prefix")
    @classmethod
    def _safe_ref_prefix(cls, value: str) -> str:
        """One path component of letters, digits, '.', '_' or '-', then '/'; not starting with
        '.' or '-', no '..', not ending in '.lock' (what git check-ref-format refuses)."""
        name = value[:-1]
        if (
            not value.endswith("/")
            or not name
            or any(c not in _REF_CHARS for c in name)
            or name.startswith((".", "-"))
            or ".." in name
            or name.endswith(".lock")
        ):
            raise ValueError(
                "expected one safe name then '/' (letters, digits, '.', '_', '-'; not starting "
                "with '.' or '-', no '..', not ending in '.lock'), e.g. cpe/"
            )
        return value


class PollersSection(_Section):
    work_items_interval: Interval = 30
    revisions_interval: Interval = 30
    specs_interval: Interval = 60


class RolesSection(_Section):
    planner: RuntimeKind = "claude-sdk"
    implementor: RuntimeKind = "claude-sdk"
    reviewer: RuntimeKind = "claude-sdk"


ClaudeModel = Literal["", "sonnet", "opus", "haiku"]


class ModelsSection(_Section):
    """``[runtime.models]``: the Claude model of each role on the Claude runtimes (claude-sdk,
    claude-cli); "" leaves it to the agent definition and the CLI's default."""

    planner: ClaudeModel = "sonnet"
    implementor: ClaudeModel = "sonnet"
    reviewer: ClaudeModel = "sonnet"


class HooksSection(_Section):
    """``[runtime.hooks]``: shell commands run in an implementor's worktree, each in its own
    process group with its own timeout. ``after_create`` (``setup_command`` is its older name)
    and ``before_run`` failing fail the run; ``after_run`` (after the agent, before the patch is
    taken) and ``before_remove`` failing are logged."""

    after_create: str = ""
    after_create_timeout: Seconds = 600
    before_run: str = ""
    before_run_timeout: Seconds = 600
    after_run: str = ""
    after_run_timeout: Seconds = 600
    before_remove: str = ""
    before_remove_timeout: Seconds = 600


class RuntimeSection(_Section):
    max_agent_duration: Seconds = 1800
    # No output and no tool at work for this long: the run is killed (killed_idle), on every
    # runtime; 0 turns it off. A runtime's own idle_timeout, when set, wins.
    idle_timeout: Interval = 600
    # The same tool call with the same input this many times in a row: the run makes no
    # progress and is stopped (killed_policy, an attempt); 0 turns it off.
    repeat_limit: int = Field(default=5, ge=0, le=1000)
    # An implementor's tool calls in a row that change nothing in its worktree (git status):
    # no progress, stopped the same way; 0 turns it off.
    unchanged_limit: int = Field(default=50, ge=0, le=10000)
    context_paths: list[ExpandedPath] = Field(default_factory=lambda: [".claude/CLAUDE.md"])
    setup_command: str = ""
    hooks: HooksSection = HooksSection()
    roles: RolesSection = RolesSection()
    models: ModelsSection = ModelsSection()

    @field_validator("hooks")
    @classmethod
    def _one_after_create(cls, hooks: HooksSection, info: ValidationInfo) -> HooksSection:
        setup = info.data.get("setup_command", "")
        if setup and hooks.after_create and setup != hooks.after_create:
            raise ValueError(
                "hooks.after_create and setup_command are the same hook: set one of them"
            )
        return hooks

    claude_cli: ClaudeCliRuntime = ClaudeCliRuntime()
    codex_cli: CodexCliRuntime = CodexCliRuntime()
    quota: QuotaSettings = QuotaSettings()
    # [runtime.remote]: the roles whose runs go to a Ray cluster's nodes (the cpe[ray] extra)
    remote: RemoteSettings | None = None

    def remote_roles(self) -> frozenset[str]:
        """The roles that run on the cluster (none without ``[runtime.remote]``)."""
        if self.remote is None:
            return frozenset()
        return frozenset(role for role, on in self.remote.roles.model_dump().items() if on)

    def runtime(self, kind: RuntimeKind) -> RuntimeSettings:
        """The settings of runtime ``kind`` (adapters/runtime/settings.py): its own section, if
        it has one."""
        runtimes: tuple[RuntimeSettings, ...] = (
            ClaudeSdkRuntime(),
            self.claude_cli,
            self.codex_cli,
        )
        return next(runtime for runtime in runtimes if runtime.kind == kind)


Usd = Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)]


class BudgetSection(_Section):
    """``[budget]``: what agent runs may cost, in USD; 0 is no limit."""

    per_run_usd: Usd = 5.0
    per_item_usd: Usd = 25.0
    per_spec_usd: Usd = 10.0
    per_day_usd: Usd = 100.0
    on_item_budget: Literal["block", "wait"] = "block"
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError("expected a time zone name such as UTC or Europe/Paris") from exc
        return value


class PriceSection(_Section):
    """USD per million tokens: fresh input, cached input, output, and (Claude) cache writes."""

    input: Usd
    cached_input: Usd
    output: Usd
    cache_write: Usd | None = None


class PricingSection(_Section):
    """``[pricing.models.NAME]``: prices for a runtime that reports tokens but no cost (codex);
    they add to, or replace, the shipped table (adapters/runtime/pricing.py)."""

    models: dict[str, PriceSection] = Field(default_factory=dict)


class LoggingSection(_Section):
    # auto: human on a terminal, JSON otherwise; cpe run --log-format overrides it
    format: Literal["auto", "json", "console", "human"] = "auto"
    agent_transcripts: bool = True


class DashboardSection(_Section):
    """``[dashboard]``: the web dashboard ``cpe run`` serves (``listen = ""`` turns it off)."""

    listen: str = Field(
        default="127.0.0.1:8765", description="HOST:PORT (port 0: any free one), or empty"
    )
    token_env: str = Field(
        default="", description="a variable holding the actions' token; empty: a random one"
    )

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, value: str) -> str:
        return check_listen(
            value, example="127.0.0.1:8765, [::1]:8765", when_empty="turn the dashboard off"
        )


class CpeConfig(_Section):
    """The whole of ``supervisor.toml``."""

    engine: EngineSection = EngineSection()
    repository: RepositorySection = RepositorySection()
    provider: ProviderSection = ProviderSection()
    specs: SpecsSection = SpecsSection()
    workflow: WorkflowSection = WorkflowSection()
    pollers: PollersSection = PollersSection()
    runtime: RuntimeSection = RuntimeSection()
    supervisor: SupervisorSettings = SupervisorSettings()
    breaker: BreakerSettings = BreakerSettings()
    budget: BudgetSection = BudgetSection()
    pricing: PricingSection = PricingSection()
    logging: LoggingSection = LoggingSection()
    bash_guard: BashGuardConfig = BashGuardConfig()
    sandbox: SandboxConfig = SandboxConfig()
    dashboard: DashboardSection = DashboardSection()
    webhooks: WebhooksSection = WebhooksSection()

    def engine_config(
        self,
        provider: ProviderInterfaces,
        create_runtime_adapters: RuntimeAdapterFactory,
        policy: Policy | None = None,
        *,
        repo_root: Path,
    ) -> EngineConfig:
        """The engine's config: this file's engine-owned settings plus the injected parts.
        ``repo_root`` is the resolved repository: the state dir is relative to it, never to
        the process's working directory."""
        state_dir = repo_root / self.engine.state_dir
        return EngineConfig(
            provider=provider,
            create_runtime_adapters=create_runtime_adapters,
            policy=policy,
            log_level=self.engine.log_level,
            shutdown_timeout=self.engine.shutdown_timeout,
            work_item_poller=PollerSettings(poll_interval=self.pollers.work_items_interval),
            revision_poller=PollerSettings(poll_interval=self.pollers.revisions_interval),
            spec_poller=PollerSettings(poll_interval=self.pollers.specs_interval),
            handlers=self.handler_options(),
            journal_path=str(state_dir / JOURNAL_NAME),
            max_agent_duration=self.runtime.max_agent_duration,
            supervisor=self.supervisor,
            breaker=self.breaker,
            daily_budget=self.engine_daily_budget(),
            quota=self.runtime.quota,
            accounts=self.accounts(),
        )

    def accounts(self) -> dict[AgentRole, str]:
        """The model account of each role's runtime (``[runtime.roles]``)."""
        roles = self.runtime.roles
        return {role: self.runtime.runtime(getattr(roles, role)).account for role in AGENT_ROLES}

    def engine_daily_budget(self) -> DailyBudget:
        return DailyBudget(per_day_usd=self.budget.per_day_usd, timezone=self.budget.timezone)

    def handler_options(self) -> HandlerOptions:
        """``[workflow]`` (every key of it is a handler option of the same name) and the budget
        the handlers enforce."""
        return HandlerOptions(
            **self.workflow.model_dump(),
            outage_after=self.breaker.outage_after,
            cancel_retrying=self.breaker.cancel_retrying,
            item_budget_usd=self.budget.per_item_usd or None,
            spec_budget_usd=self.budget.per_spec_usd or None,
            block_on_item_budget=self.budget.on_item_budget == "block",
        )


def load_config(path: Path | str) -> CpeConfig:
    """``supervisor.toml`` as a ``CpeConfig``, or a ``ConfigError`` naming what is wrong."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file", expected="a supervisor.toml") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", expected="TOML syntax") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason})", expected="TOML") from exc
    except OSError as exc:  # a directory, no permission: still one line, not a traceback
        raise ConfigError(
            f"{path}: cannot read it ({exc.strerror or exc})", expected="a readable file"
        ) from exc
    return parse_config(data, source=str(path))


def parse_config(data: Mapping[str, Any], *, source: str = "supervisor.toml") -> CpeConfig:
    try:
        config = CpeConfig.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, source) from exc
    # The tracker and the forge as a pair (adapters/cli/provider_settings.py), in one line.
    problem = config.provider.problem()
    if problem is not None:
        raise ConfigError(f"{source}: {problem}")
    return config


def _config_error(exc: ValidationError, source: str) -> ConfigError:
    return ConfigError(f"{source}: " + validation_problems(exc, CpeConfig))


def validation_problems(
    exc: ValidationError, model: type[BaseModel] | None = None, prefix: str = ""
) -> str:
    """One line for a ``ValidationError`` of ``model``: each problem's key path (after
    ``prefix``) and what was expected there (for an unknown key, the keys that are known)."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = [part for part in error["loc"] if part != "[key]"]  # a bad dict key: its path
        key_path = prefix + ".".join(str(part) for part in loc)
        if error["type"] == "extra_forbidden":
            known = _known_keys(model, loc[:-1])
            expected = f"; expected one of {', '.join(known)}" if known else ""
            problems.append(f"{key_path}: unknown key{expected}")
        elif error["type"] == "missing":
            problems.append(f"{key_path}: missing")
        else:
            message = error["msg"].replace("Input should be ", "expected ", 1)
            message = message.removeprefix("Value error, ")
            problems.append(f"{key_path}: {message} (got {error.get('input')!r})")
    return "; ".join(problems).replace("\n", " ")


def _known_keys(model: type[BaseModel] | None, path: Sequence[int | str]) -> list[str]:
    for part in path:
        field = model.model_fields.get(str(part)) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
    return sorted(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (``Section`` or ``Section | None``), if any."""
    if get_origin(annotation) is None:
        is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        return annotation if is_model else None
    return next(filter(None, map(_model_in, get_args(annotation))), None)
