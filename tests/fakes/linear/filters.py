"""Linear's filters (``IssueFilter``, ``TeamFilter``, ...), evaluated over the workspace.

A filter is a tree: each key names a field of the entity and holds a comparator
(``{eq: ...}``, ``{gt: ...}``, ``{in: [...]}``, ``{containsIgnoreCase: ...}``, ``{null:
true}``...), a filter of a related entity (``team: {key: {eq: "ENG"}}``; ``null: true`` on a
nullable one matches when there is none), or a collection filter (``labels: {some: {...}}``,
``every``, ``length``; a field key directly on a collection means some member matches); ``and``
and ``or`` combine filters. Comparisons with a missing value are false (as SQL's), but ``null``.

Dates compare as instants; a ``DateTimeOrDuration`` may be an ISO 8601 duration (``-P2W``: two
weeks ago, ``P1D``: a day from now), taken from the fake's clock.

A key Linear's schema has but the fake does not model (``assignee`` is modelled: nobody is ever
assigned; ``cycle`` is not served at all) is refused with ``FAKE_NOT_IMPLEMENTED``, never
ignored: a filter the fake cannot honour must not answer as if it had.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.fakes.linear.errors import invalid, not_implemented
from tests.fakes.linear.records import Comment, Issue, Label, Project, State, Team, User, parse_ms
from tests.fakes.linear.workspace import Workspace

_DURATION = re.compile(
    r"(?P<sign>-)?P(?:(?P<Y>\d+)Y)?(?:(?P<M>\d+)M)?(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)
_SECONDS = {
    "Y": 365 * 86400,
    "M": 30 * 86400,
    "W": 7 * 86400,
    "D": 86400,
    "h": 3600,
    "m": 60,
    "s": 1,
}

ONE, MANY = "one", "many"


@dataclass(frozen=True)
class Scope:
    """What a filter is judged in: the workspace and who is asking (``isMe``)."""

    workspace: Workspace
    viewer: User


@dataclass(frozen=True)
class Related:
    """A key that leads to another entity (``ONE``, maybe None) or to several (``MANY``)."""

    how: str
    kind: str
    value: Any


@dataclass(frozen=True)
class Aliases:
    """An issue's names for ``IssueIDComparator`` (its id, and its identifier in any case)."""

    names: frozenset[str]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.casefold() in self.names


Fields = Mapping[str, Any]  # filter key -> a plain value (dates as epoch ms) or ``Related``


def _entity(e: Any) -> dict[str, Any]:
    return {
        "id": e.id,
        "createdAt": e.created_at,
        "updatedAt": e.updated_at,
        "archivedAt": e.archived_at,
    }


def _issue(scope: Scope, i: Issue) -> Fields:
    ws = scope.workspace
    return {
        **_entity(i),
        "id": Aliases(frozenset({i.id.casefold(), i.identifier.casefold()})),
        "number": i.number,
        "title": i.title,
        "description": i.description,
        "priority": i.priority,
        "startedAt": i.started_at,
        "completedAt": i.completed_at,
        "canceledAt": i.canceled_at,
        "team": Related(ONE, "team", ws.teams[i.team_id]),
        "state": Related(ONE, "state", ws.states[i.state_id]),
        "creator": Related(ONE, "user", ws.users.get(i.creator_id or "")),
        "assignee": Related(ONE, "user", None),  # the fake assigns nobody
        "delegate": Related(ONE, "user", None),
        "project": Related(ONE, "project", ws.projects.get(i.project_id or "")),
        "labels": Related(MANY, "label", [ws.labels[x] for x in i.label_ids]),
    }


def _team(scope: Scope, t: Team) -> Fields:
    return {**_entity(t), "key": t.key, "name": t.name, "description": None, "private": False}


def _state(scope: Scope, s: State) -> Fields:
    team = scope.workspace.teams[s.team_id]
    return {
        **_entity(s),
        "name": s.name,
        "type": s.type,
        "position": s.position,
        "description": s.description,
        "team": Related(ONE, "team", team),
    }


def _label(scope: Scope, lb: Label) -> Fields:
    ws = scope.workspace
    return {
        **_entity(lb),
        "name": lb.name,
        "isGroup": lb.is_group,
        "creator": Related(ONE, "user", ws.users.get(lb.creator_id or "")),
        "parent": Related(ONE, "label", None),
        "team": Related(ONE, "team", ws.teams.get(lb.team_id or "")),
    }


def _user(scope: Scope, u: User) -> Fields:
    return {
        **_entity(u),
        "name": u.name,
        "displayName": u.display_name,
        "email": u.email,
        "active": u.active,
        "admin": u.admin,
        "app": False,
        "owner": False,
        "invited": False,
        "isInvited": False,
        "isMe": u.id == scope.viewer.id,
    }


def _project(scope: Scope, p: Project) -> Fields:
    return {**_entity(p), "name": p.name, "slugId": p.slug_id}


def _comment(scope: Scope, c: Comment) -> Fields:
    ws = scope.workspace
    return {
        **_entity(c),
        "body": c.body,
        "user": Related(ONE, "user", ws.users.get(c.user_id or "")),
        "project": Related(ONE, "project", None),
    }


VIEWS: dict[str, tuple[str, Callable[[Scope, Any], Fields]]] = {
    "issue": ("IssueFilter", _issue),
    "team": ("TeamFilter", _team),
    "state": ("WorkflowStateFilter", _state),
    "label": ("IssueLabelFilter", _label),
    "user": ("UserFilter", _user),
    "project": ("ProjectFilter", _project),
    "comment": ("CommentFilter", _comment),
}


