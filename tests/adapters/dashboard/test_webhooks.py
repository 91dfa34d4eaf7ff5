"""The webhook receiver on the dashboard's app over a real engine (the actor tests' fake provider
and runtime, a real journal; no interval polls), wired as ``cpe run`` wires it
(``webhook_receiver``): a signed GitHub delivery polls the engine and the new item is
dispatched with no interval poll; every refusal (no signature, a wrong one, a stale Linear
timestamp, an oversized body with and without a Content-Length, a wrong content type, a vendor
not configured) and a duplicate and a ping poll nothing; a burst of 100 makes a bounded number of
polls; the hooks are exempt from the loopback Host check and nothing else is; the secret is in
no log line, no answer and not in /metrics; the dispatch delay is measured.

"Polls nothing" is shown on the engine itself: after the refused delivery, a probe delivery for
another poller (a check run: ``revisions``) is accepted and polled; the refresher asks for every
due poller in one call, so once the probe's poll is asked for, a poll the refusal had asked for
would have been too (``min_gap`` 0: none waits) — and the work items poller ran no cycle and has
none queued."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from structlog.testing import capture_logs

from actors.engine import Engine
from adapters.cli.build import App
from adapters.cli.services import dashboard_settings, webhook_receiver
from adapters.cli.settings import CpeConfig, parse_config
from adapters.dashboard.source import Source
from adapters.dashboard.web import create_app
from adapters.host.control import Control, ControlSettings
from adapters.host.webhooks.receiver import WebhookReceiver
from adapters.host.webhooks.refresher import Refresher
from tests.actors.conftest import Harness, wait_until

SECRET = "whsec-for-the-tests-0123456789"
SECRET_ENV = "CPE_TEST_GITHUB_HOOK_SECRET"
LINEAR_SECRET = "linear-secret-for-the-tests"
LINEAR_ENV = "CPE_TEST_LINEAR_HOOK_SECRET"
TOKEN = "t0k3n-for-the-tests"


def config(min_gap: float = 0.0, **webhooks: Any) -> CpeConfig:
    return parse_config(
        {
            "provider": {
                "work_items": {"kind": "github"},
                "revisions": {"kind": "github"},
                "github": {"repository": "octo/hello"},
            },
            "webhooks": {"github_secret_env": SECRET_ENV, "min_gap": min_gap, **webhooks},
        }
    )


class Hooks:
    """A real engine, its dashboard app with the receiver ``cpe run`` would make."""

    def __init__(self, harness: Harness, engine: Engine, cfg: CpeConfig):
        self.harness = harness
        self.engine = engine
        self.app = App(cfg, harness.tmp_path, "main", harness.tmp_path / "state", engine)
        receiver, refresher = webhook_receiver(self.app)
        assert receiver is not None
        assert refresher is not None
        self.receiver: WebhookReceiver = receiver
        self.refresher: Refresher = refresher
        self.source = Source(
            engine,
            dashboard_settings(cfg),
            harness.tmp_path,
            control=Control(engine, ControlSettings(cfg.breaker, cfg.workflow.max_concurrent)),
        )
        self.client = TestClient(
            create_app(self.source, TOKEN, webhooks=receiver), base_url="http://127.0.0.1"
        )
        self.pollers = {poller.name: poller for poller in engine.pollers}

    def close(self) -> None:
        self.source.close()
        self.app.close()

    def cycles(self, name: str = "work_items") -> int:
        return self.pollers[name].cycles

    def polls(self, name: str) -> int:
        return self.receiver.stats.snapshot().polls[name]

    def deliver(
        self,
        event: str = "issues",
        body: bytes | None = None,
        *,
        delivery: str | None = None,
        secret: str = SECRET,
        headers: dict[str, str] | None = None,
        path: str = "/hooks/github",
        **options: Any,
    ) -> Any:
        body = body if body is not None else json.dumps({"action": "labeled"}).encode()
        sent = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/044aadd",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid1()),
            "X-Hub-Signature-256": "sha256="
            + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
        }
        sent.update(headers or {})
        return self.client.post(path, content=body, headers=sent, **options)

    def probe(self) -> None:
        """A check run's delivery, polled: every poll asked for before it was asked too."""
        before = self.polls("revisions")
        assert self.deliver("check_run").status_code == 202
        wait_until(lambda: self.polls("revisions") > before, self.engine)

    def polled_nothing(self, cycles: int) -> None:
        self.probe()
        assert self.polls("work_items") == 0
        assert self.cycles() == cycles
        assert not self.pollers["work_items"].queued.is_set()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


