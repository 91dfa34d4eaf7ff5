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

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.providers.gitlab.api import GitLabApi
from adapters.providers.gitlab.issue_index import IssueView
from adapters.providers.gitlab.labels import has_label, label_key
from adapters.providers.gitlab.settings import GitLabSettings
from domain.errors import ProviderError

log = logging.getLogger(__name__)

ADMISSIONS_FILE = "gitlab-admissions.json"


@dataclass(frozen=True)
class Admission:
    """Whether an issue is work, and the title and body cpe takes from it."""

    admitted: bool
    reason: str = ""
    """Why not, or what cpe took instead of the issue as it is (an edit after admission)."""
    title: str = ""
    body: str = ""


@dataclass(frozen=True)
class _Snapshot:
    event: int  # the label event that admitted it
    by: str
    title: str
    body: str


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
        self._file = state_dir / ADMISSIONS_FILE if state_dir is not None else None
        self._snapshots: dict[int, _Snapshot] = self._load()
        self._own: tuple[int, str] | None = None
        self._verdicts: dict[tuple[int, str], Admission] = {}
        self._warned: set[tuple[int, str]] = set()
        self.configure(settings)

    def configure(self, settings: GitLabSettings) -> None:
        """Take (new) trust settings: what was looked up under the old ones is asked again."""
        with self._lock:
            self.threshold = settings.trusted_level
            self.level_name = settings.trusted_access_level
            self.admit_label = settings.admit_label.strip()
            self.required = tuple(r for r in settings.required_labels if r.strip())
            self.bots = {label_key(b) for b in settings.trusted_bots}
            self._ttl = settings.permission_ttl
            self._levels: dict[int, tuple[float, int]] = {}
            self._verdicts.clear()

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
            try:
                level = self._api.member_access(user_id)
            except ProviderError as exc:
                log.warning("the access level of user %s could not be read: %s", user_id, exc)
                return 0  # not cached: asked again next time
            self._levels[user_id] = (self._clock(), level)
            return level

    # ------------------------------------------------------------------ issues

    def admit(self, view: IssueView) -> Admission:
        """Whether an issue is work, judged once per version of it (its ``updated_at``)."""
        with self._lock:
            version = (view.iid, view.updated_at.isoformat())
            known = self._verdicts.get(version)
            if known is None:
                known = self._judge(view)
                self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != view.iid}
                self._verdicts[version] = known
                if not known.admitted and (view.iid, known.reason) not in self._warned:
                    self._warned.add((view.iid, known.reason))
                    log.warning("issue #%s ignored: %s", view.iid, known.reason)
            return known

    def _judge(self, view: IssueView) -> Admission:
        iid, title, body = view.iid, view.title, view.body
        missing = [r for r in self.required if not has_label(view.labels, r)]
        if missing:
            return Admission(False, f"lacks the required label {', '.join(missing)}")
        who = view.author or "a deleted account"
        if self.trusted(view.author_id, view.author):
            return Admission(True, title=title, body=body)
        if not self.admit_label or not has_label(view.labels, self.admit_label):
            return Admission(False, f"filed by {who}, not a trusted member ({self.level_name})")
        event, actor_id, actor = self._labeled(iid)
        if actor_id is None or not self.trusted(actor_id, actor):
            return Admission(
                False,
                f"filed by {who}, not a trusted member; {self.admit_label!r} added by "
                f"{actor or 'someone unknown'}, not trusted",
            )
        by = actor or f"user {actor_id}"
        snapshot = self._snapshots.get(iid)
        if snapshot is None or snapshot.event != event:
            snapshot = _Snapshot(event, by, title, body)
            self._snapshots[iid] = snapshot
            self._save()
            log.info("issue #%s admitted by %s (%s)", iid, by, self.admit_label)
        if (snapshot.title, snapshot.body) != (title, body):
            reason = (
                f"edited after {snapshot.by} admitted it: the text as admitted is used until a "
                f"trusted member adds {self.admit_label!r} again"
            )
            if (iid, reason) not in self._warned:
                self._warned.add((iid, reason))
                log.warning("issue #%s %s", iid, reason)
            return Admission(True, reason, snapshot.title, snapshot.body)
        return Admission(True, title=title, body=body)

    def _labeled(self, iid: int) -> tuple[int, int | None, str | None]:
        """The last label event that added the admit label: (its id, its user's id and
        username)."""
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
        return found

    # ------------------------------------------------------------------ snapshots

    def _load(self) -> dict[int, _Snapshot]:
        if self._file is None or not self._file.exists():
            return {}
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            return {int(k): _Snapshot(**v) for k, v in data.items()}
        except (OSError, ValueError, TypeError) as exc:
            # Without them an admitted issue's current text is taken: say so, loudly.
            log.error("%s cannot be read (%s): admitted issues are judged afresh", self._file, exc)
            return {}

    def _save(self) -> None:
        if self._file is None:
            return
        data = {str(k): vars(v) for k, v in self._snapshots.items()}
        part = self._file.with_name(self._file.name + ".part")
        part.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        os.replace(part, self._file)
