"""githubkit and pydantic failures translated into ``domain.errors`` at the adapter's edge."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
from githubkit.exception import GitHubException, RequestError, RequestFailed, RequestTimeout
from jwt import PyJWTError
from pydantic import ValidationError

from adapters.providers.github.transport import RETRY_AFTER, is_rate_limited, rate_limit_wait
from domain.errors import ConflictError, NotFoundError, ProviderError

# githubkit's models of request bodies (``ReposOwnerRepoIssuesIssueNumberLabelsPutBodyOneof0``):
# a ValidationError naming one was raised before the request was sent.
_REQUEST_BODY = re.compile(r"(?:Post|Put|Patch|Delete)Body")


def github_message(response: httpx.Response) -> str:
    """GitHub's own ``message`` (and validation ``errors``), else the status line."""
    try:
        data = response.json()
    except ValueError:
        return response.reason_phrase or f"HTTP {response.status_code}"
    if not isinstance(data, dict):
        return response.reason_phrase
    message = str(data.get("message") or response.reason_phrase)
    details = data.get("errors")
    if isinstance(details, list) and details:
        parts = [str(e.get("message") or e) if isinstance(e, dict) else str(e) for e in details]
        message += " (" + "; ".join(parts) + ")"
    return message


def github_reason(exc: ProviderError) -> str:
    """GitHub's own words in a translated error (``merge pull request #3: <words> (status
    405)``)."""
    text = re.sub(r" \(status \d+\)$", "", str(exc))
    return text.split(": ", 1)[1] if ": " in text else text


def translate(exc: Exception, what: str, clock: Callable[[], float] = time.time) -> ProviderError:
    """The domain error for a failed call; ``what`` names the call for the message."""
    if isinstance(exc, RequestFailed):
        response = exc.response.raw_response
        status = response.status_code
        message = f"{what}: {github_message(response)}"
        if status in (404, 410):
            return NotFoundError(message)
        if status == 409:
            return ConflictError(message)
        limited = is_rate_limited(response)
        retry_after: float | None = None
        if limited:  # the transport's judgement (a secondary limit's doubling), else GitHub's
            judged = response.extensions.get(RETRY_AFTER)
            retry_after = (
                float(judged) if judged is not None else rate_limit_wait(response, clock())
            )
        transient = status >= 500 or limited or status == 408
        return ProviderError(message, status=status, retry_after=retry_after, transient=transient)
    if isinstance(exc, RequestTimeout):
        return ProviderError(f"{what}: GitHub did not answer in time", transient=True)
    if isinstance(exc, RequestError) and isinstance(exc.exc, RequestFailed):
        # githubkit wraps what fails while it gets a GitHub App installation token
        failed = translate(exc.exc, f"{what}: GitHub App auth", clock)
        if isinstance(failed, NotFoundError):  # the installation, not the thing asked for
            return ProviderError(str(failed), status=failed.status, transient=False)
        return failed
    if isinstance(exc, RequestError) and isinstance(exc.exc, PyJWTError):
        return ProviderError(
            f"{what}: GitHub App auth: the private key cannot sign a token "
            f"({type(exc.exc).__name__})",
            transient=False,
        )
    if isinstance(exc, RequestError):
        return ProviderError(f"{what}: cannot reach GitHub: {exc.exc}", transient=True)
    if isinstance(exc, ValidationError):
        where = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()[:3]
        )
        if _REQUEST_BODY.search(exc.title):
            # githubkit checks a request's body against GitHub's schema before sending it:
            # nothing reached GitHub, and it is cpe's request that is wrong, not GitHub.
            return ProviderError(
                f"{what}: the GitHub client refused the request before sending it (cpe built "
                f"it against GitHub's schema wrongly): {exc.error_count()} errors ({where})",
                transient=False,
            )
        return ProviderError(
            f"{what}: GitHub's answer did not match its schema: {exc.error_count()} errors "
            f"({where})",
            transient=False,
        )
    return ProviderError(f"{what}: {exc}", transient=False)


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Run a githubkit call (and its lazy parsing) with its errors translated."""
    try:
        yield
    except (GitHubException, ValidationError) as exc:
        raise translate(exc, what) from exc