@contextlib.contextmanager
def hooked(harness: Harness, cfg: CpeConfig) -> Iterator[Hooks]:
    engine = harness.engine()
    made = Hooks(harness, engine, cfg)
    engine.start()
    made.refresher.start()
    # the start's first poll of every poller is over
    wait_until(lambda: all(p.cycles >= 1 for p in engine.pollers), engine)
    try:
        with made.client:
            yield made
    finally:
        made.close()


@pytest.fixture
def hooks(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hooks]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with hooked(harness, config()) as made:
        yield made


def test_a_signed_delivery_polls_and_the_new_item_is_dispatched_without_an_interval_poll(
    hooks: Hooks,
) -> None:
    before = hooks.cycles()
    hooks.harness.tracker.add_item("7", "pending", title="Labelled for cpe")
    answer = hooks.deliver("issues", delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert answer.status_code == 202
    assert answer.json() == {
        "accepted": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "polls": ["work_items"],  # the fake provider has no ignored-items reader
    }
    [run] = hooks.harness.runtime.wait_runs(1)
    assert run.params.work_item_id == "7"
    assert hooks.cycles() == before + 1
    wait_until(
        lambda: hooks.engine.get_state().work_items["7"].status == "in-progress", hooks.engine
    )


@pytest.mark.parametrize(
    ("why", "send", "status", "reason"),
    [
        ("no signature", {"headers": {"X-Hub-Signature-256": ""}}, 401, "signature"),
        ("a wrong signature", {"secret": "not-the-secret"}, 401, "signature"),
        ("the sha1 header alone", {"sha1": True}, 401, "signature"),
        (
            "a form body",
            {"headers": {"Content-Type": "application/x-www-form-urlencoded"}},
            415,
            "type",
        ),
        ("no content type", {"headers": {"Content-Type": ""}}, 415, "type"),
        ("a body over the cap", {"big": True}, 413, "size"),
        ("a body over the cap, chunked", {"big": True, "chunked": True}, 413, "size"),
        ("a Content-Length over the cap", {"length": True}, 413, "size"),
        ("no delivery id", {"headers": {"X-GitHub-Delivery": ""}}, 400, "malformed"),
    ],
)
def test_a_refused_delivery_polls_nothing(
    hooks: Hooks, why: str, send: dict[str, Any], status: int, reason: str
) -> None:
    cycles = hooks.cycles()
    body = json.dumps(
        {"action": "opened", "pad": "x" * (2 * 1024 * 1024 if send.get("big") else 0)}
    )
    raw = body.encode()
    headers = dict(send.get("headers", {}))
    if send.get("sha1"):
        sha1 = hmac.new(SECRET.encode(), raw, hashlib.sha1).hexdigest()
        headers.update({"X-Hub-Signature-256": "", "X-Hub-Signature": f"sha1={sha1}"})
    if send.get("length"):
        headers["Content-Length"] = str(10 * 1024 * 1024)
        raw = b"{}"
    if send.get("chunked"):
        answer = hooks.client.post(
            "/hooks/github",
            content=iter([raw[i : i + 65536] for i in range(0, len(raw), 65536)]),
            headers=_signed(raw, headers),
        )
        assert "content-length" not in answer.request.headers
    elif send.get("length"):
        answer = hooks.client.post("/hooks/github", content=raw, headers=_signed(raw, headers))
    else:
        answer = hooks.deliver("issues", raw, secret=send.get("secret", SECRET), headers=headers)
    assert answer.status_code == status, (why, answer.text)
    assert "error" in answer.json()
    snapshot = hooks.receiver.stats.snapshot()
    assert snapshot.refusals[("github", reason)] == 1
    assert snapshot.deliveries[("github", "refused")] == 1
    hooks.polled_nothing(cycles)


def _signed(raw: bytes, headers: dict[str, str]) -> dict[str, str]:
    signed = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid1()),
        "X-Hub-Signature-256": "sha256="
        + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest(),
    }
    signed.update(headers)
    return signed


