"""The composition root: from ``supervisor.toml`` and a repository to a running engine.

``build_app`` validates what a user can get wrong (not a git repository, no default branch, a
missing token, an unknown or unavailable runtime, a bad ``supervisor.toml``) and turns each into
a ``ConfigError`` with one clear line; then it builds the provider, one runtime adapter per
role, and the engine. Concrete adapters are imported here and nowhere in ``actors/``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from actors.journal import JOURNAL_NAME, InstanceLock, check_journal
from adapters.cli.settings import CpeConfig, load_config, parse_config
from adapters.metering import ProviderMeter, metered
from adapters.runtime.settings import RUNTIME_KINDS, RuntimeCommon, RuntimeContext, RuntimeKind
from domain.errors import ConfigError, CpeError
from domain.models import AGENT_ROLES, AgentRole
from domain.ports import (
    ProviderInterfaces,
    RuntimeAdapter,
    RuntimeAdapterDeps,
    RuntimeAdapterFactory,
)

# The engine and its services are imported where they are built: the read-only commands (cpe
# status, cpe work list) resolve their configuration here without them.
if TYPE_CHECKING:
    from actors.engine import Engine
    from actors.services import Services

log = structlog.get_logger("cpe.app")

CONFIG_NAME = "supervisor.toml"


@dataclass
class App:
    config: CpeConfig
    repo: Path
    default_branch: str
    state_dir: Path
    engine: Engine
    closers: list[Any] = field(default_factory=list)
    meter: ProviderMeter = field(default_factory=ProviderMeter)
    config_path: Path | None = None
    # What a reload hands the new configuration to, beside the engine (the provider's trust).
    reloaders: list[Callable[[CpeConfig], None]] = field(default_factory=list)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()

    def reload(self) -> None:
        """SIGHUP: read the configuration again. A file that does not load or validate is one
        log line, and the last good configuration stays; a valid one takes effect for what can
        change while agents run (``RELOADABLE``: caps, intervals, attempts, backoff, breaker,
        timeouts), and the log names the changed settings that need a restart."""
        path = self.config_path or self.repo / CONFIG_NAME
        try:
            new = load_config(path)
        except ConfigError as exc:
            log.error("configuration reload refused; running on the last good one", error=str(exc))
            return
        old_values, new_values = _flatten(self.config.model_dump()), _flatten(new.model_dump())
        changed = sorted(
            k
            for k in old_values.keys() | new_values.keys()
            if old_values.get(k) != new_values.get(k)
        )
        applied = [key for key in changed if _reloadable(key)]
        restart = [key for key in changed if not _reloadable(key)]
        if applied:
            running = {
                **old_values,
                **{key: new_values[key] for key in applied if key in new_values},
            }
            self.config = CpeConfig.model_validate(_unflatten(running))
            c = self.config
            self.engine.reconfigure(
                handlers=c.handler_options(),
                poll_intervals={
                    "work_items": c.pollers.work_items_interval,
                    "revisions": c.pollers.revisions_interval,
                    "baseline": c.pollers.revisions_interval,
                    "ignored_items": c.pollers.work_items_interval,
                    "specs": c.pollers.specs_interval,
                },
                breaker=c.breaker,
                max_agent_duration=c.runtime.max_agent_duration,
                shutdown_timeout=c.engine.shutdown_timeout,
                daily_budget=c.engine_daily_budget(),
            )
            for reloader in self.reloaders:
                reloader(c)
        log.info("configuration reloaded", path=str(path), applied=applied)
        if restart:
            log.warning("configuration changes that need a restart", settings=restart)


# What a reload (SIGHUP) applies while agents run; anything else needs a restart.
RELOADABLE = (
    "workflow",
    "budget.per_item_usd",
    "budget.per_spec_usd",
    "budget.per_day_usd",
    "budget.on_item_budget",
    "budget.timezone",
    "pollers",
    "breaker",
    "runtime.max_agent_duration",
    "engine.shutdown_timeout",
    # who is trusted on GitHub (adapters/providers/github/trust.py)
    "provider.github.trusted_permission",
    "provider.github.admit_label",
    "provider.github.required_labels",
    "provider.github.trusted_bots",
    "provider.github.permission_ttl",
)


def _reloadable(key: str) -> bool:
    return any(key == prefix or key.startswith(prefix + ".") for prefix in RELOADABLE)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys to leaf values (lists and None are leaves)."""
    if not isinstance(data, dict) or not data:
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def dashboard_fallback(section: Any) -> bool:
    """Whether the dashboard's address gives way to a free port when another cpe on this
    machine has it: the default address, left out or written as cpe init writes it; never an
    address of the user's own."""
    default = type(section).model_fields["listen"].default
    return "listen" not in section.model_fields_set or section.listen == default


