"""An issue's status as a label, and the status labels made sure of at start.

A status is the label ``status::<status>`` (GitLab's scoped labels: on a tier that has them an
issue carries one label of a scope at a time) or the label ``status_labels`` maps it to; an open
issue without one is ``pending``, a closed issue is ``done`` whatever its labels. Labels are
matched as GitLab matches names in a filter: case-insensitively, surrounding whitespace ignored.

GitLab makes a label the first time an issue is given it, but only for a member who may manage
labels (a Planner or Reporter may; a Guest's labels are dropped without a word). So cpe lists
the project's labels at start and creates the status labels it lacks; when the token may not,
cpe stops at start with one line naming what is missing (``ConfigError``) instead of failing on
the first status change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from adapters.providers.admission import has_label, label_key
from adapters.providers.gitlab.api import GitLabApi
from adapters.providers.gitlab.errors import gitlab_reason
from adapters.providers.gitlab.settings import LABELLED, GitLabSettings
from adapters.support.crashpoints import crashpoint
from domain.errors import ConfigError, ProviderError
from domain.models import Status

__all__ = ["ADMIT_COLOR", "STATUS_COLORS", "Labels", "StatusLabels", "has_label", "label_key"]

log = logging.getLogger(__name__)

STATUS_COLORS: dict[Status, tuple[str, str]] = {
    "pending": ("#ededed", "cpe: waiting to be worked on"),
    "in-progress": ("#1d76db", "cpe: an implementor is working on it"),
    "in-review": ("#fbca04", "cpe: its merge request is being checked and reviewed"),
    "needs-refinement": ("#d93f0b", "cpe: CI or the review asked for changes"),
    "approved": ("#0e8a16", "cpe: reviewed and approved"),
    "blocked": ("#b60205", "cpe: waits for a person"),
}
assert set(STATUS_COLORS) == set(LABELLED)
ADMIT_COLOR = ("#5319e7", "cpe: a trusted member admits this issue as work")


class StatusLabels:
    """Which label says which status, as the settings name them."""

    def __init__(self, settings: GitLabSettings) -> None:
        self.names: dict[Status, str] = {s: settings.status_label(s) for s in LABELLED}
        self._by_key = {label_key(name): status for status, name in self.names.items()}
        prefix = settings.status_label_prefix if settings.status_labels is None else None
        self._prefix = label_key(prefix) if prefix else None

    def label(self, status: Status) -> str:
        return self.names[status]

    def is_status(self, name: str) -> bool:
        """A status label, or (with a prefix) any label of that scope: ``status::typo`` is
        replaced like the others when the status changes."""
        key = label_key(name)
        return key in self._by_key or (self._prefix is not None and key.startswith(self._prefix))

    def status_of(self, labels: Iterable[str], closed: bool) -> Status:
        """``done`` when closed; else the first status label's status; ``pending`` without."""
        if closed:
            return "done"
        for name in labels:
            found = self._by_key.get(label_key(name))
            if found is not None:
                return found
        return "pending"

    def others(self, labels: Iterable[str]) -> list[str]:
        return [n for n in labels if not self.is_status(n)]


class Labels:
    """The status labels (and the admit label) made sure of once."""

    def __init__(self, api: GitLabApi, statuses: StatusLabels, admit_label: str = "") -> None:
        self._api = api
        self._statuses = statuses
        self._admit = admit_label.strip()
        self._lock = threading.Lock()
        self._ensured = False

    def ensure_status_labels(self) -> None:
        """Create the status labels the project lacks. A token that may not create them is a
        ``ConfigError`` (cpe cannot work without them)."""
        with self._lock:
            if self._ensured:
                return
            known = {label_key(str(label.get("name", ""))) for label in self._api.labels()}
            wanted = {self._statuses.label(s): STATUS_COLORS[s] for s in LABELLED}
            if self._admit:
                wanted[self._admit] = ADMIT_COLOR
            for name, (color, description) in wanted.items():
                if label_key(name) in known:
                    continue
                try:
                    self._api.create_label(name, color, description)
                except ProviderError as exc:
                    if exc.status == 409:  # made meanwhile: "Label already exists"
                        continue
                    if exc.status in (401, 403, 404) and name == self._admit:
                        log.warning(
                            "the label %s could not be made (%s): a maintainer makes it, or "
                            "trusted members admit issues by labelling them anyway",
                            name,
                            exc,
                        )
                        continue
                    if exc.status in (401, 403, 404):
                        raise self._refused(name, exc) from exc
                    raise
                crashpoint("gitlab.label.after_create")
                log.info("created the label %s", name)
            self._ensured = True

    def _refused(self, name: str, exc: ProviderError) -> ConfigError:
        names = ", ".join(self._statuses.label(s) for s in LABELLED)
        return ConfigError(
            f"the {self._api.token_kind} may not create the label {name!r} (GitLab: "
            f"{gitlab_reason(exc)}, status {exc.status}): it needs the api scope and at least "
            f"the Planner or Reporter role on the project; or create the status labels once by "
            f"hand ({names})",
            key_path="provider.gitlab",
        )
