"""Who cpe trusts on a GitLab project: whose issues become work, whose words reach a prompt.

On a public project anyone signed in can open an issue or comment on a merge request, and an
agent obeys whatever its prompt holds. So an issue is a work item only when it is **admitted**:

- its author's access level on the project (``GET /projects/:id/members/all/:user_id``, which
  counts levels inherited from groups) is at least ``trusted_access_level`` (Developer by
  default), or the author is cpe's own user or one of ``trusted_bots``; or
- such a member gave it ``admit_label`` (``cpe:admit``): the issue's resource label events name
  who added the label. The title and description are then taken as they were when cpe first
  saw the admission; a later edit (the author may edit their own issue) is not taken until a
  trusted member adds the label again. Those snapshots are kept in the state directory, so a
  restart does not take an edit made meanwhile;
- and, when ``required_labels`` is set, it carries every one of them.

People are known by their user id (a username can be changed); ``trusted_bots`` are usernames.
A looked-up access level is kept ``permission_ttl`` seconds; a member who is blocked, or whose
invitation is not accepted, has none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.providers.admission import Admission, Admissions, Issue, Labelled, Words
from adapters.providers.gitlab.api import GitLabApi
from adapters.providers.gitlab.issue_index import IssueView
from adapters.providers.gitlab.labels import has_label, label_key
from adapters.providers.gitlab.settings import GitLabSettings
from domain.errors import ProviderError

__all__ = ["ADMISSIONS_FILE", "Admission", "Trust"]

log = logging.getLogger(__name__)

ADMISSIONS_FILE = "gitlab-admissions.json"


class Trust:
    """Answers "is this person trusted" and "is this issue admitted", with few requests."""

    def __init__(
        self,
        api: GitLabApi,
        settings: GitLabSettings,
        state_dir: Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._clock = clock
        self._lock = threading.RLock()
        file = state_dir / ADMISSIONS_FILE if state_dir is not None else None
        self._admissions = Admissions(file, self._lock, log=log)
        self._own: tuple[int, str] | None = None
        self.configure(settings)

    def configure(self, settings: GitLabSettings) -> None:
        """Take (new) trust settings: what was looked up under the old ones is asked again."""
        with self._lock:
            self.threshold = settings.trusted_level
            words = Words(
                not_trusted="not a trusted member",
                detail=f" ({settings.trusted_access_level})",
                someone="member",
            )
            self._admissions.configure(settings.admit_label, settings.required_labels, words)
            self.bots = {label_key(b) for b in settings.trusted_bots}
            self._ttl = settings.permission_ttl
            self._levels: dict[int, tuple[float, int]] = {}

    @property
    def admit_label(self) -> str:
        return self._admissions.admit_label

    @property
    def required(self) -> tuple[str, ...]:
        return self._admissions.required

    # ------------------------------------------------------------------ people

    def own_user(self) -> tuple[int, str] | None:
        """(id, username) cpe acts as, asked once (``None`` while GitLab cannot say)."""
        with self._lock:
            if self._own is None:
                try:
                    self._own = self._api.own_user()
                except ProviderError as exc:
                    log.warning("cpe's own GitLab user could not be read: %s", exc)
            return self._own

    def trusted(self, user_id: int | None, username: str | None = None) -> bool:
        """Whether the user may make work and be quoted to an agent."""
        if user_id is None and not username:
            return False
        own = self.own_user()
        if own is not None:
            if user_id is not None and user_id == own[0]:
                return True
            if user_id is None and username and label_key(username) == label_key(own[1]):
                return True
        if username and label_key(username) in self.bots:
            return True
        if user_id is None:
            return False
        return self.access_level(user_id) >= self.threshold

    def access_level(self, user_id: int) -> int:
        """The user's access level on the project (0: not a member)."""
        with self._lock:
            known = self._levels.get(user_id)
            if known is not None and self._clock() - known[0] < self._ttl:
                return known[1]
            # A lookup that fails raises: taken for "not trusted", its issue's verdict would be
            # kept until the issue changes (a teammate's issue ignored after an outage), and a
            # lost create of cpe's own would not be recognised. The poll or write fails instead,
            # and is made again.
            level = self._api.member_access(user_id)
            self._levels[user_id] = (self._clock(), level)
            return level

    # ------------------------------------------------------------------ issues

    def admit(self, view: IssueView) -> Admission:
        """Whether an issue is work, judged once per version of it (its ``updated_at``)."""
        issue = Issue(
            view.iid, view.updated_at.isoformat(), view.title, view.body, view.labels, view.author
        )
        return self._admissions.admit(
            issue,
            lambda: self.trusted(view.author_id, view.author),
            lambda: self._labeled(view.iid),
        )

    def _labeled(self, iid: int) -> Labelled:
        """The last label event that added the admit label: its id, its user."""
        found: tuple[int, int | None, str | None] = (0, None, None)
        for entry in self._api.label_events(iid):
            label: Any = entry.get("label") or {}
            user: Any = entry.get("user") or {}
            if entry.get("action") != "add":
                continue
            if has_label([str(label.get("name", ""))], self.admit_label):
                user_id = user.get("id")
                found = (
                    int(entry.get("id") or 0),
                    user_id if isinstance(user_id, int) else None,
                    str(user["username"]) if user.get("username") else None,
                )
        event, user_id, username = found
        if user_id is None or not self.trusted(user_id, username):
            return Labelled(event, username, None)
        return Labelled(event, username, username or f"user {user_id}")