def test_a_vendor_not_configured_is_404_naming_the_key_and_polls_nothing(hooks: Hooks) -> None:
    cycles = hooks.cycles()
    answer = hooks.client.post(
        "/hooks/linear",
        content=b"{}",
        headers={"Content-Type": "application/json", "Linear-Signature": "00"},
    )
    assert answer.status_code == 404
    assert "[webhooks] linear_secret_env" in answer.json()["error"]
    hooks.polled_nothing(cycles)


def test_a_duplicate_delivery_is_200_and_polls_nothing(hooks: Hooks) -> None:
    first = hooks.deliver("issues", delivery="d-1")
    assert first.status_code == 202
    wait_until(lambda: hooks.polls("work_items") == 1, hooks.engine)
    wait_until(lambda: not hooks.pollers["work_items"].queued.is_set(), hooks.engine)
    wait_until(lambda: hooks.cycles() >= 2, hooks.engine)
    cycles = hooks.cycles()
    again = hooks.deliver("issues", delivery="d-1")
    assert (again.status_code, again.json()) == (200, {"ignored": "already delivered"})
    hooks.probe()
    assert hooks.polls("work_items") == 1
    assert hooks.cycles() == cycles
    assert hooks.receiver.stats.snapshot().deliveries[("github", "duplicate")] == 1


def test_a_delivery_refused_then_sent_again_right_is_taken(hooks: Hooks) -> None:
    """An id is remembered only once accepted: a redelivery of a refused one is not a dup."""
    assert hooks.deliver("issues", delivery="d-2", secret="wrong").status_code == 401
    assert hooks.deliver("issues", delivery="d-2").status_code == 202
    wait_until(lambda: hooks.polls("work_items") == 1, hooks.engine)


def test_githubs_ping_is_200_and_polls_nothing(hooks: Hooks) -> None:
    cycles = hooks.cycles()
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    answer = hooks.deliver("ping", body)
    assert answer.status_code == 200
    assert answer.json() == {"ignored": "ping: nothing cpe polls"}
    hooks.polled_nothing(cycles)


