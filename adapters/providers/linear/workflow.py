"""cpe's statuses as the team's workflow states, and the team's labels.

An issue's status is its workflow state (never a label). Each status is one state of the team,
resolved at start (``Workflow``): the state ``states`` names for it; else, for pending,
in-progress and done, the team's first state (by position) of type unstarted (backlog when it
has none), started and completed; else, for in-review, approved, needs-refinement and blocked,
the state named as ``settings.DEFAULT_STATE_NAMES`` says ("In Review", ...). A status no state
says stops cpe at start with one line listing the team's states. Read back, a state a status
names says that status; any other says what its type does: triage, backlog and unstarted are
pending, started is in-progress, completed and canceled are done.

Labels are the team's (and the workspace's, when an issue carries one): a label cpe is asked to
put on an issue and the team lacks is created in the team first (``Labels``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

from adapters.providers.admission import label_key
from adapters.providers.linear.api import LinearApi
from adapters.providers.linear.settings import STATE_TYPES, LinearSettings
from adapters.providers.linear.transport import Json
from adapters.support.crashpoints import crashpoint
from domain.errors import ConfigError, ConflictError
from domain.models import STATUSES, Status

log = logging.getLogger(__name__)

_BY_TYPE: dict[str, Status] = {
    "triage": "pending",
    "backlog": "pending",
    "unstarted": "pending",
    "started": "in-progress",
    "completed": "done",
    "canceled": "done",
}
_FIRST_OF: dict[Status, tuple[str, ...]] = {
    "pending": ("unstarted", "backlog"),
    "in-progress": ("started",),
    "done": ("completed",),
}
# States Linear files new issues in (a team's triage, its default state for new issues), and
# the statuses that may be such a state: a new issue read as one of them is still worked on.
_INTAKE_TYPES = ("triage", "backlog", "unstarted")
_INTAKE_STATUSES: tuple[Status, ...] = ("pending", "needs-refinement")
# States Linear counts closed: only done may be one (the index lists open issues only).
_CLOSED_TYPES = ("completed", "canceled")
LABEL_COLOR = "#5e6ad2"
ADMIT_COLOR = "#5319e7"


def _type_order(kind: object) -> int:
    """Linear's workflow order: triage, backlog, unstarted, started, completed, canceled."""
    return STATE_TYPES.index(str(kind)) if kind in STATE_TYPES else len(STATE_TYPES)


def _described(states: Sequence[Json]) -> str:
    return ", ".join(f"{s.get('name')} ({s.get('type')})" for s in states) or "none"


