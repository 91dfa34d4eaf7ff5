"""Where the dashboard listens when its address is taken (two ``cpe run`` on one machine): an
address a person chose is one configuration error naming it and the way out (``cpe run`` exits
78, ``cpe demo --serve`` too), never a restart loop; the default address, chosen by nobody,
gives way to a free port on the same host, and the URL logged and printed is the real one.

No test binds the real default address (127.0.0.1:8765, which another test or a developer's
cpe may hold): the default is the configuration's ``listen`` left unset, here with a port the
test holds."""

from __future__ import annotations

import io
import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import adapters.cli.demo as demo_module
import adapters.demo.sample as sample_module
from actors.engine import Engine
from actors.services import Services
from actors.settings import SupervisorSettings
from adapters.cli.build import App
from adapters.cli.command import main
from adapters.cli.services import dashboard_settings, prepare_services
from adapters.cli.settings import CpeConfig, DashboardSection, parse_config
from adapters.dashboard.server import DashboardServer, Listener
from adapters.dashboard.source import Source
from domain.errors import ConfigError
from tests.actors.conftest import Harness
from tests.actors.test_logs import Lines, json_log
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.support.git import make_repo

TOKEN = "t0k3n-for-the-tests"
LOOSE = SupervisorSettings(backoff_initial=0, jitter=0, max_restarts=50, within_seconds=60)
GOOD = "[provider.local]\npipeline_command = []\n"


