"""Who cpe trusts on a Jira project: whose issues become work, whose words reach a prompt.

An issue is a work item only when it is **admitted** (``adapters/providers/admission.py``):

- its creator (who filed it: unlike the reporter, nobody can change it afterwards) is trusted:
  cpe's own account, one of ``trusted_users`` (account ids on Cloud, user names on Data
  Center), a holder of ``trusted_permission`` on the project (``EDIT_ISSUES`` by default:
  Jira's ``/user/permission/search`` answers, which cpe's account may ask with the project's
  *Administer Projects* permission), or a member of one of ``trusted_groups``; or
- such a person gave it ``admit_label`` (``cpe-admit``): the issue's changelog says who added
  the label last. The title and description are then taken as they were when cpe first saw
  the admission, until a trusted person adds the label again (kept in the state directory);
- and, when ``required_labels`` is set, it carries every one of them.

A person's looked-up trust is kept ``permission_ttl`` seconds. A lookup that fails for now
fails the poll (it is made again); one Jira refuses (cpe's account may not ask) is logged once
and counts as not trusted.
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
from adapters.providers.jira.api import JiraApi, person_id, person_name
from adapters.providers.jira.issue_index import IssueView
from adapters.providers.jira.settings import JiraSettings
from domain.errors import ProviderError

__all__ = ["ADMISSIONS_FILE", "Admission", "Trust"]

log = logging.getLogger(__name__)

ADMISSIONS_FILE = "jira-admissions.json"


class Trust:
    """Answers "is this person trusted" and "is this issue admitted", with few requests."""

    def __init__(
        self,
        api: JiraApi,
        settings: JiraSettings,
        own: str | None,
        state_dir: Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._own = own
        self._clock = clock
        self._lock = threading.RLock()
        file = state_dir / ADMISSIONS_FILE if state_dir is not None else None
        self._admissions = Admissions(file, self._lock, log=log)
        self._warned: set[str] = set()
        self.configure(settings)

    def configure(self, settings: JiraSettings) -> None:
        """Take (new) trust settings: what was looked up under the old ones is asked again."""
        with self._lock:
            self.permission = settings.trusted_permission
            self.groups = {label_key(g) for g in settings.trusted_groups}
            self.users = set(settings.trusted_users)
            ways = [f"{self.permission} on {settings.project}"] if self.permission else []
            if settings.trusted_groups:
                ways.append(f"a member of {', '.join(settings.trusted_groups)}")
            words = Words(
                not_trusted="not trusted",
                detail=f" (trusted: {' or '.join(ways) or 'listed users only'})",
                someone="person",
            )
            self._admissions.configure(settings.admit_label, settings.required_labels, words)
            self._ttl = settings.permission_ttl
            self._known: dict[str, tuple[float, bool]] = {}

    @property
    def admit_label(self) -> str:
        return self._admissions.admit_label

    @property
    def required(self) -> tuple[str, ...]:
        return self._admissions.required

    # ------------------------------------------------------------------ people

    def trusted(self, person: str | None) -> bool:
        """Whether the person (an account id, or a Data Center user name) may make work and be
        quoted to an agent."""
        if not person:
            return False
        if person == self._own or person in self.users:
            return True
        with self._lock:
            known = self._known.get(person)
            if known is not None and self._clock() - known[0] < self._ttl:
                return known[1]
            verdict = self._look_up(person)
            self._known[person] = (self._clock(), verdict)
            return verdict

    def _look_up(self, person: str) -> bool:
        """Jira's answer. A lookup that fails for now (Jira unreachable, a 5xx, a 429) raises:
        taken for "not trusted", the issue's verdict would be kept until the issue changes (a
        teammate's issue ignored after an outage), and a lost create of cpe's own would not be
        recognised; the poll or the write fails instead, and is made again. A refusal (cpe's
        account may not ask) is said once and trusts nobody by permission or group."""
        try:
            permitted = bool(self.permission) and self._api.has_permission(
                person, str(self.permission)
            )
            if not permitted and self.groups:
                permitted = any(label_key(g) in self.groups for g in self._api.groups_of(person))
        except ProviderError as exc:
            if exc.transient:
                raise
            if str(exc.status) not in self._warned:
                self._warned.add(str(exc.status))
                log.error(
                    "Jira refuses to say whom to trust (%s): nobody is trusted by permission "
                    "or group; give cpe's account the project's Administer Projects permission "
                    "(and Browse users and groups), or list trusted_users, then reload cpe",
                    exc,
                )
            return False
        return permitted

    # ------------------------------------------------------------------ issues

    def admit(self, view: IssueView) -> Admission:
        """Whether an issue is work, judged once per version of it (its ``updated``)."""
        issue = Issue(view.key, view.version, view.title, view.body, view.labels, view.creator)
        return self._admissions.admit(
            issue,
            lambda: self.trusted(view.creator_id),
            lambda: self._labelled(view.key),
        )

    def _labelled(self, key: str) -> Labelled:
        """The last change that added the admit label: its id and author."""
        found: tuple[int, Any] = (0, None)
        for history in self._api.changelog(key):
            for item in history.get("items") or []:
                if not isinstance(item, dict) or str(item.get("field")).casefold() != "labels":
                    continue
                before = str(item.get("fromString") or "").split()
                after = str(item.get("toString") or "").split()
                if has_label(after, self.admit_label) and not has_label(before, self.admit_label):
                    raw = str(history.get("id") or "0")
                    found = (int(raw) if raw.isdigit() else 0, history.get("author"))
        event, author = found
        who, name = person_id(author), person_name(author)
        if who is None or not self.trusted(who):
            return Labelled(event, name, None)
        return Labelled(event, name, name or who)
