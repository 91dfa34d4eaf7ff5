"""Merging a pull request, and what GitHub's refusals mean.

GitHub answers 405 for very different things, told apart only by its message:

- **waiting** — branch protection (or a ruleset) wants something not there yet: a required
  check not reported or not green, an approving review, a code owner's review, resolved
  conversations. Retrying at once cannot help; the revision waits (``MergeWaitError``) and the
  engine tries again on the next poll;
- **transient** — "Base branch was modified": the same merge a moment later goes through;
- **merge method** — the repository does not allow merge commits (or squash, or rebase): the
  merge is made with a method it allows, read from its settings;
- **behind** — "Head branch is not up to date with the base branch": branch protection requires
  the head to contain the base's head and it does not (the base moved). The merge queue tests
  the revision again on the new head (``BaseMovedError``); a plain merge reports a conflict;
- anything else ("Pull Request is not mergeable": a conflict) cannot succeed as asked.

The merge commit of a pull request merged earlier (by cpe, whose answer was lost, or by a
person) is read from its timeline: API 2026-03-10 pull requests have no ``merge_commit_sha``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Literal

from adapters.providers.github.api import GitHubApi, MergeMethod
from adapters.providers.github.errors import github_reason
from domain.errors import ConflictError, MergeWaitError, ProviderError

log = logging.getLogger(__name__)

Refusal = Literal["waiting", "transient", "method", "behind", "conflict"]

_WAITING = re.compile(
    r"required status check|status checks? (?:are|is) (?:expected|failing|pending)"
    r"|approving reviews? (?:is|are) required|review is required|code owner"
    r"|waiting on|rule violations|conversations? must be resolved|comments must be resolved",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(r"base branch was modified", re.IGNORECASE)
_METHOD = re.compile(r"(?:merge commits|squash merges|rebase merges) are not allowed", re.I)
_BEHIND = re.compile(r"not up to date with the base branch", re.IGNORECASE)
_METHODS: tuple[MergeMethod, ...] = ("merge", "squash", "rebase")
_NAMES = {"merge": "merge commits", "squash": "squash merges", "rebase": "rebase merges"}


def refusal_kind(message: str) -> Refusal:
    """What a 405 on a merge means, from GitHub's message."""
    if _METHOD.search(message):
        return "method"
    if _TRANSIENT.search(message):
        return "transient"
    if _BEHIND.search(message):
        return "behind"
    if _WAITING.search(message):
        return "waiting"
    return "conflict"


class Merger:
    """Merges pull requests with a method the repository allows (found out once)."""

    def __init__(self, api: GitHubApi) -> None:
        self._api = api
        self._method: MergeMethod = "merge"

    def merge(self, number: int, head_sha: str) -> str:
        """The merge commit; raises the refusal sorted (``refused``) when GitHub says no."""
        try:
            return self._api.merge_pull(number, head_sha, self._method)
        except ProviderError as exc:
            if exc.status != 405 or refusal_kind(str(exc)) != "method":
                raise
            allowed = self._api.merge_methods()
            chosen = next((m for m in _METHODS if allowed.get(m)), None)
            if chosen is None or chosen == self._method:
                raise ConflictError(
                    f"pull request #{number}: the repository allows no merge method cpe uses "
                    f"({github_reason(exc)})",
                    status=405,
                ) from exc
            log.warning(
                "the repository does not allow %s; cpe makes %s from now on",
                _NAMES[self._method],
                _NAMES[chosen],
            )
            self._method = chosen
            return self._api.merge_pull(number, head_sha, chosen)

    def merge_commit(self, number: int) -> str:
        """The merge commit of a merged pull request (its timeline's ``merged`` event)."""
        sha = self._api.merge_commit(number)
        if sha is None:
            # GitHub records the event a moment after the merge: worth asking again.
            raise ProviderError(
                f"pull request #{number} is merged but its timeline names no merge commit yet",
                transient=True,
            )
        return sha


def refused(exc: ProviderError, number: int, files: Callable[[], str], base: str) -> ProviderError:
    """A failed merge as the error the engine acts on: waiting, transient, or a conflict (which
    names the files the revision changes, asked only then)."""
    reason = github_reason(exc)
    if exc.status == 405:
        kind = refusal_kind(reason)
        if kind == "waiting":
            return MergeWaitError(
                f"revision #{number} waits to be merged into {base}: {reason}", reason=reason
            )
        if kind == "transient":
            return ProviderError(
                f"revision #{number}: {reason}", status=405, transient=True, method=exc.method
            )
    if exc.status == 405 or isinstance(exc, ConflictError):
        return ConflictError(
            f"revision #{number} cannot be merged into {base}: {exc}; it changes {files()}",
            status=exc.status,
        )
    return exc