class Workflow:
    """Which state says which status, for one team."""

    def __init__(self, settings: LinearSettings, states: Sequence[Json]) -> None:
        ordered = sorted(
            (s for s in states if s.get("id")),
            key=lambda s: (_type_order(s.get("type")), float(s.get("position") or 0)),
        )
        by_name = {label_key(str(s.get("name") or "")): s for s in ordered}
        self.state_ids: dict[Status, str] = {}
        self.state_names: dict[Status, str] = {}
        taken: set[str] = set()
        missing: list[str] = []
        # The named ones first, so a status found by type never takes a named state.
        named = [s for s in STATUSES if settings.state_name(s) is not None]
        for status in [*named, *(s for s in STATUSES if s not in named)]:
            name = settings.state_name(status)
            if name is not None:
                found = by_name.get(label_key(name))
            else:
                found = next(
                    (
                        s
                        for kind in _FIRST_OF[status]
                        for s in ordered
                        if s.get("type") == kind and str(s["id"]) not in taken
                    ),
                    None,
                )
            if found is None:
                missing.append(f"{status} ({name!r})" if name else f"{status} (by type)")
                continue
            if str(found["id"]) in taken:
                raise ConfigError(
                    f"two statuses are the workflow state {found.get('name')!r} of team "
                    f"{settings.team}",
                    key_path="provider.linear.states",
                    expected="a different state for each status",
                )
            taken.add(str(found["id"]))
            self.state_ids[status] = str(found["id"])
            self.state_names[status] = str(found.get("name"))
        if missing:
            free = [
                s
                for s in ordered
                if str(s["id"]) not in taken and s.get("type") not in ("triage", *_CLOSED_TYPES)
            ]
            raise ConfigError(
                f"team {settings.team} has no workflow state for {', '.join(missing)}; its "
                f"states are: {_described(ordered)}",
                key_path="provider.linear.states",
                expected="a state of the team for each of cpe's statuses, a different one each: "
                "add states of those names to the team's workflow (Linear: team settings, "
                "Issue statuses), or name a state of the team for each in "
                "[provider.linear.states]"
                + (f" (not taken: {', '.join(str(s.get('name')) for s in free)})" if free else ""),
            )
        self._check_types(settings, ordered)
        self._by_id = {state_id: status for status, state_id in self.state_ids.items()}
        self._types = {str(s["id"]): str(s.get("type") or "") for s in ordered}

    def _check_types(self, settings: LinearSettings, ordered: Sequence[Json]) -> None:
        """A status that is cpe's own doing must not be a state Linear files new issues in: a
        new issue there would be read as that status (approved, and it waits forever; blocked,
        and it is never worked on). Triage is where issues from outside the team land: refused;
        a backlog or unstarted state (a team's default for new issues is one) is said. Nor may
        a status other than done be a completed or canceled state (closed: not listed)."""
        types = {str(s["id"]): str(s.get("type") or "") for s in ordered}
        for status, state_id in self.state_ids.items():
            kind = types.get(state_id, "")
            name = self.state_names[status]
            if status != "done" and kind in _CLOSED_TYPES:
                raise ConfigError(
                    f"{status} is the workflow state {name!r} of team {settings.team}, of type "
                    f"{kind}: Linear counts its issues closed, so an item cpe set to {status} "
                    "would be lost at a restart and would stop blocking the items it blocks",
                    key_path="provider.linear.states",
                    expected=f"a state of type started for {status}",
                )
            if status in _INTAKE_STATUSES or kind not in _INTAKE_TYPES:
                continue
            if kind == "triage":
                raise ConfigError(
                    f"{status} is the workflow state {name!r} of team {settings.team}, its "
                    "triage state, where Linear files the issues of people outside the team "
                    f"and of integrations: each would be read as {status}",
                    key_path="provider.linear.states",
                    expected=f"a state of type started, completed or canceled for {status}",
                )
            log.warning(
                "%s is the workflow state %r (%s) of team %s: an issue filed in it is read as "
                "%s, not as pending (provider.linear.states)",
                status,
                name,
                kind,
                settings.team,
                status,
            )

    def status_of(self, state_id: str, state_type: str) -> Status:
        found = self._by_id.get(state_id)
        if found is not None:
            return found
        return _BY_TYPE.get(self._types.get(state_id, state_type), "pending")

    def state_for(self, status: Status) -> str:
        return self.state_ids[status]


class Labels:
    """The team's labels by name, created in the team when missing."""

    def __init__(self, api: LinearApi, team_id: str, labels: Iterable[Json]) -> None:
        self._api = api
        self._team = team_id
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}  # by name (label_key)
        self._names: dict[str, str] = {}  # by id
        self.learn((str(n.get("id")), str(n.get("name"))) for n in labels if n.get("id"))

    def learn(self, labels: Iterable[tuple[str, str]]) -> None:
        """Labels seen on issues (a workspace label among them) or made."""
        with self._lock:
            for label_id, name in labels:
                self._ids.setdefault(label_key(name), label_id)
                self._names[label_id] = name

    def names_of(self, ids: set[str]) -> dict[str, str]:
        """Label names by id; the ids not known yet (a workspace label, one made since start)
        asked of Linear, 50 at a time."""
        with self._lock:
            unknown = sorted(i for i in ids if i not in self._names)
        for start in range(0, len(unknown), 50):
            found = self._api.labels(unknown[start : start + 50])
            self.learn((str(n.get("id")), str(n.get("name"))) for n in found if n.get("id"))
        with self._lock:
            return {i: self._names[i] for i in ids if i in self._names}

    def ids(self, names: Iterable[str], admit_label: str = "") -> list[str]:
        """The ids of ``names``, each created in the team first when unknown."""
        found: list[str] = []
        for name in dict.fromkeys(n.strip() for n in names if n.strip()):
            with self._lock:
                known = self._ids.get(label_key(name))
            if known is None:
                known = self._create(name, admit=label_key(name) == label_key(admit_label))
            found.append(known)
        return list(dict.fromkeys(found))

    def _create(self, name: str, *, admit: bool) -> str:
        description = "cpe: a trusted member admits this issue as work" if admit else "made by cpe"
        try:
            made = self._api.create_label(
                self._team, name, ADMIT_COLOR if admit else LABEL_COLOR, description
            )
        except ConflictError:
            # Made meanwhile (or a workspace label of that name): the team's list says which.
            team = self._api.team_labels(self._team)
            self.learn((str(n.get("id")), str(n.get("name"))) for n in team)
            with self._lock:
                known = self._ids.get(label_key(name))
            if known is None:
                raise
            return known
        crashpoint("linear.label.after_create")
        log.info("created the label %s in the team", name)
        label_id = str(made["id"])
        self.learn([(label_id, name)])
        return label_id
