"""Linear's error answers, as its API sends them.

Every error is an entry of the GraphQL ``errors`` array whose ``extensions`` carry Linear's
``type`` (the lower-case words its SDK maps to ``LinearErrorType``: ``authentication error``,
``ratelimited``, ``invalid input``, ``forbidden``, ``graphql error``...), a ``code``
(``AUTHENTICATION_ERROR``, ``RATELIMITED``, ``INPUT_ERROR``, ``GRAPHQL_VALIDATION_FAILED``...),
``statusCode``, ``userError`` and ``userPresentableMessage`` (what the SDK shows first).

HTTP status: Linear answers an error with HTTP 400 and puts the status it means in
``extensions.statusCode`` (a RATELIMITED answer is HTTP 400 with ``statusCode`` 429); the fake
answers 400 whenever ``errors`` is not empty. A client must read the body, not the status.

``FAKE_NOT_IMPLEMENTED`` is the fake's own code: an argument, input field or filter key that
Linear's schema has (so a document using it validates) but that the fake does not model is
refused with it rather than ignored.
"""

from __future__ import annotations

from typing import Any

FAKE_NOT_IMPLEMENTED = "FAKE_NOT_IMPLEMENTED"


class LinearError(Exception):
    """One entry of ``errors``; raised by resolvers (graphql-core keeps it as the original
    error) and by the server before execution."""

    def __init__(
        self,
        message: str,
        *,
        type: str = "invalid input",
        code: str = "INPUT_ERROR",
        status_code: int = 400,
        presentable: str | None = None,
        user_error: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.extensions: dict[str, Any] = {
            "type": type,
            "code": code,
            "statusCode": status_code,
            "userError": user_error,
            "userPresentableMessage": presentable or message,
            **(extra or {}),
        }

    def entry(self, path: list[str | int] | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"message": self.message, "extensions": self.extensions}
        if path:
            entry["path"] = path
        return entry


def not_found(kind: str) -> LinearError:
    """An id (or identifier) that names nothing: Linear's ``Entity not found: Issue``."""
    return LinearError(
        f"Entity not found: {kind}",
        presentable=f"Could not find referenced {kind.lower()}.",
    )


def invalid(message: str, presentable: str | None = None) -> LinearError:
    """Input Linear refuses (``Argument Validation Error`` and the like)."""
    return LinearError(message, presentable=presentable)


def not_implemented(what: str) -> LinearError:
    return LinearError(
        f"the fake Linear does not implement {what}",
        code=FAKE_NOT_IMPLEMENTED,
        type="invalid input",
    )


def authentication(message: str, presentable: str) -> LinearError:
    return LinearError(
        message,
        type="authentication error",
        code="AUTHENTICATION_ERROR",
        status_code=401,
        presentable=presentable,
    )


def forbidden(message: str) -> LinearError:
    return LinearError(message, type="forbidden", code="FORBIDDEN", status_code=403)


def ratelimited(what: str) -> LinearError:
    return LinearError(
        "Rate limit exceeded",
        type="ratelimited",
        code="RATELIMITED",
        status_code=429,
        presentable=f"Rate limit exceeded: too many {what} for this token. Try again later.",
        extra={"meta": {"rateLimitResult": what}},
    )
