"""Secrets out of what cpe shows: log lines, the console, the control socket and the dashboard.

Values under secret-sounding keys, and values that look like tokens wherever they appear, become
:data:`REDACTED`. ``redact`` is the structlog processor every log line goes through
(``actors.logs``); ``redact_value`` is for any other output a person sees (a run's live output,
a value on a page). A run's own records are redacted apart, by
``adapters.runtime.workspace.redaction``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

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
