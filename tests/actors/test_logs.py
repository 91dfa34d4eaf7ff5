"""Logging: JSON lines off a TTY, the console renderer on one, secrets redacted, stdlib routed,
tracebacks without locals, the fields real actors bind, stamps in UTC, HTTP libraries kept quiet,
and the human format's lines word for word."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import select
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.tracebacks import ExceptionDictTransformer

from actors.base import SupervisedActor
from actors.journal import Journal
from actors.logs import NOISY_LIBRARIES, REDACTED, configure_logging, redact_value
from actors.queue import Inbox
from actors.session_actor import AgentSession
from actors.session_registry import SessionManager
from actors.streams import StreamRegistry
from domain.models import ImplementorStartParams, SessionId
from tests.fakes.runtime import FakeRuntime, Script


class Lines(io.TextIOBase):
    """A log stream (not a TTY) that keeps what is written and lets a test wait for a line;
    thread-safe, unlike ``structlog.testing.capture_logs``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._text = ""

    def write(self, text: str) -> int:
        with self._cond:
            self._text += text
            self._cond.notify_all()
        return len(text)

    def writable(self) -> bool:
        return True

    def getvalue(self) -> str:
        with self._cond:
            return self._text

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines() if line.strip()]

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = 30) -> Any:
        found: list[dict[str, Any]] = []

        def seen() -> bool:
            found[:] = [line for line in self.lines() if match(line)]
            return bool(found)

        with self._cond:
            assert self._cond.wait_for(seen, timeout), "the log line did not come"
        return found[0]


class _Discard(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)

    def writable(self) -> bool:
        return True


def _quiet() -> None:
    """Back to what tests/conftest.py set up for the session: JSON into a sink."""
    configure_logging("info", "json", _Discard())


def json_log() -> Iterator[Lines]:
    """The log as JSON lines a test reads (a fixture's body), quiet again after it."""
    out = Lines()
    configure_logging("info", "json", out)
    yield out
    _quiet()


@pytest.fixture
def configure() -> Iterator[Callable[..., None]]:
    yield configure_logging
    _quiet()


@pytest.fixture
def stream(configure: Callable[..., None]) -> Lines:
    out = Lines()
    configure("debug", "auto", out)
    return out


def test_off_a_tty_every_line_is_json_with_bound_context(stream: Lines) -> None:
    log = structlog.get_logger("cpe.test").bind(actor="engine", work_item_id="7")
    log.info("agent dispatched", session_id="s1")
    [line] = stream.lines()
    assert line["event"] == "agent dispatched"
    assert (line["actor"], line["work_item_id"], line["session_id"]) == ("engine", "7", "s1")
    assert line["level"] == "info"
    assert "timestamp" in line


def _read_tty(master: int) -> str:
    text = b""
    while not text.endswith(b"\n"):
        ready, _, _ = select.select([master], [], [], 30)
        assert ready, "nothing was written to the terminal"
        text += os.read(master, 65536)
    return text.decode()


def test_on_a_tty_the_human_format_shows_what_a_person_must_see(
    configure: Callable[..., None],
) -> None:
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            assert tty.isatty()
            configure("info", "auto", tty)
            log = structlog.get_logger("cpe.test")
            log.info("agent dispatched", work_item_id="7")  # the console's to say
            log.warning("provider API error", poller="work_items", error="502")
            _quiet()  # before the terminal closes
        text = _read_tty(master)
    finally:
        os.close(master)
    assert "agent dispatched" not in text
    [line] = text.splitlines()
    assert line[8:] == "  warning: provider API error (poller=work_items, error=502)"
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_the_human_format_says_a_known_info_line_in_words(configure: Callable[..., None]) -> None:
    out = Lines()
    configure("info", "human", out)
    structlog.get_logger("cpe.test").info("shutdown initiated", reason="signal SIGTERM")
    structlog.get_logger("cpe.test").info("change detected", poller="specs")
    assert out.getvalue()[8:] == "  stopping: signal SIGTERM\n"


def test_off_a_tty_the_same_line_is_json(stream: Lines) -> None:
    assert not stream.isatty()
    structlog.get_logger("cpe.test").info("agent dispatched", work_item_id="7")
    assert "\x1b[" not in stream.getvalue()
    [line] = stream.lines()
    assert (line["event"], line["work_item_id"]) == ("agent dispatched", "7")


