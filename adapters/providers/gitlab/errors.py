"""python-gitlab and requests failures translated into ``domain.errors`` at the adapter's edge.

GitLab's refusals are ``{"message": ...}`` bodies, the message a string, a list, or (a 400 on a
create) a mapping of field to complaints; python-gitlab raises them as ``GitlabHttpError`` (or a
``Gitlab<Verb>Error`` of the same status) without the response's headers, so the wait a 429
asked for comes from the transport (``retry_after``). No message carries the token: GitLab's
words and the request's path hold none, and ``scrub`` takes it out of anything else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit

import requests
from gitlab.exceptions import GitlabError, GitlabParsingError, RedirectError

from adapters.providers.gitlab.transport import ForeignHostError
from domain.errors import ConflictError, NotFoundError, ProviderError


def _words(message: object) -> str:
    """GitLab's ``message`` as one line: ``title: can't be blank; labels: is invalid``."""
    if isinstance(message, dict):
        parts = []
        for key, value in message.items():
            told = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"{key}: {told}" if key not in ("base", "error") else told)
        return "; ".join(parts)
    if isinstance(message, list):
        return "; ".join(map(str, message))
    if isinstance(message, bytes):
        return message.decode("utf-8", "replace")
    return str(message)


def gitlab_message(exc: GitlabError) -> str:
    """GitLab's own words in a failure, else the status."""
    words = _words(exc.error_message).strip()
    if words.startswith(("{", "[")) or not words:
        words = words or (f"HTTP {exc.response_code}" if exc.response_code else "no answer")
    # A message GitLab sends as ``"404 Project Not Found"`` repeats the status: keep the words.
    return re.sub(r"^\d{3} ", "", words)


def gitlab_reason(exc: ProviderError) -> str:
    """GitLab's own words in a translated error (``create label 'x': <words> (status 403)``)."""
    text = re.sub(r" \(status \d+\)$", "", str(exc))
    return text.split(": ", 1)[1] if ": " in text else text


def scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def translate(
    exc: Exception,
    what: str,
    *,
    retry_after: float | None = None,
    secrets: Sequence[str] = (),
) -> ProviderError:
    """The domain error for a failed call; ``what`` names the call for the message,
    ``retry_after`` the wait the transport judged a 429 to ask for."""
    if isinstance(exc, GitlabError) and exc.response_code is not None:
        status = exc.response_code
        message = scrub(f"{what}: {gitlab_message(exc)}", secrets)
        if status in (404, 410):
            return NotFoundError(message)
        if status == 409:
            return ConflictError(message)
        limited = status == 429
        transient = status >= 500 or limited or status == 408
        return ProviderError(
            message,
            status=status,
            retry_after=retry_after if limited else None,
            transient=transient,
        )
    if isinstance(exc, RedirectError):
        return ProviderError(f"{what}: GitLab redirected a write elsewhere", transient=False)
    if isinstance(exc, GitlabParsingError):
        return ProviderError(f"{what}: GitLab's answer was not JSON", transient=True)
    if isinstance(exc, ForeignHostError):
        return ProviderError(scrub(f"{what}: {exc}", secrets), transient=False)
    if isinstance(exc, requests.Timeout):
        return ProviderError(f"{what}: GitLab did not answer in time", transient=True)
    if isinstance(exc, requests.RequestException):
        where = _instance(exc)
        return ProviderError(
            scrub(f"{what}: cannot reach GitLab{where}: {type(exc).__name__}", secrets),
            transient=True,
        )
    return ProviderError(scrub(f"{what}: {exc}", secrets), transient=False)


def _instance(exc: requests.RequestException) -> str:
    """`` at <scheme>://<host>`` of the request that failed (never its path or query), so a
    person sees which address was unreachable; empty when the error names no request."""
    url = getattr(exc.request, "url", None) if exc.request is not None else None
    if not url:
        return ""
    parts = urlsplit(url)
    return f" at {parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"


@contextmanager
def translated(
    what: str,
    *,
    retry_after: Callable[[], float | None] = lambda: None,
    secrets: Sequence[str] = (),
) -> Iterator[None]:
    """Run a python-gitlab call with its errors translated."""
    try:
        yield
    except (GitlabError, requests.RequestException) as exc:
        raise translate(exc, what, retry_after=retry_after(), secrets=secrets) from exc
