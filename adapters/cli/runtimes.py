"""The runtime factory: one runtime adapter per role, each of the kind ``[runtime.roles]``
names (adapters/runtime/settings.py), built with one ``RuntimeContext``; the roles
``[runtime.remote]`` names run on a Ray cluster. Each runtime's preflight (its CLI, its version,
the credentials, the sandbox) runs before the factory is returned: a missing credential or CLI
stops ``cpe run`` before anything starts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from adapters.cli.settings import CpeConfig
from adapters.runtime.common import RuntimeCommon, RuntimeContext
from adapters.runtime.settings import RUNTIME_KINDS, RuntimeKind
from domain.errors import ConfigError
from domain.models import AGENT_ROLES, AgentRole
from domain.ports import RuntimeAdapter, RuntimeAdapterDeps, RuntimeAdapterFactory

log = structlog.get_logger("cpe.app")


def runtime_factory(
    config: CpeConfig,
    root: Path,
    branch: str,
    state_dir: Path,
    roles: Mapping[str, RuntimeKind],
    *,
    closers: list[Any] | None = None,
    agent_env: Mapping[str, str] | None,
    isolated_home: bool,
    codex_overrides: Sequence[str] = (),
) -> RuntimeAdapterFactory:
    from adapters.runtime.preflight import (  # noqa: PLC0415
        check_cli_version,
        check_credentials,
    )
    from adapters.runtime.pricing import DEFAULT_PRICES, ModelPrice  # noqa: PLC0415

    # The runtimes the roles name, in RUNTIME_KINDS' order: the checks below go in that order.
    # A remote role's runtime is checked on its node, when a run starts there.
    remote_roles = config.runtime.remote_roles()
    local_kinds = {kind for role, kind in roles.items() if role not in remote_roles}
    runtimes = [config.runtime.runtime(kind) for kind in RUNTIME_KINDS if kind in local_kinds]
    if remote_roles:
        _join_cluster(config)
    for runtime in runtimes:
        runtime.check()
    for runtime in runtimes:
        check_cli_version(runtime.kind, *runtime.cli())
    codex = config.runtime.codex_cli
    check_credentials(
        [runtime.kind for runtime in runtimes],
        agent_env or {},
        isolated_home=isolated_home,
        codex_overrides=[*codex.overrides, *codex_overrides],
    )
    sandbox, sandbox_missing = _sandbox(config, closers if closers is not None else [])
    hooks = config.runtime.hooks
    common = RuntimeCommon(
        max_agent_duration=config.runtime.max_agent_duration,
        max_budget_usd=config.budget.per_run_usd or None,
        repeat_limit=r if (r := config.runtime.repeat_limit) >= 2 else None,
        unchanged_limit=config.runtime.unchanged_limit or None,
        agent_sessions=config.logging.agent_transcripts,
        context_paths=tuple(config.runtime.context_paths),
        setup_command=hooks.after_create or config.runtime.setup_command,
        setup_timeout=hooks.after_create_timeout,
        hooks={
            name: (getattr(hooks, name), getattr(hooks, f"{name}_timeout"))
            for name in ("before_run", "after_run", "before_remove")
        },
        agent_env=dict(agent_env or {}),
        isolated_home=isolated_home,
        bash_guard=config.bash_guard,
        prices={
            **DEFAULT_PRICES,
            **{
                name: ModelPrice(**price.model_dump())
                for name, price in config.pricing.models.items()
            },
        },
        sandbox=config.sandbox,
        models={role: m for role, m in config.runtime.models.model_dump().items() if m},
        idle_timeout=config.runtime.idle_timeout or None,
        codex_overrides=tuple(codex_overrides),
    )
    context = RuntimeContext(
        common,
        repo_root=str(root),
        default_branch=branch,
        logs_dir=str(state_dir / "runs"),
        sandbox=sandbox,
        sandbox_missing=sandbox_missing,
    )

    def factory(deps: RuntimeAdapterDeps) -> dict[AgentRole, RuntimeAdapter]:
        built: dict[str, RuntimeAdapter] = {}  # one adapter per kind, shared by its roles
        adapters: dict[AgentRole, RuntimeAdapter] = {}
        for role in AGENT_ROLES:
            kind = roles[role]
            key = f"remote:{kind}" if role in remote_roles else kind
            if key not in built:
                built[key] = (
                    _remote_runtime(config, kind, context, deps)
                    if role in remote_roles
                    else config.runtime.runtime(kind).build(context, deps)
                )
            adapters[role] = built[key]
        return adapters

    return factory


def _join_cluster(config: CpeConfig) -> None:
    """``[runtime.remote]``: Ray must be installed (the ``cpe[ray]`` extra) and its cluster
    reachable; a ``ConfigError`` otherwise. Nothing imports Ray unless a role runs remotely."""
    remote = config.runtime.remote
    assert remote is not None
    try:
        from adapters.runtime.remote.ray_runtime import connect  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigError(
            f"runtime.remote.kind: {remote.kind!r} needs Ray, which is not installed",
            expected="pip install 'control-plane-engine[ray]' (the cpe[ray] extra)",
        ) from exc
    connect(remote)


def _remote_runtime(
    config: CpeConfig, kind: RuntimeKind, context: RuntimeContext, deps: RuntimeAdapterDeps
) -> RuntimeAdapter:
    from adapters.runtime.remote.ray_runtime import create_ray_runtime  # noqa: PLC0415

    assert config.runtime.remote is not None
    return create_ray_runtime(config.runtime.remote, config.runtime.runtime(kind), context, deps)


def _sandbox(config: CpeConfig, closers: list[Any]) -> tuple[Any, str]:
    """The sandbox agent commands run in, or None and why not (``[sandbox] required = false``);
    a ``ConfigError`` when one is required and there is none. With ``allow_install``, cpe's
    registry proxy is started (and closed with the app)."""
    from adapters.runtime.preflight import check_sandbox  # noqa: PLC0415
    from adapters.runtime.sandbox import Sandbox  # noqa: PLC0415
    from adapters.runtime.sandbox.proxy import RegistryProxy  # noqa: PLC0415

    settings = config.sandbox
    proxy = RegistryProxy(settings.registries) if settings.allow_install else None
    try:
        found = check_sandbox(settings, proxy_socket=proxy.path if proxy else None)
    except BaseException:
        if proxy is not None:
            proxy.close()
        raise
    if isinstance(found, Sandbox):
        if proxy is not None:
            closers.append(proxy.close)
        log.debug("agent commands run in a bubblewrap sandbox", bwrap=found.bwrap)
        return found, ""
    if proxy is not None:
        proxy.close()
    log.warning("agent commands run WITHOUT the OS sandbox ([sandbox] required = false)", why=found)
    return None, f"[sandbox] required = false, and {found}"
