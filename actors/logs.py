"""Logging: structlog everywhere, one pipeline for our lines and the stdlib's.

JSON lines when stderr is not a TTY (production, systemd's journal), the console renderer on a
TTY. Tracebacks are rendered without frame locals (they would leak secrets). Secrets are
redacted from every line: values under secret-sounding keys, and values that look like tokens
wherever they appear. Loggers of actors bind ``actor``, ``session_id`` and ``work_item_id``
themselves (contextvars do not cross threads).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import Processor

LogFormat = Literal["auto", "json", "console"]
REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(token|secret|password|passwd|api[_-]?key|authorization|credential|private[_-]?key|cookie)",
    re.IGNORECASE,
)
_TOKEN_VALUE = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{16,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
    r"\.[A-Za-z0-9_-]{10,}|Bearer\s+[A-Za-z0-9._~+/-]{16,})"
)


def redact_value(value: object) -> object:
    if isinstance(value, str):
        return _TOKEN_VALUE.sub(REDACTED, value)
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if _SECRET_KEY.search(str(k)) else redact_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value


def redact(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: no secret leaves in a log line."""
    for key in list(event_dict):
        if _SECRET_KEY.search(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = redact_value(event_dict[key])
    return event_dict


def configure_logging(
    level: str = "info", fmt: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    stream = stream or sys.stderr
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
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
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
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
