"""The composition root: from ``supervisor.toml`` and a repository to a running engine.

``build_app`` validates what a user can get wrong (not a git repository, no default branch, a
missing token, an unknown or unavailable runtime, a bad ``supervisor.toml``) and turns each into
a ``ConfigError`` with one clear line; then it builds the provider, one runtime adapter per
role, and the engine. Concrete adapters are imported here and nowhere in ``actors/``.

Its parts: ``repository.py`` (which configuration and repository, the default branch),
``runtimes.py`` (the runtime factory and its preflight), ``services.py`` (the control socket and
the dashboard beside the engine); here the provider, the engine and the ``App`` holding them,
with its reload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from actors.journal import JOURNAL_NAME
from actors.journal_file import InstanceLock, check_journal
from adapters.cli.providers import build_providers
from adapters.cli.repository import CONFIG_NAME, default_branch, resolve_config
from adapters.cli.runtimes import runtime_factory
from adapters.cli.settings import CpeConfig, load_config
from adapters.host.metering import ProviderMeter, metered
from domain.errors import ConfigError

# The engine is imported where it is built: a module importing this one does not import it.
if TYPE_CHECKING:
    from actors.engine import Engine

log = structlog.get_logger("cpe.app")


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
    # who is trusted on GitHub (adapters/providers/github/trust.py), on GitLab, Linear, Jira
    "provider.github.trusted_permission",
    "provider.github.admit_label",
    "provider.github.required_labels",
    "provider.github.trusted_bots",
    "provider.github.permission_ttl",
    "provider.gitlab.trusted_access_level",
    "provider.gitlab.admit_label",
    "provider.gitlab.required_labels",
    "provider.gitlab.trusted_bots",
    "provider.gitlab.permission_ttl",
    "provider.linear.admit_label",
    "provider.linear.required_labels",
    "provider.linear.trusted_users",
    "provider.linear.trust_guests",
    "provider.linear.permission_ttl",
    "provider.jira.trusted_permission",
    "provider.jira.trusted_groups",
    "provider.jira.trusted_users",
    "provider.jira.admit_label",
    "provider.jira.required_labels",
    "provider.jira.permission_ttl",
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


def code_host_remote(config: CpeConfig, root: Path) -> str | None:
    """With a remote forge (GitHub, GitLab) the default branch moves there (cpe merges there),
    not in the local clone: specs are read, and implementors' worktrees start, at its head as
    fetched from the clone's ``origin``, whatever keeps the work items. None for the local
    forge, or a clone without ``origin`` (then the local branch is used, and the log says it
    may lag behind)."""
    from adapters.providers.git import GitRepo  # noqa: PLC0415

    if config.provider.revisions_kind == "local":
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
    factory = runtime_factory(
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
    instance.acquire(wait=LOCK_WAIT, engine=True)
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
        build_providers(
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
    if config.provider.revisions_kind != "local" and remote is None:
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
