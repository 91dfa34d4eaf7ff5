"""The webhook receiver as ``cpe run`` serves it (``prepare_services``), over real HTTP: on the
dashboard's address and on ``[webhooks] listen``'s, which serves ``/hooks/*`` alone; a signed
delivery to either polls the real engine; the refresher stops with the app; a secret variable
unset is a configuration error before anything serves; the rendered log lines never carry the
secret."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.engine import Engine
from adapters.cli.build import App
from adapters.cli.services import prepare_services
from adapters.cli.settings import parse_config
from domain.errors import ConfigError
from tests.actors.conftest import Harness, wait_until
from tests.actors.test_logs import Lines, json_log

SECRET = "served-secret-for-the-tests-42"
SECRET_ENV = "CPE_TEST_SERVED_HOOK_SECRET"


class _AnyId:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)

    __hash__ = None  # type: ignore[assignment]


ANY_ID = _AnyId()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


@pytest.fixture
def log() -> Iterator[Lines]:
    yield from json_log()


@pytest.fixture
def engine(harness: Harness) -> Engine:
    made = harness.engine()
    made.start()
    wait_until(lambda: all(p.cycles >= 1 for p in made.pollers), made)
    return made


def app_with(engine: Engine, tmp_path: Path, **webhooks: Any) -> App:
    config = parse_config(
        {
            "provider": {"kind": "github", "github": {"repository": "octo/hello"}},
            "dashboard": {"listen": "127.0.0.1:0"},
            "webhooks": {"github_secret_env": SECRET_ENV, "min_gap": 0, **webhooks},
        }
    )
    return App(config, tmp_path, "main", tmp_path / "state", engine)


def post(url: str, event: str = "issues", body: bytes = b'{"action":"opened"}') -> tuple[int, Any]:
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid1()),
            "X-Hub-Signature-256": f"sha256={signature}",
            "Host": "hooks.example.com",  # as a reverse proxy passes it on
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def listening(log: Lines, event: str) -> str:
    return str(log.wait_for(lambda line: line["event"] == event)["url"])


def test_hooks_on_their_own_address_and_on_the_dashboards_poll_the_engine(
    engine: Engine, tmp_path: Path, log: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    app = app_with(engine, tmp_path, listen="127.0.0.1:0")
    poller = next(p for p in engine.pollers if p.name == "work_items")
    services = prepare_services(app)()
    try:
        hooks_url = listening(log, "webhooks listening")
        board_url = listening(log, "dashboard listening")
        before = poller.cycles
        assert post(hooks_url + "hooks/github") == (
            202,
            {"accepted": ANY_ID, "polls": ["work_items"]},
        )
        wait_until(lambda: poller.cycles == before + 1, engine)
        assert post(board_url + "hooks/github")[0] == 202
        wait_until(lambda: poller.cycles == before + 2, engine)
        # the hooks' own address serves nothing of the board, for any Host
        for path in ("", "api/state", "metrics"):
            with pytest.raises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(hooks_url + path, timeout=30)
            with missing.value:
                assert missing.value.code == 404
        assert not services.supervisor("webhooks").gave_up.is_set()
    finally:
        services.stop()
        app.close()
    assert not any(t.name == "cpe-webhook-refresher" for t in threading.enumerate())
    lines = log.lines()
    delivered = [line for line in lines if line["event"] == "webhook delivery"]
    assert [line["outcome"] for line in delivered] == ["accepted", "accepted"]
    assert all(line["vendor"] == "github" and line["delivery"] for line in delivered)
    assert SECRET not in json.dumps(lines)


def test_a_secret_variable_unset_is_a_configuration_error_before_anything_serves(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(ConfigError) as refused:
        prepare_services(app_with(engine, tmp_path))
    assert str(refused.value) == (
        f"webhooks.github_secret_env: the environment variable {SECRET_ENV} is not set; expected "
        "the hook's secret in it, or the key left out to take no github deliveries"
    )


def test_a_webhooks_listen_address_in_use_is_a_configuration_error(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(ConfigError, match=r"set \[webhooks\] listen in supervisor.toml"):
            prepare_services(app_with(engine, tmp_path, listen=f"127.0.0.1:{port}"))
