"""cpe's statuses as the project's Jira statuses, resolved once at start, and moved through the
workflow's transitions.

At start the project's statuses (every issue type's) are read, and each cpe status is given
one: the one ``statuses`` names; else one of the usual names (``DEFAULT_STATUS_NAMES``); else,
for pending, in-progress and done, the first status of the matching category (To Do, In
Progress, Done). A status named that does not exist, or a cpe status left without one, stops cpe
with one line listing the workflow's statuses.

Reading, a Jira status gives the cpe status it was chosen for; any other gives its category's
(To Do: pending, In Progress: in-progress, Done: done). Jira changes a status only through a
transition: to move an issue, its transitions are read and the one leading to the chosen status
is taken; none is a clear error listing where the issue's transitions lead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.providers.jira.settings import CATEGORY_DEFAULTS, DEFAULT_STATUS_NAMES, JiraSettings
from domain.errors import ConfigError, ProviderError
from domain.models import STATUSES, Status

_BY_CATEGORY: dict[str, Status] = {"new": "pending", "indeterminate": "in-progress", "done": "done"}


@dataclass(frozen=True)
class JiraStatus:
    id: str
    name: str
    category: str  # statusCategory.key: new, indeterminate, done

    @property
    def done(self) -> bool:
        return self.category == "done"


def jira_status(value: object) -> JiraStatus:
    """An issue's ``status`` field (or a transition's ``to``)."""
    if not isinstance(value, dict):
        return JiraStatus("", "", "new")
    category: Any = value.get("statusCategory") or {}
    return JiraStatus(
        str(value.get("id") or ""),
        str(value.get("name") or ""),
        str(category.get("key") or "new") if isinstance(category, dict) else "new",
    )


def _listed(statuses: Sequence[JiraStatus]) -> str:
    return ", ".join(f"{s.name} ({s.category})" for s in statuses) or "none"


class StatusMap:
    def __init__(self, settings: JiraSettings, issue_types: Sequence[dict[str, Any]]) -> None:
        seen: dict[str, JiraStatus] = {}
        for issue_type in issue_types:
            for raw in issue_type.get("statuses") or []:
                listed = jira_status(raw)
                if listed.name and listed.name.casefold() not in seen:
                    seen[listed.name.casefold()] = listed
        self.all: tuple[JiraStatus, ...] = tuple(seen.values())
        project = settings.project
        chosen: dict[Status, JiraStatus] = {}
        unknown: list[str] = []  # named in the settings, not in the workflow
        missing: list[Status] = []  # neither named nor found
        for cpe in STATUSES:
            named = settings.status_name(cpe)
            if named is not None:
                known = seen.get(named.casefold())
                if known is None:
                    unknown.append(f"{named!r} (for {cpe})")
                else:
                    chosen[cpe] = known
                continue
            status: JiraStatus | None = next(
                (seen[n.casefold()] for n in DEFAULT_STATUS_NAMES[cpe] if n.casefold() in seen),
                None,
            )
            if status is None and cpe in CATEGORY_DEFAULTS:
                status = next((s for s in self.all if s.category == CATEGORY_DEFAULTS[cpe]), None)
            if status is None:
                missing.append(cpe)
            else:
                chosen[cpe] = status
        # Every problem in one line, so that one run says all there is to fix.
        if unknown:
            raise ConfigError(
                f"project {project} has no status {', '.join(unknown)}; its statuses: "
                f"{_listed(self.all)}",
                key_path="provider.jira.statuses",
                expected="the name of one of the project's statuses for each cpe status named",
            )
        if missing:
            example = ", ".join(f'{m} = "{DEFAULT_STATUS_NAMES[m][0]}"' for m in missing)
            raise ConfigError(
                f"project {project}'s workflow has no status for {', '.join(missing)}; its "
                f"statuses: {_listed(self.all)}",
                key_path="provider.jira.statuses",
                expected=f"a status of the workflow named for each (statuses = {{ {example} }}), "
                "or those statuses added to the workflow",
            )
        taken: dict[str, Status] = {}
        for cpe, status in chosen.items():
            if status.name.casefold() in taken:
                raise ConfigError(
                    f"{taken[status.name.casefold()]} and {cpe} are both Jira's {status.name!r}",
                    key_path="provider.jira.statuses",
                    expected="a different Jira status for each cpe status",
                )
            taken[status.name.casefold()] = cpe
        self.chosen = chosen
        self._by_name = taken

    def status_of(self, status: JiraStatus) -> Status:
        found = self._by_name.get(status.name.casefold())
        if found is not None:
            return found
        return _BY_CATEGORY.get(status.category, "pending")

    def target(self, to: Status) -> JiraStatus:
        return self.chosen[to]

    def pick(
        self, key: str, current: JiraStatus, to: Status, transitions: list[dict[str, Any]]
    ) -> str:
        """The id of the transition of ``key`` that leads to ``to``'s status."""
        target = self.chosen[to]
        leads: list[str] = []
        for transition in transitions:
            reaches = jira_status(transition.get("to"))
            if (reaches.id and reaches.id == target.id) or (
                reaches.name.casefold() == target.name.casefold()
            ):
                return str(transition.get("id"))
            leads.append(f"{transition.get('name')!s} -> {reaches.name}")
        raise ProviderError(
            f"issue {key} ({current.name}) has no transition to {target.name!r} (cpe's {to}): "
            f"its transitions: {', '.join(leads) or 'none'}; add one to the workflow or map "
            f"{to} to a reachable status in [provider.jira] statuses",
            status=409,
            transient=False,
        )