@pytest.fixture
def taken() -> Iterator[int]:
    """A port on 127.0.0.1 that this test holds (another cpe's dashboard)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def log() -> Iterator[Lines]:
    yield from json_log()


@pytest.fixture
def engine(harness: Harness) -> Engine:
    harness.tracker.add_item("1", "blocked", title="Greeting")
    made = harness.engine()
    made.start()
    return made


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


def app_with(engine: Engine, tmp_path: Path, config: CpeConfig) -> App:
    return App(config, tmp_path, "main", tmp_path / "state", engine)


def unset_listen(listen: str) -> CpeConfig:
    """The configuration with ``[dashboard] listen`` not written: its default, ``listen``."""
    section = DashboardSection.model_construct(_fields_set=set(), listen=listen, token_env="")
    return parse_config({}).model_copy(update={"dashboard": section})


def get_state(url: str) -> Any:
    with urllib.request.urlopen(url + "api/state", timeout=30) as answer:
        return json.load(answer)


# ---------------------------------------------------------------------------- a chosen address


def test_a_dashboard_service_on_a_taken_address_is_one_error_naming_it_and_never_restarted(
    engine: Engine, tmp_path: Path, taken: int, log: Lines
) -> None:
    source = Source(
        engine, dashboard_settings(parse_config({})), tmp_path, control=None, title="repo"
    )
    builds: list[DashboardServer] = []

    def build() -> DashboardServer:
        builds.append(DashboardServer(source, f"127.0.0.1:{taken}", TOKEN))
        return builds[-1]

    services = Services(LOOSE)
    try:
        services.start("dashboard", build)
        supervisor = services.supervisor("dashboard")
        assert supervisor.gave_up.wait(30)
        line = log.wait_for(lambda line: line["event"].startswith("a service cannot start"))
    finally:
        services.stop()
        source.close()
    assert len(builds) == 1  # started once: no restart loop
    assert supervisor.restart_count == 0
    assert line["error"] == (
        f"the dashboard cannot listen on 127.0.0.1:{taken}: the address is in use (another cpe "
        "run?); set [dashboard] listen in supervisor.toml to a free HOST:PORT (port 0: any free "
        'one), or "" to turn the dashboard off'
    )
    assert "restarting" not in [line["event"] for line in log.lines()]
    assert not engine.stopped  # the engine goes on without it


def test_cpe_run_with_its_dashboard_address_taken_exits_78_naming_it(
    tmp_path: Path, taken: int
) -> None:
    toml = GOOD + f'[dashboard]\nlisten = "127.0.0.1:{taken}"\n'
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": toml, "README.md": "x\n"})
    line = one_line_error(cpe("run", cwd=repo), 78)
    assert f"configuration error: the dashboard cannot listen on 127.0.0.1:{taken}" in line
    assert "the address is in use" in line
    assert "set [dashboard] listen in supervisor.toml" in line


def test_prepare_services_refuses_a_chosen_address_in_use_before_the_services_start(
    engine: Engine, tmp_path: Path, taken: int
) -> None:
    config = parse_config({"dashboard": {"listen": f"127.0.0.1:{taken}"}})
    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{taken}: the address is"):
        prepare_services(app_with(engine, tmp_path, config))


def test_demo_serve_on_a_taken_listen_address_exits_78_before_making_anything(
    tmp_path: Path, taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def went_on(*args: object) -> None:
        raise AssertionError("the demo went on with its dashboard unable to listen")

    monkeypatch.setattr(sample_module, "create_sample_repo", went_on)
    out = io.StringIO()
    code = demo_module.demo(tmp_path / "demo", out, serve=f"127.0.0.1:{taken}")
    assert (code, out.getvalue().splitlines()) == (
        78,
        [
            f"cpe demo: configuration error: the dashboard cannot listen on 127.0.0.1:{taken}: "
            "the address is in use (another cpe run?); pass --listen HOST:PORT (port 0: any "
            "free one)"
        ],
    )
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize(
    ("listen", "why"),
    [
        ("192.0.2.1:8765", "this machine has no such address"),  # TEST-NET-1: nobody's
        ("127.0.0.1:{taken}", "the address is in use (another cpe run?)"),
    ],
)
def test_an_address_no_restart_can_make_available_is_a_configuration_error(
    taken: int, listen: str, why: str
) -> None:
    listen = listen.format(taken=taken)
    listener = Listener(listen, way_out="change it")
    with pytest.raises(ConfigError) as raised:
        listener.bind()
    assert str(raised.value) == f"the dashboard cannot listen on {listen}: {why}; change it"


# ---------------------------------------------------------------------------- the default


def test_the_default_address_in_use_gives_way_to_a_free_port_and_the_real_url_is_logged(
    engine: Engine, tmp_path: Path, taken: int, log: Lines
) -> None:
    """What ``cpe run`` does with ``[dashboard] listen`` unset when another cpe holds it."""
    app = app_with(engine, tmp_path, unset_listen(f"127.0.0.1:{taken}"))
    services = prepare_services(app)()
    try:
        listening = log.wait_for(lambda line: line["event"] == "dashboard listening")
        url = listening["url"]
        assert url.startswith("http://127.0.0.1:")
        assert url != f"http://127.0.0.1:{taken}/"
        assert get_state(url)["work_items"][0]["id"] == "1"  # it really listens there
        assert not services.supervisor("dashboard").gave_up.is_set()
    finally:
        services.stop()
        app.close()
    [moved] = [line for line in log.lines() if line["logger"] == "cpe.dashboard"]
    assert (moved["level"], moved["event"]) == (
        "warning",
        "the dashboard's default address is in use; it listens on a free port instead",
    )
    assert (moved["wanted"], moved["url"]) == (f"127.0.0.1:{taken}", url)


def test_demo_serve_without_listen_prints_the_free_port_it_took(
    engine: Engine, tmp_path: Path, taken: int
) -> None:
    app = app_with(engine, tmp_path, parse_config({}))
    out = io.StringIO()
    listener = demo_module._listen(f"127.0.0.1:{taken}", True)
    services = demo_module._serve(app, listener, out)
    try:
        said, shown = out.getvalue().splitlines()
        assert said == f"cpe demo: 127.0.0.1:{taken} is in use; the dashboard took a free port"
        url = shown.removeprefix("cpe demo: dashboard on ")
        assert url == listener.url != f"http://127.0.0.1:{taken}/"
        assert get_state(url)["work_items"][0]["id"] == "1"
    finally:
        services.stop()
        listener.close()


@pytest.mark.parametrize(
    ("argv", "serve", "fallback"),
    [
        (["demo", "--serve"], "127.0.0.1:8765", True),
        (["demo", "--serve", "--listen", "127.0.0.1:8765"], "127.0.0.1:8765", False),
        (["demo", "--serve", "--listen", "127.0.0.1:0"], "127.0.0.1:0", False),
    ],
)
def test_demo_serve_falls_back_only_when_no_listen_address_was_given(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], serve: str, fallback: bool
) -> None:
    asked: list[dict[str, Any]] = []

    def demo(*args: object, **kwargs: Any) -> int:
        asked.append(kwargs)
        return 0

    monkeypatch.setattr(demo_module, "demo", demo)
    assert main(argv) == 0
    [kwargs] = asked
    assert (kwargs["serve"], kwargs["serve_fallback"]) == (serve, fallback)


def test_a_restarted_dashboard_binds_the_port_the_first_one_took(taken: int) -> None:
    listener = Listener(f"127.0.0.1:{taken}", fallback=True)
    first = listener.take()
    port = first.getsockname()[1]
    assert port != taken
    first.close()  # the server crashed
    again = listener.take()
    try:
        assert again.getsockname()[1] == port
        assert listener.url == f"http://127.0.0.1:{port}/"
    finally:
        again.close()


def test_the_default_address_as_cpe_init_writes_it_is_the_default_too() -> None:
    """cpe init writes ``listen = "127.0.0.1:8765"``: two initialised repositories on one
    machine must not make the second ``cpe run`` a configuration error."""
    from adapters.cli.services import dashboard_fallback  # noqa: PLC0415

    written = parse_config({"dashboard": {"listen": "127.0.0.1:8765"}}).dashboard
    chosen = parse_config({"dashboard": {"listen": "127.0.0.1:9999"}}).dashboard
    assert dashboard_fallback(written)
    assert dashboard_fallback(parse_config({}).dashboard)
    assert not dashboard_fallback(chosen)
