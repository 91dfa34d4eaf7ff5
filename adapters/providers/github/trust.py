"""Who cpe trusts on a GitHub repository: whose issues become work, whose words reach a prompt.

On a public repository anyone can open an issue or comment on a pull request, and an agent
obeys whatever its prompt holds. So an issue is a work item only when it is **admitted**:

- its author's permission on the repository is at least ``trusted_permission`` (``write`` by
  default), or the author is cpe itself or one of ``trusted_bots``; or
- such a person gave it ``admit_label`` (``cpe:admit``): the issue's timeline names who added
  the label. The title and body are then taken as they were when cpe first saw the admission;
  a later edit (the author may edit their own issue) is not taken until a trusted person adds
  the label again. Those snapshots are kept in the state directory, so a restart does not take
  an edit made meanwhile;
- and, when ``required_labels`` is set, it carries every one of them.

A person's permission comes from the issue's ``author_association`` where that settles it
(``OWNER`` is admin; ``NONE``, ``CONTRIBUTOR``, ``FIRST_TIMER``… are not collaborators at
all) and from ``GET /repos/{owner}/{repo}/collaborators/{login}/permission`` otherwise (a
``MEMBER`` or ``COLLABORATOR`` may have only read), kept ``permission_ttl`` seconds. Labels are
compared as GitHub compares them: case-insensitively, surrounding whitespace ignored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.providers.admission import (
    Admission,
    Admissions,
    Issue,
    Labelled,
    Words,
    has_label,
    label_key,
)
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.issue_index import IssueView
from adapters.providers.github.settings import GitHubSettings
from domain.errors import NotFoundError, ProviderError

__all__ = ["ADMISSIONS_FILE", "RANK", "Admission", "Trust", "has_label", "label_key"]

log = logging.getLogger(__name__)

RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}
# Associations that may hide any permission: asked of GitHub. Any other is no collaborator.
_ASK = {"MEMBER", "COLLABORATOR"}
ADMISSIONS_FILE = "github-admissions.json"


class Trust:
    """Answers "is this person trusted" and "is this issue admitted", with few requests."""

    def __init__(
        self,
        api: GitHubApi,
        settings: GitHubSettings,
        state_dir: Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._clock = clock
        self._lock = threading.RLock()
        file = state_dir / ADMISSIONS_FILE if state_dir is not None else None
        self._admissions = Admissions(file, self._lock, log=log)
        self._own: str | None = None
        self.configure(settings)

    def configure(self, settings: GitHubSettings) -> None:
        """Take (new) trust settings: what was looked up under the old ones is asked again."""
        with self._lock:
            self.threshold = settings.trusted_permission
            self._admissions.configure(settings.admit_label, settings.required_labels, Words())
            self.bots = {label_key(b) for b in settings.trusted_bots}
            self._ttl = settings.permission_ttl
            self._permissions: dict[str, tuple[float, str]] = {}

    @property
    def admit_label(self) -> str:
        return self._admissions.admit_label

    @property
    def required(self) -> tuple[str, ...]:
        return self._admissions.required

    # ------------------------------------------------------------------ people

    def own_login(self) -> str | None:
        """The login cpe acts as, asked once (``None`` while GitHub cannot say)."""
        with self._lock:
            if self._own is None:
                try:
                    self._own = self._api.own_login()
                except ProviderError as exc:
                    log.warning("cpe's own login could not be read: %s", exc)
            return self._own

    def trusted(self, login: str | None, association: str | None = None) -> bool:
        """Whether ``login`` (with the ``author_association`` GitHub gave, if any) may make
        work and be quoted to an agent."""
        if not login:
            return False
        own = self.own_login()
        known = {label_key(own)} if own is not None else set()
        if label_key(login) in known | self.bots:  # logins, like labels, ignore case
            return True
        return RANK[self.permission(login, association)] >= RANK[self.threshold]

    def permission(self, login: str, association: str | None = None) -> str:
        """``login``'s role on the repository (admin … read, or none)."""
        if association == "OWNER":
            return "admin"
        if association is not None and association not in _ASK:
            return "none"
        with self._lock:
            known = self._permissions.get(label_key(login))
            if known is not None and self._clock() - known[0] < self._ttl:
                return known[1]
            try:
                permission, role = self._api.collaborator_permission(login)
            except NotFoundError:
                permission, role = "none", "none"
            # Any other failure raises: taken for "none", the issue's verdict would be kept
            # until the issue changes (a teammate's issue ignored after an outage).
            found = role if role in RANK else permission if permission in RANK else "none"
            self._permissions[label_key(login)] = (self._clock(), found)
            return found

    # ------------------------------------------------------------------ issues

    def admit(self, view: IssueView) -> Admission:
        """Whether an issue is work, judged once per version of it (its ``updated_at``)."""
        issue = Issue(
            view.number,
            view.updated_at.isoformat(),
            view.title,
            view.body,
            view.labels,
            view.author,
        )
        return self._admissions.admit(
            issue,
            lambda: self.trusted(view.author, view.association),
            lambda: self._labeled(view.number),
        )

    def _labeled(self, number: int) -> Labelled:
        """The last ``labeled`` event that added the admit label: its id, its actor."""
        found: tuple[int, str | None] = (0, None)
        for entry in self._api.timeline(number, "labeled"):
            label: Any = entry.get("label") or {}
            actor: Any = entry.get("actor") or {}
            if has_label([str(label.get("name", ""))], self.admit_label):
                found = (int(entry.get("id") or 0), actor.get("login"))
        event, login = found
        trusted = login is not None and self.trusted(login)
        return Labelled(event, login, login if trusted else None)