def prepare_services(app: App, *, human: bool = False) -> Callable[[], Services]:
    """The services beside the running engine, made ready before it starts (the dashboard
    hears of every decision from the first); the function returned starts them once the engine
    has started: its control socket (a person's requests from ``cpe work …``, ``cpe pause``)
    and, unless ``[dashboard] listen`` is empty, the web dashboard. Each is supervised apart
    from the engine: a crash restarts it and never touches the engine. The dashboard's address
    is bound here, before the engine starts: one that cannot be used is a ``ConfigError``
    (``cpe run`` exits 78 naming it) before anything else started, and the default address
    (``listen`` not in supervisor.toml) in use gives way to a free port. ``human``: a person
    reads stderr, the dashboard's address (with its token) is printed there; otherwise it is
    logged without the token, which is in the state directory."""
    from adapters.control import Control, ControlServer  # noqa: PLC0415

    control = Control(app.engine, app.config)
    listen = app.config.dashboard.listen
    dashboards: list[Callable[[Services], None]] = []
    if listen:
        from adapters.dashboard.server import DashboardServer, Listener  # noqa: PLC0415
        from adapters.dashboard.source import Source  # noqa: PLC0415

        token = dashboard_token(app.config)
        listener = Listener(listen, fallback=dashboard_fallback(app.config.dashboard))
        with contextlib.suppress(OSError):  # another failure: the server tries again, restarted
            listener.bind()  # a ConfigError: the address cannot be used
        app.closers.append(listener.close)  # the socket, when no serve took it
        source = Source(
            app.engine,
            app.config,
            app.state_dir,
            control=control,
            meter=app.meter,
            title=str(app.repo),
        )
        app.closers.append(source.close)
        announced = threading.Event()
        token_env = app.config.dashboard.token_env
        token_file = None if token_env else str(app.state_dir / TOKEN_FILE)

        def listening(server: DashboardServer) -> None:
            if announced.is_set():
                return
            announced.set()
            if human:
                stamp = time.strftime("%H:%M:%S", time.gmtime())
                print(
                    f"{stamp}  dashboard on {server.url}#token={token}", file=sys.stderr, flush=True
                )
            else:
                # (not under a key named token: the log redacts those)
                where = f"the token in {token_file}" if token_file else f"${token_env}"
                log.info("dashboard listening", url=server.url, actions_need=where)

        def dashboard(services: Services) -> None:
            if not app.config.dashboard.token_env:  # once this engine holds the state:
                keep_token(token, app.state_dir)  # never over a running one's token
            services.start(
                "dashboard",
                lambda: DashboardServer(source, listener, token, on_listening=listening),
            )

        dashboards.append(dashboard)

    def start() -> Services:
        from actors.services import Services  # noqa: PLC0415

        services = Services(app.config.supervisor)
        services.start("control", lambda: ControlServer(control, app.state_dir))
        for dashboard in dashboards:
            dashboard(services)
        return services

    return start


TOKEN_FILE = "dashboard-token"


def dashboard_token(config: CpeConfig) -> str:
    """The actions' token: ``[dashboard] token_env``'s value, else a new random one."""
    name = config.dashboard.token_env
    if name:
        value = os.environ.get(name, "")
        if not value:
            raise ConfigError(
                f"dashboard.token_env: the environment variable {name} is not set",
                expected="a token in it, or token_env empty for a random one",
            )
        return value
    return secrets.token_urlsafe(24)


def keep_token(token: str, state_dir: Path) -> str:
    """Write a random token to the state directory (mode 0600), for whoever runs cpe without a
    terminal to read; its path."""
    path = state_dir / TOKEN_FILE
    state_dir.mkdir(parents=True, exist_ok=True)
    temporary = state_dir / f".{TOKEN_FILE}.{os.getpid()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    temporary.replace(path)
    return str(path)


