"""Who cpe trusts on a Linear team: whose issues become work, whose words reach a prompt.

Anyone the workspace lets in (a guest too, on the teams they are given) can file an issue in a
team, and an agent obeys whatever its prompt holds. So an issue is a work item only when it is
**admitted** (``adapters/providers/admission.py``):

- its creator is a member of the team who is not a guest (``trust_guests`` counts guests too)
  and whose account is active, or is cpe's own user (the token's), or is listed in
  ``trusted_users`` by email; or
- such a person gave it ``admit_label`` (``cpe:admit``): the issue's history names who added
  the label (``IssueHistory.addedLabelIds`` and its ``actor``). The title and description are
  then taken as they were when cpe first saw the admission (kept in the state directory);
- and, when ``required_labels`` is set, it carries every one of them.

People are known by their user id. The team's members are read in one request (a page of 250)
and kept ``permission_ttl`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from adapters.providers.admission import Admission, Admissions, Issue, Labelled, Words, label_key
from adapters.providers.linear.api import LinearApi
from adapters.providers.linear.issue_index import IssueView, parse_time
from adapters.providers.linear.settings import LinearSettings
from domain.errors import ProviderError

__all__ = ["ADMISSIONS_FILE", "Admission", "Trust"]

log = logging.getLogger(__name__)

ADMISSIONS_FILE = "linear-admissions.json"


class Trust:
    """Answers "is this person trusted" and "is this issue admitted", with few requests."""

    def __init__(
        self,
        api: LinearApi,
        settings: LinearSettings,
        team_id: str,
        own: tuple[str, str],
        state_dir: Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._team = team_id
        self.own_id, self.own_email = own
        self._clock = clock
        self._lock = threading.RLock()
        file = state_dir / ADMISSIONS_FILE if state_dir is not None else None
        self._admissions = Admissions(file, self._lock, log=log)
        self.configure(settings)

    def configure(self, settings: LinearSettings) -> None:
        """Take (new) trust settings: what was looked up under the old ones is asked again."""
        with self._lock:
            # One reason for a guest and for someone outside the team, naming who is trusted
            # and how an issue is admitted all the same.
            who = f"the members of team {settings.team}" + (
                ", guests too" if settings.trust_guests else ", not its guests"
            )
            if settings.trusted_users:
                who += ", and trusted_users"
            if settings.admit_label.strip():
                who += f"; or one of them adding {settings.admit_label.strip()!r}"
            words = Words(not_trusted="not trusted", detail=f" (trusted: {who})", someone="member")
            self._admissions.configure(settings.admit_label, settings.required_labels, words)
            self.users = {label_key(u) for u in settings.trusted_users}
            self.guests = settings.trust_guests
            self._ttl = settings.permission_ttl
            self._members: tuple[float, dict[str, bool]] | None = None

    @property
    def admit_label(self) -> str:
        return self._admissions.admit_label

    @property
    def required(self) -> tuple[str, ...]:
        return self._admissions.required

    # ------------------------------------------------------------------ people

    def trusted(self, user_id: str | None, email: str | None = None) -> bool:
        """Whether the user may make work and be quoted to an agent."""
        if user_id is not None and user_id == self.own_id:
            return True
        if email and label_key(email) in self.users:
            return True
        if user_id is None:
            return False
        guest = self.members().get(user_id)
        return guest is not None and (not guest or self.guests)

    def members(self) -> dict[str, bool]:
        """The team's active members: user id -> whether a guest. Linear failing for a while
        fails the poll (no verdict is kept: judged again next time); a token that may not list
        them leaves no one but cpe and ``trusted_users`` trusted."""
        with self._lock:
            known = self._members
            if known is not None and self._clock() - known[0] < self._ttl:
                return known[1]
            try:
                listed = self._api.members(self._team)
            except ProviderError as exc:
                if exc.transient:
                    raise
                log.warning("the team's members could not be read: %s", exc)
                return {}  # not cached: asked again next time
            members = {
                str(m["id"]): bool(m.get("guest"))
                for m in listed
                if m.get("id") and m.get("active", True) is not False
            }
            self._members = (self._clock(), members)
            return members

    # ------------------------------------------------------------------ issues

    def admit(self, view: IssueView) -> Admission:
        """Whether an issue is work, judged once per version of it (its ``updatedAt``)."""
        issue = Issue(
            view.identifier,
            view.updated,
            view.title,
            view.body,
            view.label_names,
            view.creator_email or (f"user {view.creator_id}" if view.creator_id else None),
        )
        return self._admissions.admit(
            issue,
            lambda: self.trusted(view.creator_id, view.creator_email),
            lambda: self._labelled(view),
        )

    def _labelled(self, view: IssueView) -> Labelled:
        """The last history entry that added the admit label: when, and by whom."""
        admit = {i for i, name in view.labels if label_key(name) == label_key(self.admit_label)}
        found: tuple[int, str | None, str | None] = (0, None, None)
        for entry in self._api.history(view.id):
            added = entry.get("addedLabelIds") or []
            if not admit.intersection(str(a) for a in added):
                continue
            when = int(parse_time(entry.get("createdAt")).timestamp() * 1000)
            if when < found[0]:
                continue
            actor = entry.get("actor") or {}
            found = (
                when,
                str(actor["id"]) if actor.get("id") else None,
                str(actor["email"]) if actor.get("email") else None,
            )
        event, user_id, email = found
        who = email or (f"user {user_id}" if user_id else None)
        if user_id is None or not self.trusted(user_id, email):
            return Labelled(event, who, None)
        return Labelled(event, who, who)
