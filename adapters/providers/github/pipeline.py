"""A revision's pipeline from GitHub's two CI sources: check runs and commit statuses.

Actions reports check runs; older integrations post commit statuses; a repository may have
both, so both are combined: any failure fails the pipeline, then anything still
running keeps it pending, then all green is success. Neither present means no CI (``none``),
not "pending forever". ``cancelled``, ``timed_out``, ``action_required``, ``stale`` and
``startup_failure`` are not green. A failed pipeline names its failed checks (a check run's
name, a status's context) in ``failed_checks``, for comparison with the default branch's.

A token may not be allowed to read check runs: GitHub offers fine-grained personal access
tokens no Checks permission at all, so on a private repository ``check-runs`` answers 403. That
is read as "no check runs" (statuses still count), said once in the log with the token's kind,
and check runs are not asked for again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from githubkit_schemas.latest.models import CheckRun, SimpleCommitStatus, Status

from adapters.providers.checks import Signal, combine_signals
from domain.errors import ProviderError
from domain.models import Pipeline

if TYPE_CHECKING:
    from adapters.providers.github.api import GitHubApi

log = logging.getLogger(__name__)

_GREEN_CONCLUSIONS = frozenset({"success", "neutral", "skipped"})


def _from_check(run: CheckRun) -> Signal:
    url = run.details_url or run.html_url
    if run.status != "completed":
        return Signal(run.name, "pending", url, run.name)
    conclusion = run.conclusion or "none"
    state = "success" if conclusion in _GREEN_CONCLUSIONS else "failure"
    return Signal(f"{run.name} ({conclusion})", state, url, run.name)


def _from_status(status: SimpleCommitStatus | Status) -> Signal:
    state = {"success": "success", "pending": "pending"}.get(status.state, "failure")
    return Signal(f"{status.context} ({status.state})", state, status.target_url, status.context)


def combine(
    checks: Sequence[CheckRun], statuses: Sequence[SimpleCommitStatus | Status]
) -> Pipeline:
    signals = [_from_check(c) for c in checks] + [_from_status(s) for s in statuses]
    return combine_signals(signals)


_CHECKS_ADVICE = {
    "fine-grained personal access token": (
        "GitHub offers fine-grained personal access tokens no Checks permission"
    ),
    "GitHub App installation token": "the GitHub App was not granted Checks (read)",
}


class PipelineReader:
    """A commit's pipeline, from its check runs and its commit statuses (conditional reads)."""

    def __init__(self, api: GitHubApi) -> None:
        self._api = api
        self._checks_refused = False

    def read(self, sha: str) -> Pipeline:
        statuses, _ = self._api.statuses(sha)
        return combine(self._check_runs(sha), statuses)

    def _check_runs(self, sha: str) -> Sequence[CheckRun]:
        if self._checks_refused:
            return ()
        try:
            runs, _ = self._api.check_runs(sha)
        except ProviderError as exc:
            if exc.status != 403 or exc.transient:  # a rate limit is no refusal
                raise
            self._checks_refused = True
            kind = self._api.token_kind
            why = _CHECKS_ADVICE.get(kind, "the token may not read them")
            log.warning(
                "GitHub refuses to list check runs to this %s (%s): %s. cpe reads commit "
                "statuses only from now on, so CI that reports check runs alone (GitHub "
                "Actions) is not seen; require those checks in branch protection, or use a "
                "classic token or a GitHub App with Checks: read",
                kind,
                exc,
                why,
            )
            return ()
        return runs
