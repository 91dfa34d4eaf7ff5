"""The services beside a running engine: its control socket (requests, and the views the
terminal console reads) and the web dashboard, with the dashboard's address and its actions'
token; and the webhook receiver (``[webhooks]``) on the dashboard's server, or on an address of
its own serving only ``/hooks/*``."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from adapters.cli.providers import issue_pages
from adapters.cli.settings import CpeConfig
from domain.errors import ConfigError

if TYPE_CHECKING:
    from actors.services import Services
    from adapters.cli.build import App
    from adapters.dashboard.server import DashboardServer
    from adapters.dashboard.source import DashboardSettings, Source
    from adapters.host.control import Control
    from adapters.host.webhooks.receiver import WebhookReceiver
    from adapters.host.webhooks.refresher import Refresher
    from adapters.host.webhooks.verify import Role, Vendor

log = structlog.get_logger("cpe.app")


def dashboard_fallback(section: Any) -> bool:
    """Whether the dashboard's address gives way to a free port when another cpe on this
    machine has it: the default address, left out or written as cpe init writes it; never an
    address of the user's own."""
    default = type(section).model_fields["listen"].default
    return "listen" not in section.model_fields_set or section.listen == default


def prepare_services(app: App, *, human: bool = False) -> Callable[[], Services]:
    """The services beside the running engine, made ready before it starts (the dashboard
    hears of every decision from the first); the function returned starts them once the engine
    has started: its control socket (a person's requests from ``cpe work …``, ``cpe pause``;
    the views ``cpe tui`` reads, from the dashboard's ``Source``, made whether or not the
    dashboard serves) and, unless ``[dashboard] listen`` is empty, the web dashboard. Each is
    supervised apart from the engine: a crash restarts it and never touches the engine. The
    dashboard's address is bound here, before the engine starts: one that cannot be used is a
    ``ConfigError`` (``cpe run`` exits 78 naming it) before anything else started, and the
    default address (``listen`` not in supervisor.toml) in use gives way to a free port.
    ``human``: a person reads stderr, the dashboard's address (with its token) is printed
    there; otherwise it is logged without the token, which is in the state directory."""
    from adapters.dashboard.feeds import SourceViews  # noqa: PLC0415
    from adapters.dashboard.source import Source  # noqa: PLC0415
    from adapters.host.control import Control, ControlServer, ControlSettings  # noqa: PLC0415

    settings = ControlSettings(app.config.breaker, app.config.workflow.max_concurrent)
    control = Control(app.engine, settings)
    follow_reloads(app, control)
    # what the dashboard shows and the control socket's views give (cpe tui): one for both
    source = Source(
        app.engine,
        dashboard_settings(app.config),
        app.state_dir,
        control=control,
        meter=app.meter,
        title=str(app.repo),
    )
    app.closers.append(source.close)
    follow_reloads(app, source)
    views = SourceViews(source)
    listen = app.config.dashboard.listen
    dashboards: list[Callable[[Services], None]] = []
    receiver, refresher = webhook_receiver(app)
    if receiver is not None and app.config.webhooks.listen:
        dashboards.append(hooks_server(app, source, receiver))
    elif receiver is not None and not listen:
        log.warning(
            "webhooks are configured but nothing serves them: set [webhooks] listen, or "
            "[dashboard] listen"
        )
    if listen:
        from adapters.dashboard.server import DashboardServer, Listener  # noqa: PLC0415

        token = dashboard_token(app.config)
        listener = Listener(listen, fallback=dashboard_fallback(app.config.dashboard))
        with contextlib.suppress(OSError):  # another failure: the server tries again, restarted
            listener.bind()  # a ConfigError: the address cannot be used
        app.closers.append(listener.close)  # the socket, when no serve took it
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
                lambda: DashboardServer(
                    source, listener, token, on_listening=listening, webhooks=receiver
                ),
            )

        dashboards.append(dashboard)

    def start() -> Services:
        from actors.services import Services  # noqa: PLC0415

        services = Services(app.config.supervisor)
        services.start("control", lambda: ControlServer(control, app.state_dir, views))
        if refresher is not None:
            refresher.start()
        for dashboard in dashboards:
            dashboard(services)
        return services

    return start