def test_secrets_are_redacted_by_key_and_by_shape(stream: Lines) -> None:
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
    [line] = stream.lines()
    assert line["github_token"] == REDACTED
    assert line["nested"] == {"api_key": REDACTED, "ok": "fine"}


def test_stdlib_logging_goes_through_the_same_pipeline(stream: Lines) -> None:
    logging.getLogger("httpx").warning("retrying %s with sk-%s", "POST", "x" * 30)
    [line] = stream.lines()
    assert line["logger"] == "httpx"
    assert line["event"] == f"retrying POST with {REDACTED}"


# Built at run time, so that no source line a traceback quotes contains it: it can only reach
# the output as the value of a frame local.
MARKER = "-".join(["plain", "marker", "4711"])


@pytest.mark.parametrize("fmt", ["json", "console", "human"])
def test_tracebacks_carry_no_frame_locals(configure: Callable[..., None], fmt: str) -> None:
    out = Lines()
    configure("debug", fmt, out)

    def fail() -> None:
        harmless = MARKER  # an innocent name and value: nothing redacts it
        raise RuntimeError(f"boom ({len(harmless)})")

    try:
        fail()
    except RuntimeError as exc:
        structlog.get_logger("t").exception("it failed")
        caught = exc
    text = out.getvalue()
    assert "RuntimeError" in text
    assert "boom (17)" in text
    assert "fail" in text  # the frame is there, only without its locals
    assert MARKER not in text
    # the test can fail: the local is there to be shown, and redaction would let it through
    assert redact_value(MARKER) == MARKER
    with_locals = ExceptionDictTransformer(show_locals=True)(
        (type(caught), caught, caught.__traceback__)
    )
    assert MARKER in json.dumps(with_locals, default=str)


@pytest.mark.parametrize("fmt", ["json", "console", "human"])
@pytest.mark.parametrize("via", ["structlog", "stdlib"])
def test_a_token_in_an_exception_message_is_redacted(
    configure: Callable[..., None], fmt: str, via: str
) -> None:
    """On a terminal too: the traceback is rendered after redaction would be too late."""
    token = "ghp_" + "A1b2C3d4" * 5  # built here: no source line a traceback quotes holds it
    out = Lines()
    configure("debug", fmt, out)
    try:
        raise RuntimeError(f"GitHub refused {token}")
    except RuntimeError:
        if via == "structlog":
            structlog.get_logger("t").exception("it failed")
        else:
            logging.getLogger("t").exception("it failed")
    text = out.getvalue()
    assert "GitHub refused" in text
    assert token not in text
    assert "[redacted]" in text


def test_redact_value_leaves_plain_text_alone() -> None:
    assert redact_value("work item 12 is done") == "work item 12 is done"


# ---------------------------------------------------------------------------- real actors


class Crashing(SupervisedActor):
    def on_receive(self, message: Any) -> Any:
        raise RuntimeError("injected")


def test_an_actors_lines_carry_its_name(stream: Lines) -> None:
    reported = threading.Event()
    ref = Crashing.start(child_id="poller:work_items", report=lambda c, g, e: reported.set())
    ref.tell("go")
    line = stream.wait_for(lambda line: line["event"] == "actor crashed")
    assert reported.wait(30)
    assert line["actor"] == "poller:work_items"
    assert line["level"] == "error"


def test_a_sessions_lines_carry_its_session_and_work_item(stream: Lines, tmp_path: Path) -> None:
    sid = SessionId("implementor-9")
    params = ImplementorStartParams(session_id=sid, work_item_id="42", branch_name="cpe/42")
    journal = Journal(tmp_path / "j.sqlite3")
    sessions = SessionManager()
    sessions.add(sid, params)
    finished = threading.Event()
    AgentSession.start(
        session_id=sid,
        params=params,
        adapter=FakeRuntime(Script(auto=lambda p: None)),
        max_duration=60,
        inbox=Inbox(journal),
        sessions=sessions,
        streams=StreamRegistry(),
        on_finished=finished.set,
        child_id=f"session:{sid}",
    )
    line = stream.wait_for(lambda line: line["event"] == "agent run ended")
    assert finished.wait(30)
    assert (line["actor"], line["session_id"], line["work_item_id"]) == (
        f"session:{sid}",
        sid,
        "42",
    )
    assert line["outcome"] == "ImplementorCompleted"