def resolve_config(config_path: Path | None, repo: Path | None) -> tuple[CpeConfig, Path]:
    """The configuration and the repository it applies to.

    ``[repository] path`` is relative to the config file: ``--config``'s, else the one in the
    repository (``--repo`` or the current directory, or the top of its repository when run
    from a subdirectory)."""
    hint = "--repo PATH"
    if config_path is not None:
        config = load_config(config_path)
        base = config_path.resolve().parent
        hint = f"[repository] path in {config_path}, or --repo PATH"
    else:
        base = (repo or Path.cwd()).resolve()
        if not (base / CONFIG_NAME).exists() and base.is_dir():
            base = _toplevel(base) or base  # a subdirectory: the repository's own config
        candidate = base / CONFIG_NAME
        config = load_config(candidate) if candidate.exists() else parse_config({})
    root = repo or (base / config.repository.path)
    return config, git_toplevel(root, hint if repo is None else "")


def git_toplevel(path: Path, hint: str = "") -> Path:
    expected = "a git repository (git init)" + (f", or {hint}" if hint else "")
    if not path.is_dir():
        raise ConfigError(f"{path}: no such directory", expected=expected)
    result = _rev_parse_toplevel(path)
    if result.returncode == 0:
        return Path(result.stdout.strip())
    if "dubious ownership" in result.stderr:
        # Typical of a tarball unpacked as root, or a checkout mounted into a container: git
        # itself refuses to work there, so nothing of cpe could.
        raise ConfigError(
            f"{path}: git refuses this repository: it belongs to another user "
            "(detected dubious ownership)",
            expected=f"a repository of your own user, or: git config --global --add "
            f"safe.directory {path}",
        )
    raise ConfigError(f"{path}: not a git repository", expected=expected)


