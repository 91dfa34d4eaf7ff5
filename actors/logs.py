"""Logging: structlog everywhere, one pipeline for our lines and the stdlib's.

JSON lines when stderr is not a TTY (production, systemd's journal, files); on a TTY the ``human``
format: the engine's decisions come as one sentence each from the console
(``adapters.host.console``), so the log shows only what a person must see besides them (warnings,
errors, start and stop) as short lines; ``console`` is structlog's key=value renderer, for
debugging. Tracebacks are rendered without frame locals (they would leak secrets). Secrets are
redacted from every line (``adapters.support.redaction``): values under secret-sounding keys, and
values that look like tokens wherever they appear. Loggers of actors bind ``actor``, ``session_id``
and ``work_item_id`` themselves (contextvars do not cross threads).
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import Processor

from adapters.support.redaction import redact

LogFormat = Literal["auto", "json", "console", "human"]

NOISY_LIBRARIES = ("httpx", "httpcore")


def configure_logging(
    level: str = "info",
    fmt: LogFormat = "auto",
    stream: TextIO | None = None,
    *,
    log_file: Path | None = None,
) -> LogFormat:
    """Route every log line to ``stream`` (stderr) in ``fmt``; the format chosen (``auto``
    resolved). With ``log_file``, every line also goes there as JSON (rotated at 10 MB, five
    kept): what a person's terminal leaves out is still on disk."""
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "human" if stream.isatty() else "json"
    console = fmt == "console"
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor
    if console:
        # The traceback is rendered to text before redaction (a token in an exception's
        # message is redacted like any other), plainly: rich's formatter shows frame locals.
        renderer = structlog.dev.ConsoleRenderer(
            colors=stream.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
        final: list[Processor] = [structlog.processors.format_exc_info, redact, renderer]
    elif fmt == "human":
        final = [structlog.processors.format_exc_info, redact, render_human]
    else:
        exceptions = structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        )
        final = [exceptions, redact, structlog.processors.JSONRenderer()]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    if fmt == "human":
        handler.addFilter(_for_a_person)
    handlers: list[logging.Handler] = [handler]
    if log_file is not None:
        handlers.append(_file_handler(log_file, shared))
    root = logging.getLogger()
    for replaced in root.handlers:
        replaced.close()  # a log file's (a stream handler leaves its stream open)
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    # Libraries that log each HTTP request at info (httpx, under githubkit) would fill the log
    # with every poll: their lines show from warning up, or at debug when cpe is at debug.
    for chatty in NOISY_LIBRARIES:
        logging.getLogger(chatty).setLevel("DEBUG" if level.upper() == "DEBUG" else "WARNING")
    structlog.configure(
        # filter_by_level first: a line below the level costs nothing more than the check
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    return fmt


# ---------------------------------------------------------------------------- human

# Info lines a person sees on a terminal, in their words; every other info line is the JSON
# log's (the console narrates the engine's decisions itself).
_SAID: dict[str, str] = {
    "engine starting": "cpe started ({restored_events} journaled events restored)",
    "shutdown initiated": "stopping: {reason}",
    "shutdown complete": "stopped",
    "dashboard listening": "dashboard on {url}",
    "signal received; stopping": "{signal}: stopping",
    "configuration reloaded": "configuration reloaded from {path} (applied: {applied})",
    "log file": "the whole log goes to {path}",
}
# Warnings the console already says in a sentence of its own.
_NARRATED = frozenset({"agent run failed"})


def _event_of(record: logging.LogRecord) -> str | None:
    message = record.msg
    return message.get("event") if isinstance(message, dict) else record.getMessage()


def _file_handler(path: Path, shared: list[Processor]) -> logging.Handler:
    path.parent.mkdir(parents=True, exist_ok=True)
    exceptions = structlog.processors.ExceptionRenderer(
        structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            exceptions,
            redact,
            structlog.processors.JSONRenderer(),
        ],
    )
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8"
    )
    handler.setFormatter(formatter)
    return handler


def _listed(value: object) -> object:
    """A list said as words: ``a, b``, or ``nothing`` when empty."""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "nothing"
    return value


def _for_a_person(record: logging.LogRecord) -> bool:
    if record.name == "asyncio":
        # asyncio's own complaints at a shutdown ("Task was destroyed but it is pending!",
        # "Unknown child process pid …") are no news for a person: the log file has them.
        return False
    event = _event_of(record)
    if event in _NARRATED:
        return False
    return record.levelno >= logging.WARNING or event in _SAID


def render_human(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> str:
    """``03:04:05  warning: provider API error (poller=work_items, error=…)``; a known info
    line in its own words."""
    stamp = str(event_dict.pop("timestamp", ""))[11:19]
    level = str(event_dict.pop("level", "info"))
    event = str(event_dict.pop("event", ""))
    for key in ("logger", "actor"):
        event_dict.pop(key, None)
    trace = event_dict.pop("exception", None)
    template = _SAID.get(event)
    if template is not None and level == "info":
        words = {k: _listed(v) for k, v in event_dict.items()}
        try:
            return f"{stamp}  {template.format_map(words)}"
        except (KeyError, IndexError, ValueError):
            pass
    fields = ", ".join(f"{k}={' '.join(str(v).split())[:300]}" for k, v in event_dict.items())
    line = f"{stamp}  {level}: {event}" + (f" ({fields})" if fields else "")
    return f"{line}\n{trace}" if trace else line