# ---------------------------------------------------------------------------- the pipeline


def test_by_default_info_and_up_go_to_stderr_as_json_lines(
    configure: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """``cpe run`` passes no stream: its log is stderr, JSON off a terminal (the format it
    resolved is returned, for the CLI to tell the console what the log shows)."""
    assert configure() == "json"
    log = structlog.get_logger("cpe.test")
    log.debug("not at info")
    log.info("agent dispatched", work_item_id="7")
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = [json.loads(text) for text in captured.err.splitlines()]
    assert (line["event"], line["level"], line["logger"]) == (
        "agent dispatched",
        "info",
        "cpe.test",
    )
    assert configure("info", "auto") == "json"


def test_a_line_is_stamped_in_utc_to_the_microsecond(stream: Lines) -> None:
    """ISO 8601 with a ``Z``: lines from machines in other time zones sort together."""
    structlog.get_logger("cpe.test").info("agent dispatched")
    logging.getLogger("httpx").warning("retrying")
    for line in stream.lines():
        stamp = line["timestamp"]
        assert stamp.endswith("Z"), stamp
        when = datetime.fromisoformat(stamp.removesuffix("Z") + "+00:00")
        assert abs(datetime.now(UTC) - when) < timedelta(minutes=5)


def test_a_fresh_process_needs_nothing_but_configure_logging(configure: Callable[..., Any]) -> None:
    """structlog's own defaults (print to stdout, its console renderer) are replaced whole: the
    first line of a new process is already JSON in the stream given."""
    structlog.reset_defaults()
    out = Lines()
    configure("info", "json", out)
    structlog.get_logger("cpe.test").bind(actor="engine").info("engine starting", restored_events=2)
    [line] = out.lines()
    assert line["event"] == "engine starting"
    assert (line["logger"], line["actor"], line["restored_events"]) == ("cpe.test", "engine", 2)


@pytest.mark.parametrize("noisy", NOISY_LIBRARIES)
def test_http_libraries_log_from_warning_up_unless_cpe_is_at_debug(
    configure: Callable[..., Any], noisy: str
) -> None:
    """httpx logs every request at info: at info each poll would fill the log."""
    out = Lines()
    configure("info", "json", out)
    logging.getLogger(noisy).info("HTTP Request: GET https://api.github.com 200")
    logging.getLogger(noisy).warning("retrying")
    structlog.get_logger("cpe.test").info("change detected")
    assert [line["event"] for line in out.lines()] == ["retrying", "change detected"]

    out = Lines()
    configure("debug", "json", out)
    logging.getLogger(noisy).debug("connect_tcp.started")
    assert [line["event"] for line in out.lines()] == ["connect_tcp.started"]


# ---------------------------------------------------------------------------- console and human


def test_the_console_format_writes_key_value_pairs_not_json(configure: Callable[..., Any]) -> None:
    out = Lines()
    configure("info", "console", out)
    structlog.get_logger("cpe.test").info("agent dispatched", work_item_id="7")
    text = out.getvalue()
    assert "agent dispatched" in text
    assert "work_item_id=7" in text
    assert "[cpe.test]" in text
    assert "\x1b[" not in text  # no colours into a file
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_the_console_format_is_coloured_on_a_terminal(configure: Callable[..., Any]) -> None:
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            configure("info", "console", tty)
            structlog.get_logger("cpe.test").info("agent dispatched", work_item_id="7")
            _quiet()
        text = _read_tty(master)
    finally:
        os.close(master)
    assert "agent dispatched" in text
    assert "\x1b[" in text


def _human(configure: Callable[..., Any]) -> Lines:
    out = Lines()
    configure("info", "human", out)
    return out


def _said(out: Lines) -> list[str]:
    """The lines, each log line without its ``HH:MM:SS`` stamp (a traceback's lines have none)."""
    return [STAMP.sub("", line) for line in out.getvalue().splitlines()]


STAMP = re.compile(r"^\d\d:\d\d:\d\d(?=  )")


def test_the_human_format_leaves_out_what_the_console_says_itself(
    configure: Callable[..., Any],
) -> None:
    """A failed agent run is the console's sentence; the log would say it twice."""
    out = _human(configure)
    log = structlog.get_logger("cpe.engine").bind(actor="engine")
    log.warning("agent run failed", session_id="implementor-1", reason="exit 1")
    log.warning("provider API error", poller="work_items", error="502")
    assert _said(out) == ["  warning: provider API error (poller=work_items, error=502)"]


def test_the_human_format_names_no_logger_nor_actor_and_no_empty_brackets(
    configure: Callable[..., Any],
) -> None:
    out = _human(configure)
    structlog.get_logger("cpe.actor").bind(actor="poller:specs").error("actor crashed")
    assert _said(out) == ["  error: actor crashed"]


def test_the_human_format_says_a_known_event_in_words_only_at_info(
    configure: Callable[..., Any],
) -> None:
    out = _human(configure)
    log = structlog.get_logger("cpe.test")
    log.info("shutdown initiated", reason="signal SIGTERM")
    log.warning("shutdown initiated", reason="signal SIGTERM")
    log.info("engine starting")  # its template's field is missing: said as it is
    assert _said(out) == [
        "  stopping: signal SIGTERM",
        "  warning: shutdown initiated (reason=signal SIGTERM)",
        "  info: engine starting",
    ]


def test_the_human_format_puts_a_value_on_one_line_of_at_most_300_characters(
    configure: Callable[..., Any],
) -> None:
    out = _human(configure)
    structlog.get_logger("cpe.test").warning(
        "pipeline failed", output="FAILED test_a\n   FAILED  test_b\n", log="x" * 400
    )
    assert _said(out) == [
        f"  warning: pipeline failed (output=FAILED test_a FAILED test_b, log={'x' * 300})"
    ]


def test_the_human_format_puts_a_traceback_under_its_line(configure: Callable[..., Any]) -> None:
    out = _human(configure)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger("cpe.test").exception("it failed", work_item_id="7")
    first, *trace = _said(out)
    assert first == "  error: it failed (work_item_id=7)"
    assert trace[0] == "Traceback (most recent call last):"
    assert trace[-1] == "RuntimeError: boom"


def _file_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_asyncios_complaints_stay_off_a_persons_terminal_and_go_to_the_log_file(
    configure: Callable[..., Any], tmp_path: Path
) -> None:
    """At a shutdown asyncio says "Task was destroyed but it is pending!" and "Unknown child
    process": no news for a person, kept on disk."""
    out = Lines()
    log_file = tmp_path / "logs" / "cpe.log"
    configure("info", "human", out, log_file=log_file)
    logging.getLogger("asyncio").error("Task was destroyed but it is pending!")
    logging.getLogger("asyncio").warning("Unknown child process pid 4242, will report 255")
    structlog.get_logger("cpe.test").warning("provider API error", error="502")
    assert _said(out) == ["  warning: provider API error (error=502)"]
    said = [(line["logger"], line["event"]) for line in _file_lines(log_file)]
    assert said == [
        ("asyncio", "Task was destroyed but it is pending!"),
        ("asyncio", "Unknown child process pid 4242, will report 255"),
        ("cpe.test", "provider API error"),
    ]


def test_the_log_file_keeps_every_line_a_terminal_leaves_out_as_json_redacted(
    configure: Callable[..., Any], tmp_path: Path
) -> None:
    out = Lines()
    log_file = tmp_path / "cpe.log"
    configure("info", "human", out, log_file=log_file)
    log = structlog.get_logger("cpe.poller").bind(actor="poller:work_items")
    log.info("change detected", id="7", token="ghp_" + "a" * 36)
    log.debug("below the level")
    assert _said(out) == []  # an info line a person is not told
    [line] = _file_lines(log_file)
    assert line["event"] == "change detected"
    assert line["actor"] == "poller:work_items"
    assert line["level"] == "info"
    assert "ghp_" not in log_file.read_text()


def test_a_reload_is_said_with_what_it_applied(configure: Callable[..., Any]) -> None:
    """SIGHUP's success was silent on a terminal: it says where from and what it applied."""
    out = _human(configure)
    log = structlog.get_logger("cpe.cli")
    log.info("configuration reloaded", path="/r/supervisor.toml", applied=["a.b", "c"])
    log.info("configuration reloaded", path="/r/supervisor.toml", applied=[])
    assert _said(out) == [
        "  configuration reloaded from /r/supervisor.toml (applied: a.b, c)",
        "  configuration reloaded from /r/supervisor.toml (applied: nothing)",
    ]
