"""Logging: JSON lines off a TTY, secrets redacted, stdlib routed, tracebacks without locals."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from actors.logs import REDACTED, configure_logging, redact_value


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging("debug", "auto", out)
    yield out
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_off_a_tty_every_line_is_json_with_bound_context(stream: io.StringIO) -> None:
    log = structlog.get_logger("cpe.test").bind(actor="engine", work_item_id="7")
    log.info("agent dispatched", session_id="s1")
    [line] = lines(stream)
    assert line["event"] == "agent dispatched"
    assert (line["actor"], line["work_item_id"], line["session_id"]) == ("engine", "7", "s1")
    assert line["level"] == "info"
    assert "timestamp" in line


def test_secrets_are_redacted_by_key_and_by_shape(stream: io.StringIO) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    structlog.get_logger("t").info(
        "calling github",
        github_token="plain-value",
        detail=f"Authorization: token {token}",
        nested={"api_key": "k", "ok": "fine"},
    )
    text = stream.getvalue()
    assert token not in text
    assert "plain-value" not in text
    [line] = lines(stream)
    assert line["github_token"] == REDACTED
    assert line["nested"] == {"api_key": REDACTED, "ok": "fine"}


def test_stdlib_logging_goes_through_the_same_pipeline(stream: io.StringIO) -> None:
    logging.getLogger("httpx").warning("retrying %s with sk-%s", "POST", "x" * 30)
    [line] = lines(stream)
    assert line["logger"] == "httpx"
    assert line["event"] == f"retrying POST with {REDACTED}"


def test_tracebacks_carry_no_frame_locals(stream: io.StringIO) -> None:
    def fail() -> None:
        password_in_a_local = "hunter2-very-secret"  # noqa: F841 - the test looks for it
        raise RuntimeError("boom")

    try:
        fail()
    except RuntimeError:
        structlog.get_logger("t").exception("it failed")
    assert "hunter2-very-secret" not in stream.getvalue()
    [line] = lines(stream)
    assert "RuntimeError" in json.dumps(line["exception"])


def test_redact_value_leaves_plain_text_alone() -> None:
    assert redact_value("work item 12 is done") == "work item 12 is done"
