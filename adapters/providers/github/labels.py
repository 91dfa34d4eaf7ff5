"""The six ``status:`` labels, made sure of at start.

GitHub creates a label the first time an issue is given it, but only for a token that may
create labels: a triage user may apply labels, not create them, and a new issue's labels from
someone without push access are dropped without a word. So cpe lists the repository's labels at
start and creates the status labels it lacks; when the token may not, cpe stops at start with
one line naming the permission instead of failing on the first status change. Labels that exist
are applied after an issue is created when GitHub dropped them from the create.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from adapters.providers.github import markers
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.errors import github_reason
from domain.errors import ConfigError, ProviderError
from domain.models import STATUSES, Status

log = logging.getLogger(__name__)

STATUS_LABELS: dict[Status, tuple[str, str]] = {
    "pending": ("ededed", "cpe: waiting to be worked on"),
    "in-progress": ("1d76db", "cpe: an implementor is working on it"),
    "in-review": ("fbca04", "cpe: its pull request is being checked and reviewed"),
    "needs-refinement": ("d93f0b", "cpe: CI or the review asked for changes"),
    "approved": ("0e8a16", "cpe: reviewed and approved"),
    "blocked": ("b60205", "cpe: waits for a person"),
}
assert set(STATUS_LABELS) == set(STATUSES) - {"done"}  # done is a closed issue, no label
ADMIT_LABEL = ("5319e7", "cpe: a trusted person admits this issue as work")

_NEEDS = {
    "fine-grained personal access token": "the Issues permission (read and write)",
    "GitHub App installation token": "the Issues permission (read and write)",
}
_NEEDS_DEFAULT = "write access to the repository (a triage role may apply labels, not create them)"


class Labels:
    """The status labels made sure of once; other labels applied as far as the token may."""

    def __init__(self, api: GitHubApi, admit_label: str = "") -> None:
        self._api = api
        # The label a trusted person admits a stranger's issue with
        # (adapters/providers/github/trust.py): made at start too, so a triager may apply it
        # (applying takes triage, creating write).
        self._admit = admit_label.strip()
        self._lock = threading.Lock()
        self._ensured = False

    def ensure_status_labels(self) -> None:
        """Create the status labels the repository lacks. A token that may not create them is
        a ``ConfigError`` (cpe cannot work without them)."""
        with self._lock:
            if self._ensured:
                return
            known = {label.name.strip().casefold() for label in self._api.labels()}
            wanted = {markers.status_label(s): made for s, made in STATUS_LABELS.items()}
            if self._admit:
                wanted[self._admit] = ADMIT_LABEL
            for name, (color, description) in wanted.items():
                if name.casefold() in known:  # ``Status:Blocked`` is this label: case is ignored
                    continue
                try:
                    self._api.create_label(name, color, description)
                except ProviderError as exc:
                    if exc.status == 422:  # made meanwhile: what we wanted
                        continue
                    if exc.status in (403, 404) and name == self._admit:
                        log.warning(
                            "the label %s could not be made (%s): a person with write "
                            "access makes it, or admits issues themselves",
                            name,
                            exc,
                        )
                        continue
                    if exc.status in (403, 404):
                        raise self._refused(name, exc) from exc
                    raise
                log.info("created the label %s", name)
            self._ensured = True

    def apply(self, number: int, wanted: Sequence[str], present: Sequence[str]) -> bool:
        """Give issue ``number`` the labels of ``wanted`` it lacks (GitHub dropped them from a
        create, or a crash came between); whether any was added. A label that does not exist
        and that the token may not create is left out, with a warning."""
        have = {name.strip().casefold() for name in present}
        missing = [name for name in dict.fromkeys(wanted) if name.strip().casefold() not in have]
        if not missing:
            return False
        try:
            self._api.add_labels(number, missing)
        except ProviderError as exc:
            if exc.status not in (403, 404):
                raise
            return self._apply_existing(number, missing, exc)
        return True

    def _apply_existing(self, number: int, missing: list[str], exc: ProviderError) -> bool:
        """Refused because some label does not exist yet and may not be made: apply the others."""
        names = {label.name.strip().casefold() for label in self._api.labels()}
        existing = [name for name in missing if name.strip().casefold() in names]
        dropped = [name for name in missing if name.strip().casefold() not in names]
        log.warning(
            "issue #%s: labels %s do not exist and the %s may not create them (%s)",
            number,
            ", ".join(dropped),
            self._api.token_kind,
            exc,
        )
        if existing:
            self._api.add_labels(number, existing)
        return bool(existing)

    def _refused(self, name: str, exc: ProviderError) -> ConfigError:
        kind = self._api.token_kind
        names = ", ".join(markers.status_label(s) for s in STATUS_LABELS)
        return ConfigError(
            f"the {kind} may not create the label {name!r} (GitHub: {github_reason(exc)}, "
            f"status {exc.status}): it needs {_NEEDS.get(kind, _NEEDS_DEFAULT)}; or create "
            f"the status labels once by hand ({names})",
            key_path="provider.github",
        )