TOKEN_FILE = "dashboard-token"


def webhook_receiver(app: App) -> tuple[WebhookReceiver | None, Refresher | None]:
    """The receiver of ``[webhooks]``'s vendors' deliveries (None: none is configured), and the
    refresher it asks the engine's polls of (started with the services, closed with the app).
    A vendor's secret variable unset is a ``ConfigError``."""
    from adapters.host.webhooks.receiver import WebhookReceiver  # noqa: PLC0415
    from adapters.host.webhooks.refresher import Refresher  # noqa: PLC0415
    from adapters.host.webhooks.stats import WebhookStats  # noqa: PLC0415

    section = app.config.webhooks
    secrets = section.secrets()
    if not secrets:
        return None, None
    provider = app.config.provider
    roles: dict[Vendor, set[Role]] = {}
    tracker, forge = provider.work_items_kind, provider.revisions_kind
    if tracker != "local":
        roles.setdefault(tracker, set()).add("work_items")
    if forge != "local":
        roles.setdefault(forge, set()).add("revisions")
    for vendor in secrets:
        if vendor not in roles:
            log.warning(
                "webhooks: this vendor keeps neither the work items nor the revisions here; "
                "its deliveries poll nothing",
                vendor=vendor,
            )
    pollers = {poller.name: poller for poller in app.engine.pollers}
    stats = WebhookStats(
        cycles=lambda name: pollers[name].cycles if name in pollers else None,
    )
    refresher = Refresher(
        app.engine.refresh, section.min_gap, clock=stats.clock, on_poll=stats.polled
    )
    app.closers.append(refresher.close)
    app.closers.append(app.engine.watch(stats.processed))
    receiver = WebhookReceiver(
        secrets,
        {vendor: frozenset(found) for vendor, found in roles.items()},
        refresher.request,
        max_body_bytes=section.max_body_bytes,
        stats=stats,
        pollers=pollers,
    )
    log.info("webhooks configured", vendors=list(secrets), min_gap_s=section.min_gap)
    return receiver, refresher


def hooks_server(app: App, source: Source, receiver: WebhookReceiver) -> Callable[[Services], None]:
    """``[webhooks] listen``: a server of ``/hooks/*`` alone, bound now (an address that cannot
    be used is a ``ConfigError`` before the engine starts), started with the services."""
    from adapters.dashboard.server import DashboardServer, Listener  # noqa: PLC0415

    listener = Listener(
        app.config.webhooks.listen,
        way_out='set [webhooks] listen in supervisor.toml to a free HOST:PORT, or "" to serve '
        "the hooks on the dashboard's address",
    )
    with contextlib.suppress(OSError):  # another failure: the server tries again, restarted
        listener.bind()
    app.closers.append(listener.close)

    def listening(server: DashboardServer) -> None:
        log.info("webhooks listening", url=server.url, serves="/hooks/* only")

    def start(services: Services) -> None:
        services.start(
            "webhooks",
            lambda: DashboardServer(
                source, listener, None, on_listening=listening, webhooks=receiver, hooks_only=True
            ),
        )

    return start


def follow_reloads(app: App, surface: Control | Source) -> None:
    """A reload (SIGHUP) reaches ``surface`` too: the control socket judges a person's
    requests by the breaker and the caps now in force, the dashboard shows them."""
    from adapters.host.control import Control, ControlSettings  # noqa: PLC0415

    def reconfigure(config: CpeConfig) -> None:
        if isinstance(surface, Control):
            surface.settings = ControlSettings(config.breaker, config.workflow.max_concurrent)
        else:
            surface.settings = dashboard_settings(config)

    app.reloaders.append(reconfigure)


def dashboard_settings(config: CpeConfig) -> DashboardSettings:
    """What the dashboard reads of ``config``: the workflow, the breaker, the quota, each role's
    runtime kind and model account, and where the tracker shows its items (None on the local
    tracker)."""
    from adapters.dashboard.source import DashboardSettings  # noqa: PLC0415

    return DashboardSettings(
        workflow=config.workflow,
        breaker=config.breaker,
        quota=config.runtime.quota,
        runtimes=config.runtime.roles.model_dump(),
        accounts=config.accounts(),
        issue_pages=issue_pages(config),
    )


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