def matches(scope: Scope, kind: str, entity: Any, flt: Mapping[str, Any] | None) -> bool:
    """Whether ``entity`` (of ``kind``: ``issue``, ``team``...) passes the filter ``flt``."""
    if not flt:
        return True
    type_name, view = VIEWS[kind]
    fields: Fields | None = None
    for key, cond in flt.items():
        if cond is None:
            continue
        if key == "and":
            if not all(matches(scope, kind, entity, f) for f in cond):
                return False
            continue
        if key == "or":
            if not any(matches(scope, kind, entity, f) for f in cond):
                return False
            continue
        if key == "null":
            continue  # judged by the caller: this entity exists
        if fields is None:
            fields = view(scope, entity)
        if key not in fields:
            raise not_implemented(f"the filter {type_name}.{key}")
        if not _judge(scope, key, fields[key], cond):
            return False
    return True


def _judge(scope: Scope, key: str, value: Any, cond: Mapping[str, Any]) -> bool:
    if isinstance(value, Related):
        if value.how == ONE:
            if value.value is None:
                return cond.get("null") is True
            if cond.get("null") is True:
                return False
            return matches(scope, value.kind, value.value, cond)
        return _collection(scope, value.kind, value.value, cond)
    return compare(scope, value, cond, date=key.endswith("At"))


def _collection(scope: Scope, kind: str, members: list[Any], cond: Mapping[str, Any]) -> bool:
    for key, sub in cond.items():
        if sub is None:
            continue
        if key == "some":
            ok = any(matches(scope, kind, m, sub) for m in members)
        elif key == "every":
            ok = all(matches(scope, kind, m, sub) for m in members)
        elif key == "length":
            ok = compare(scope, len(members), sub, date=False)
        elif key == "null":
            ok = (not members) is sub
        elif key == "and":
            ok = all(_collection(scope, kind, members, f) for f in sub)
        elif key == "or":
            ok = any(_collection(scope, kind, members, f) for f in sub)
        else:
            ok = any(matches(scope, kind, m, {key: sub}) for m in members)
        if not ok:
            return False
    return True


def instant(scope: Scope, text: Any) -> int:
    """A ``DateTimeOrDuration`` as epoch ms: a timestamp, or a duration from the fake's now."""
    if not isinstance(text, str):
        raise invalid("Argument Validation Error", f"not a date or a duration: {text!r}")
    found = _DURATION.fullmatch(text)
    if found and text not in ("P", "-P"):
        seconds = sum(
            float(v) * _SECONDS[k] for k, v in found.groupdict().items() if v and k != "sign"
        )
        sign = -1 if found.group("sign") else 1
        return scope.workspace.clock + round(sign * seconds * 1000)
    try:
        return parse_ms(text)
    except ValueError:
        raise invalid(
            "Argument Validation Error",
            f"not an ISO 8601 date or duration: {text!r}",
        ) from None


def _fold(text: str, accents: bool = False) -> str:
    if accents:
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    return text.casefold()


_STRING_OPS: dict[str, Callable[[str, str], bool]] = {
    "eqIgnoreCase": lambda v, x: _fold(v) == _fold(x),
    "neqIgnoreCase": lambda v, x: _fold(v) != _fold(x),
    "contains": lambda v, x: x in v,
    "containsIgnoreCase": lambda v, x: _fold(x) in _fold(v),
    "containsIgnoreCaseAndAccent": lambda v, x: _fold(x, True) in _fold(v, True),
    "notContains": lambda v, x: x not in v,
    "notContainsIgnoreCase": lambda v, x: _fold(x) not in _fold(v),
    "startsWith": lambda v, x: v.startswith(x),
    "startsWithIgnoreCase": lambda v, x: _fold(v).startswith(_fold(x)),
    "notStartsWith": lambda v, x: not v.startswith(x),
    "endsWith": lambda v, x: v.endswith(x),
    "notEndsWith": lambda v, x: not v.endswith(x),
}


def compare(scope: Scope, value: Any, cond: Mapping[str, Any], *, date: bool) -> bool:
    """A comparator (``{eq: 1}``, ``{gt: "-P1D"}``, ``{null: false}``...) against ``value``."""
    for op, given in cond.items():
        operand = given
        if operand is None:
            continue
        if op == "null":
            if (value is None) is not operand:
                return False
            continue
        if value is None:
            return False
        if isinstance(value, Aliases):
            if op not in ("eq", "neq", "in", "nin"):
                raise not_implemented(f"the comparator {op} on an issue's id")
            names = operand if isinstance(operand, list) else [operand]
            hit = any(n in value for n in names)
            if hit is not (op in ("eq", "in")):
                return False
            continue
        if date:
            operand = (
                [instant(scope, o) for o in operand]
                if isinstance(operand, list)
                else instant(scope, operand)
            )
        if op in _STRING_OPS:
            ok = _STRING_OPS[op](str(value), str(operand))
        elif op == "eq":
            ok = value == operand
        elif op == "neq":
            ok = value != operand
        elif op == "in":
            ok = value in operand
        elif op == "nin":
            ok = value not in operand
        elif op in ("lt", "lte", "gt", "gte"):
            ok = {
                "lt": value < operand,
                "lte": value <= operand,
                "gt": value > operand,
                "gte": value >= operand,
            }[op]
        else:
            raise not_implemented(f"the comparator {op}")
        if not ok:
            return False
    return True
