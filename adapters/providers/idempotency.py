"""A hosted provider's create, made once per idempotency key, whatever answer was lost.

A create's key rides in what it makes (a hidden marker in an issue's or a merge request's text).
Before creating, the thing carrying the key is looked for: a crash after the write and before
its acknowledgement left it made. A create whose answer failed is never resent blindly: when
the failure may hide a made write (a transient answer, such as a 502 after the write, or the
vendor's "it exists already"), it is looked for again and taken if found.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from domain.errors import ProviderError

log = logging.getLogger(__name__)

T = TypeVar("T")


def made_after_all(
    exc: ProviderError,
    look: Callable[[], T | None],
    *,
    what: str,
    name: Callable[[T], str],
    exists: int | None = None,
) -> T:
    """What a ``what`` create that failed with ``exc`` made after all, as ``look`` finds it.
    Looked for only when ``exc`` is transient or its status is ``exists`` (the vendor's
    answer for one made already); else, and when ``look`` finds nothing, ``exc`` is raised."""
    if not exc.transient and (exists is None or exc.status != exists):
        raise exc
    found = look()
    if found is None:
        raise exc
    log.info("%s create answered %s but %s exists", what, exc.status, name(found))
    return found


def create_once(
    key: str | None,
    find: Callable[[str], T | None],
    create: Callable[[], T],
    *,
    what: str,
    name: Callable[[T], str],
    after: Callable[[], None],
) -> T:
    """What ``find`` finds carrying ``key`` (made before a crash: what came after it may not
    have been), else what ``create`` makes, then ``after`` (the caller's crashpoint, named
    there for the crash suite to find). Without a key, ``create`` alone."""
    seen = find(key) if key is not None else None
    if seen is not None:
        return seen
    try:
        made = create()
    except ProviderError as exc:
        if key is None:
            raise
        made = made_after_all(exc, lambda: find(key), what=what, name=name)
    after()
    return made
