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

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.providers.github.api import GitHubApi
from adapters.providers.github.issue_index import IssueView
from adapters.providers.github.settings import GitHubSettings
from domain.errors import NotFoundError, ProviderError

log = logging.getLogger(__name__)

RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}
# Associations that may hide any permission: asked of GitHub. Any other is no collaborator.
_ASK = {"MEMBER", "COLLABORATOR"}
ADMISSIONS_FILE = "github-admissions.json"


def label_key(name: str) -> str:
    """A label name as GitHub matches it: case-insensitive, surrounding whitespace ignored."""
    return name.strip().casefold()


def has_label(labels: Iterable[str], name: str) -> bool:
    return label_key(name) in {label_key(n) for n in labels}


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
    event: int  # the ``labeled`` event that admitted it
    by: str
    title: str
    body: str


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
        self._file = state_dir / ADMISSIONS_FILE if state_dir is not None else None
        self._snapshots: dict[int, _Snapshot] = self._load()
        self._own: str | None = None
        self._verdicts: dict[tuple[int, str], Admission] = {}
        self._warned: set[tuple[int, str]] = set()
        self.configure(settings)

    def configure(self, settings: GitHubSettings) -> None:
        """Take (new) trust settings: what was looked up under the old ones is asked again."""
        with self._lock:
            self.threshold = settings.trusted_permission
            self.admit_label = settings.admit_label.strip()
            self.required = tuple(r for r in settings.required_labels if r.strip())
            self.bots = {label_key(b) for b in settings.trusted_bots}
            self._ttl = settings.permission_ttl
            self._permissions: dict[str, tuple[float, str]] = {}
            self._verdicts.clear()

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
            except ProviderError as exc:
                log.warning("the permission of %s could not be read: %s", login, exc)
                return "none"  # not cached: asked again next time
            found = role if role in RANK else permission if permission in RANK else "none"
            self._permissions[label_key(login)] = (self._clock(), found)
            return found

    # ------------------------------------------------------------------ issues

    def admit(self, view: IssueView) -> Admission:
        """Whether an issue is work, judged once per version of it (its ``updated_at``)."""
        with self._lock:
            version = (view.number, view.updated_at.isoformat())
            known = self._verdicts.get(version)
            if known is None:
                known = self._judge(view)
                self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != view.number}
                self._verdicts[version] = known
                if not known.admitted and (view.number, known.reason) not in self._warned:
                    self._warned.add((view.number, known.reason))
                    log.warning("issue #%s ignored: %s", view.number, known.reason)
            return known

    def _judge(self, view: IssueView) -> Admission:
        number, title, body = view.number, view.title, view.body
        missing = [r for r in self.required if not has_label(view.labels, r)]
        if missing:
            return Admission(False, f"lacks the required label {', '.join(missing)}")
        who = view.author or "a deleted account"
        if self.trusted(view.author, view.association):
            return Admission(True, title=title, body=body)
        if not self.admit_label or not has_label(view.labels, self.admit_label):
            return Admission(False, f"filed by {who}, not trusted")
        event, actor = self._labeled(number)
        if actor is None or not self.trusted(actor):
            return Admission(
                False,
                f"filed by {who}, not trusted; {self.admit_label!r} added by "
                f"{actor or 'someone unknown'}, not trusted",
            )
        snapshot = self._snapshots.get(number)
        if snapshot is None or snapshot.event != event:
            snapshot = _Snapshot(event, actor, title, body)
            self._snapshots[number] = snapshot
            self._save()
            log.info("issue #%s admitted by %s (%s)", number, actor, self.admit_label)
        if (snapshot.title, snapshot.body) != (title, body):
            reason = (
                f"edited after {snapshot.by} admitted it: the text as admitted is used until a "
                f"trusted person adds {self.admit_label!r} again"
            )
            if (number, reason) not in self._warned:
                self._warned.add((number, reason))
                log.warning("issue #%s %s", number, reason)
            return Admission(True, reason, snapshot.title, snapshot.body)
        return Admission(True, title=title, body=body)

    def _labeled(self, number: int) -> tuple[int, str | None]:
        """The last ``labeled`` event that added the admit label: (its id, its actor)."""
        found: tuple[int, str | None] = (0, None)
        for entry in self._api.timeline(number, "labeled"):
            label: Any = entry.get("label") or {}
            actor: Any = entry.get("actor") or {}
            if has_label([str(label.get("name", ""))], self.admit_label):
                found = (int(entry.get("id") or 0), actor.get("login"))
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