def test_a_burst_of_100_deliveries_makes_a_bounded_number_of_polls(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a gap of a minute: the first delivery polls at once, the 99 others owe one trailing
    poll between them; the engine ran one cycle for the hundred."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with hooked(harness, config(min_gap=60)) as hooks:
        cycles = hooks.cycles()
        for _ in range(100):
            assert hooks.deliver("issues").status_code == 202
        wait_until(lambda: hooks.polls("work_items") == 1, hooks.engine)
        wait_until(lambda: hooks.cycles() == cycles + 1, hooks.engine)
        wait_until(lambda: not hooks.pollers["work_items"].queued.is_set(), hooks.engine)
        assert hooks.refresher.pending() == {"work_items"}  # one trailing poll owed
        assert hooks.receiver.stats.snapshot().deliveries[("github", "accepted")] == 100
        assert hooks.cycles() == cycles + 1


def test_a_burst_with_a_short_gap_polls_at_most_once_a_gap(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    gap = 0.2
    with hooked(harness, config(min_gap=gap)) as hooks:
        started = time.monotonic()
        for _ in range(100):
            assert hooks.deliver("issues").status_code == 202
        took = time.monotonic() - started
        wait_until(lambda: not hooks.refresher.owed(), hooks.engine)
        # at once, one trailing poll a gap, and one follow-up after the last
        assert 2 <= hooks.polls("work_items") <= took / gap + 3


def test_only_the_hooks_are_exempt_from_the_loopback_host_check(hooks: Hooks) -> None:
    outside = TestClient(hooks.client.app, base_url="http://cpe.example.com")
    assert hooks.deliver("issues").status_code == 202
    body = b"{}"
    answer = outside.post("/hooks/github", content=body, headers=_signed(body, {}))
    assert answer.status_code == 202
    assert outside.get("/api/state").status_code == 400
    assert (
        outside.post("/api/pause", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 400
    )
    assert outside.get("/hooks/../api/state").status_code in {400, 404}
    # only the exact paths: a neighbour of one is the board's, Host-checked
    assert (
        outside.post("/hooks/github/", content=body, headers=_signed(body, {})).status_code == 400
    )
    assert outside.post("/hooks/nope", content=body).status_code == 400
    assert hooks.client.post("/hooks/nope", content=body).status_code == 404


def test_the_secret_is_in_no_log_line_answer_or_metric(hooks: Hooks) -> None:
    answers: list[str] = []
    with capture_logs() as logged:
        answers.append(hooks.deliver("issues").text)
        answers.append(hooks.deliver("issues", secret="wrong").text)
        answers.append(hooks.deliver("issues", headers={"X-Hub-Signature-256": ""}).text)
        answers.append(hooks.deliver("push", headers={"Content-Type": "text/plain"}).text)
        answers.append(hooks.deliver("ping").text)
        answers.append(hooks.client.get("/metrics").text)
    said = json.dumps(logged, default=str) + "".join(answers)
    assert any(line.get("event") == "webhook delivery" for line in logged)
    refused = [line for line in logged if line.get("event") == "webhook delivery refused"]
    assert [(r["reason"], r["hook_event"], r["status"]) for r in refused] == [
        ("signature", "issues", 401),
        ("signature", "issues", 401),
        ("type", "push", 415),
    ]
    assert all(r["vendor"] == "github" and r["delivery"] for r in refused)
    assert SECRET not in said
    assert SECRET_ENV not in "".join(answers)


def test_metrics_count_deliveries_refusals_polls_and_the_dispatch_delay(hooks: Hooks) -> None:
    hooks.harness.tracker.add_item("9", "pending")
    assert hooks.deliver("issues").status_code == 202
    hooks.harness.runtime.wait_runs(1)
    wait_until(lambda: hooks.receiver.stats.snapshot().delay_count == 1, hooks.engine)
    assert hooks.deliver("issues", secret="wrong").status_code == 401
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(hooks.client.get("/metrics").text)
        for s in family.samples
    }
    assert (
        samples[("cpe_webhook_deliveries_total", (("outcome", "accepted"), ("vendor", "github")))]
        == 1
    )
    assert (
        samples[("cpe_webhook_deliveries_total", (("outcome", "refused"), ("vendor", "github")))]
        == 1
    )
    assert (
        samples[("cpe_webhook_refusals_total", (("reason", "signature"), ("vendor", "github")))]
        == 1
    )
    assert samples[("cpe_webhook_polls_total", (("poller", "work_items"),))] == 1
    assert samples[("cpe_webhook_dispatch_delay_seconds_count", ())] == 1
    delay = samples[("cpe_webhook_dispatch_delay_seconds", (("quantile", "0.5"),))]
    assert 0 <= delay < 30


def test_a_linear_delivery_with_a_stale_timestamp_polls_nothing(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(LINEAR_ENV, LINEAR_SECRET)
    cfg = parse_config(
        {
            "provider": {
                "work_items": {"kind": "linear"},
                "revisions": {"kind": "github"},
                "linear": {"team": "ENG"},
                "github": {"repository": "octo/hello"},
            },
            "webhooks": {
                "github_secret_env": SECRET_ENV,
                "linear_secret_env": LINEAR_ENV,
                "min_gap": 0,
            },
        }
    )
    with hooked(harness, cfg) as hooks:
        cycles = hooks.cycles()

        def linear(stamp: float) -> Any:
            body = json.dumps(
                {"type": "Issue", "action": "update", "webhookTimestamp": stamp}
            ).encode()
            signature = hmac.new(LINEAR_SECRET.encode(), body, hashlib.sha256).hexdigest()
            return hooks.client.post(
                "/hooks/linear",
                content=body,
                headers={
                    "Content-Type": "application/json; charset=utf-8",
                    "Linear-Signature": signature,
                    "Linear-Delivery": str(uuid.uuid4()),
                    "Linear-Event": "Issue",
                },
            )

        stale = linear((time.time() - 120) * 1000)
        assert stale.status_code == 401
        assert hooks.receiver.stats.snapshot().refusals[("linear", "stale")] == 1
        hooks.polled_nothing(cycles)
        fresh = linear(time.time() * 1000)
        assert fresh.status_code == 200  # Linear counts anything but 200 as a failure
        assert fresh.json()["polls"] == ["work_items"]
        wait_until(lambda: hooks.polls("work_items") == 1, hooks.engine)
        # GitHub is only the forge here: its issue events poll nothing
        assert hooks.deliver("issues").json() == {"ignored": "issues: nothing cpe polls"}