def _toplevel(path: Path) -> Path | None:
    result = _rev_parse_toplevel(path)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def _rev_parse_toplevel(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def default_branch(config: CpeConfig, repo: Path) -> str:
    from adapters.providers.git import GitRepo, detect_default_branch  # noqa: PLC0415

    name = config.repository.default_branch
    if not name:
        try:
            name = detect_default_branch(GitRepo(repo))
        except CpeError as exc:
            raise ConfigError(
                f"{repo}: no default branch",
                expected="a first commit, or repository.default_branch",
            ) from exc
    check = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if check.returncode != 0:
        source = "repository.default_branch" if config.repository.default_branch else "detected"
        raise ConfigError(
            f"no default branch: {name!r} ({source}) has no commit in {repo}",
            expected="a first commit on it, or repository.default_branch naming a branch",
        )
    return name


def code_host_remote(config: CpeConfig, root: Path) -> str | None:
    """With the GitHub provider the default branch moves on GitHub (cpe merges there), not in
    the local clone: specs are read, and implementors' worktrees start, at its head as fetched
    from the clone's ``origin``. None for the local provider, or a clone without ``origin``
    (then the local branch is used, and the log says it may lag behind)."""
    from adapters.providers.git import GitRepo  # noqa: PLC0415

    if config.provider.kind != "github":
        return None
    found = GitRepo(root).run_status("remote", "get-url", "origin")
    return "origin" if found.status == 0 else None


def build_app(
    config_path: Path | None = None,
    repo: Path | None = None,
    *,
    agent_env: Mapping[str, str] | None = None,
    isolated_home: bool = False,
    codex_overrides: Sequence[str] = (),
    new_journal: bool = False,
) -> App:
    config, root = resolve_config(config_path, repo)
    branch = default_branch(config, root)
    state_dir = root / config.engine.state_dir
    # The runtimes' preflight first: a missing credential or CLI stops here, before anything
    # starts (the local pipeline) or changes (a journal set aside).
    roles = config.runtime.roles.model_dump()
    closers: list[Any] = []
    remote = code_host_remote(config, root)
    factory = _runtime_factory(
        config,
        root,
        f"{remote}/{branch}" if remote else branch,  # where implementors' worktrees start
        state_dir,
        roles,
        closers=closers,
        agent_env=agent_env,
        isolated_home=isolated_home,
        codex_overrides=codex_overrides,
    )
    # The state directory is this process's before anything touches it: a second cpe run
    # (typed in another terminal) must stop here, not set the journal aside or reap the
    # running engine's pipelines and worktrees on its way to being refused.
    from actors.engine import LOCK_WAIT  # noqa: PLC0415 - the engine: cpe run's import

    instance = InstanceLock(str(state_dir / JOURNAL_NAME))
    instance.acquire(wait=LOCK_WAIT)
    try:
        return _build(
            config,
            root,
            branch,
            state_dir=state_dir,
            factory=factory,
            closers=closers,
            instance=instance,
            config_path=config_path,
            new_journal=new_journal,
        )
    except BaseException:
        instance.release()
        raise


def _build(
    config: CpeConfig,
    root: Path,
    branch: str,
    *,
    state_dir: Path,
    factory: Any,
    closers: list[Any],
    instance: InstanceLock,
    config_path: Path | None,
    new_journal: bool,
) -> App:
    """The app once its state directory is held: the journal checked, the provider, the
    engine."""
    remote = code_host_remote(config, root)
    set_aside = check_journal(state_dir / JOURNAL_NAME, start_over=new_journal)
    if set_aside is not None:
        log.warning("the old journal is set aside; starting a new one", old=str(set_aside))
    meter = ProviderMeter()
    reloaders: list[Callable[[CpeConfig], None]] = []
    provider = metered(
        _provider(
            config,
            root,
            branch,
            state_dir,
            closers,
            meter=meter,
            remote=remote,
            reloaders=reloaders,
        ),
        meter,
    )
    if config.provider.kind == "github" and remote is None:
        log.warning(
            "this repository has no remote 'origin': specs and worktrees use the local default "
            "branch, which only moves when you pull",
            repository=str(root),
        )
    from actors.engine import create_engine  # noqa: PLC0415

    engine = create_engine(
        config.engine_config(provider, factory, repo_root=root), instance=instance
    )
    return App(
        config,
        root,
        branch,
        state_dir,
        engine,
        closers,
        meter,
        config_path=config_path,
        reloaders=reloaders,
    )


def _provider(
    config: CpeConfig,
    root: Path,
    branch: str,
    state_dir: Path,
    closers: list[Any],
    *,
    meter: ProviderMeter,
    remote: str | None = None,
    reloaders: list[Callable[[CpeConfig], None]] | None = None,
) -> ProviderInterfaces:
    if config.provider.kind == "github":
        github = config.provider.github
        if github is None:
            raise ConfigError("provider.github: missing", expected="repository and token_env")
        settings = github.model_copy(
            update={
                "default_branch": branch,
                # The implementors' branches are named with it: how a PR finds its work item.
                "branch_prefix": config.workflow.branch_prefix,
            }
        )
        if settings.app_id is None and not os.environ.get(github.token_env):
            raise ConfigError(
                f"provider.github.token_env: the environment variable {github.token_env} is "
                "not set",
                expected="a GitHub token in that variable",
            )
        try:
            from adapters.providers.github import create_github_provider  # noqa: PLC0415
        except ImportError as exc:
            raise ConfigError(
                "provider.kind: the GitHub provider is not available in this version",
                expected="local",
            ) from exc
        from adapters.providers.specs.reader import GitSpecReader  # noqa: PLC0415

        specs = GitSpecReader(
            root,
            config.specs.globs,
            default_branch=branch,
            max_bytes=config.specs.max_bytes,
            remote=remote,
        )
        provider, interfaces = create_github_provider(settings, specs, state_dir=state_dir)
        closers.append(provider.close)

        def retrust(new: CpeConfig) -> None:
            if new.provider.github is not None:
                provider.trust.configure(new.provider.github)

        if reloaders is not None:
            reloaders.append(retrust)
        meter.wire = lambda: provider.stats
        return interfaces
    from adapters.providers.local.pipeline import LocalPipeline  # noqa: PLC0415
    from adapters.providers.local.provider import create_local_provider  # noqa: PLC0415
    from adapters.providers.specs.reader import GitSpecReader  # noqa: PLC0415

    local = config.provider.local
    pipeline = (
        LocalPipeline(local.pipeline_command, local.pipeline_timeout)
        if local.pipeline_command
        else None
    )
    specs = GitSpecReader(
        root, config.specs.globs, default_branch=branch, max_bytes=config.specs.max_bytes
    )
    local_provider, interfaces = create_local_provider(
        root, state_dir, specs, default_branch=branch, pipeline=pipeline, baseline=local.baseline
    )
    closers.append(local_provider.close)
    return interfaces


def _runtime_factory(
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
