"""The part of JQL the fake Jira understands, read as Jira reads it, and Jira's 400 for the rest.

Clauses: ``project``, ``key`` (``issuekey``, ``id``), ``labels``, ``status``, ``statusCategory``,
``issuetype`` (``type``), ``summary ~ "text"``, ``created`` and ``updated``; operators ``=``,
``!=``, ``in (...)``, ``not in (...)``, ``is [not] EMPTY`` (labels), ``>``, ``>=``, ``<``,
``<=`` (dates); ``AND``, ``OR``, parentheses; ``ORDER BY`` created, updated, key, id, summary,
status, each ``ASC`` or ``DESC`` (several, comma-separated, at most seven).

Dates are Jira's: ``"yyyy/MM/dd HH:mm"``, ``"yyyy-MM-dd HH:mm"``, ``"yyyy/MM/dd"``,
``"yyyy-MM-dd"`` (minute precision), read in the searching user's time zone, or a period
relative to now (``-5m``, ``-2h``, ``-1d``, ``-1w``, ``"-4w 2d"``). Values Jira checks exist:
a project, a status, an issue type, and an issue key (``key = PROJ-99`` for an issue that does not
exist is a 400, as on Jira). Anything else is a 400 ``errorMessages`` in Jira's words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tests.fakes.jira.jql_lexer import JqlError, Token, tokenize, unserved
from tests.fakes.jira.records import CATEGORIES, IssueRecord
from tests.fakes.jira.site import Site

Predicate = Callable[[IssueRecord], bool]
DATE_FORMATS = ("%Y/%m/%d %H:%M", "%Y-%m-%d %H:%M", "%Y/%m/%d", "%Y-%m-%d")
PERIOD = re.compile(r"^-?\s*(?:\d+[wdhm]\s*)+$")
FIELDS = {
    "project": "project",
    "key": "key",
    "issuekey": "key",
    "id": "key",
    "labels": "labels",
    "status": "status",
    "statuscategory": "statusCategory",
    "issuetype": "issuetype",
    "type": "issuetype",
    "summary": "summary",
    "created": "created",
    "createddate": "created",
    "updated": "updated",
    "updateddate": "updated",
}
ORDERABLE = ("created", "updated", "key", "summary", "status")
MAX_ORDER = 7


@dataclass
class Query:
    where: Predicate | None  # None: no restriction (an unbounded query)
    order: list[tuple[str, bool]]  # (field, descending)

    def run(self, site: Site, reconcile: frozenset[str] = frozenset()) -> list[IssueRecord]:
        """The issues matched, as the search index sees them (lagging behind the last changes
        while ``site.lagging``, except the issues whose ids are in ``reconcile``); each answered
        as it is now."""
        found = []
        for issue in site.issues.values():
            seen = issue if issue.id in reconcile else site.indexed(issue)
            if seen is not None and (self.where is None or self.where(seen)):
                found.append(issue)
        for name, descending in reversed(self.order or [("created", True)]):
            found.sort(key=lambda i, n=name: _sort_key(site, i, n), reverse=descending)
        return found


def _sort_key(site: Site, issue: IssueRecord, name: str) -> Any:
    if name == "key":
        project, _, number = issue.key.partition("-")
        return (project, int(number))
    if name == "status":
        return site.status(issue.status_id).name
    if name == "summary":
        return issue.summary.casefold()
    return getattr(issue, name)


class Parser:
    def __init__(self, text: str, site: Site, time_zone: str, browse: bool = True) -> None:
        self.browse = browse  # False: the project is invisible to the searcher
        self.text = text
        self.site = site
        self.zone = ZoneInfo(time_zone)
        self.tokens = tokenize(text)
        self.at = 0

    # ------------------------------------------------------------------ reading tokens

    def peek(self) -> Token:
        return self.tokens[self.at]

    def take(self) -> Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def word(self, *words: str) -> bool:
        token = self.peek()
        return token.kind == "word" and token.text.casefold() in words

    def expected(self, what: str) -> JqlError:
        got = self.peek().text
        return JqlError(
            f"Error in the JQL Query: Expecting {what} but got '{got}'. The query was: {self.text}"
        )

    # ------------------------------------------------------------------ the grammar

    def parse(self) -> Query:
        where = None if self.word("order") or self.peek().kind == "eof" else self.disjunction()
        order = self.order_by() if self.word("order") else []
        if self.peek().kind != "eof":
            raise self.expected("either 'OR' or 'AND'")
        return Query(where, order)

    def disjunction(self) -> Predicate:
        parts = [self.conjunction()]
        while self.word("or"):
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else lambda i: any(p(i) for p in parts)

    def conjunction(self) -> Predicate:
        parts = [self.term()]
        while self.word("and"):
            self.take()
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else lambda i: all(p(i) for p in parts)

    def term(self) -> Predicate:
        if self.word("not"):
            self.take()
            inner = self.term()
            return lambda i: not inner(i)
        if self.peek() == Token("op", "("):
            self.take()
            inner = self.disjunction()
            if self.take() != Token("op", ")"):
                self.at -= 1
                raise self.expected("')'")
            return inner
        return self.clause()

    def clause(self) -> Predicate:
        token = self.take()
        if token.kind not in ("word", "str"):
            self.at -= 1
            raise self.expected("a field name")
        field = FIELDS.get(token.text.casefold())
        if field is None:
            unserved(token.text)
            raise JqlError(
                f"Field '{token.text}' does not exist or you do not have permission to view it."
            )
        op = self.operator()
        if op in ("in", "not in"):
            values = self.values()
        elif op in ("is", "is not"):
            if not self.word("empty", "null"):
                raise self.expected("'EMPTY'")
            self.take()
            values = []
        else:
            values = [self.value()]
        return self.predicate(field, op, values)

    def operator(self) -> str:
        token = self.take()
        if token.kind == "op" and token.text in ("=", "!=", ">", ">=", "<", "<=", "~", "!~"):
            return token.text
        if token.kind == "word" and token.text.casefold() == "in":
            return "in"
        if token.kind == "word" and token.text.casefold() in ("not", "is"):
            first = token.text.casefold()
            if first == "not" and self.word("in"):
                self.take()
                return "not in"
            if first == "is":
                if self.word("not"):
                    self.take()
                    return "is not"
                return "is"
        self.at -= 1
        raise self.expected("operator")

    def value(self) -> str:
        token = self.take()
        if token.kind not in ("word", "str"):
            self.at -= 1
            raise self.expected("either a value, list or function")
        if self.peek() == Token("op", "("):
            raise JqlError(
                f"Error in the JQL Query: the fake Jira knows no JQL function "
                f"'{token.text}()'. The query was: {self.text}"
            )
        return token.text

    def values(self) -> list[str]:
        if self.take() != Token("op", "("):
            self.at -= 1
            raise self.expected("'('")
        out = [self.value()]
        while self.peek() == Token("op", ","):
            self.take()
            out.append(self.value())
        if self.take() != Token("op", ")"):
            self.at -= 1
            raise self.expected("')'")
        return out

    def order_by(self) -> list[tuple[str, bool]]:
        self.take()
        if not self.word("by"):
            raise self.expected("'by'")
        self.take()
        order: list[tuple[str, bool]] = []
        while True:
            token = self.take()
            name = FIELDS.get(token.text.casefold()) if token.kind in ("word", "str") else None
            if name is None or name not in ORDERABLE:
                if token.kind == "eof":
                    self.at -= 1
                    raise self.expected("a field name")
                unserved(token.text)
                raise JqlError(
                    f"Field '{token.text}' does not exist or you do not have permission to view it."
                )
            descending = False
            if self.word("asc", "desc"):
                descending = self.take().text.casefold() == "desc"
            order.append((name, descending))
            if self.peek() != Token("op", ","):
                break
            self.take()
        if len(order) > MAX_ORDER:
            raise JqlError(f"The ORDER BY clause can contain a maximum of {MAX_ORDER} fields.")
        return order

    # ------------------------------------------------------------------ meaning

    def predicate(self, field: str, op: str, values: list[str]) -> Predicate:
        if field in ("created", "updated"):
            return self.dates(field, op, values)
        if op in (">", ">=", "<", "<="):
            raise JqlError(f"The operator '{op}' is not supported by the '{field}' field.")
        if field == "summary":
            if op not in ("~", "!~"):
                raise JqlError(f"The operator '{op}' is not supported by the 'summary' field.")
            needle = values[0].casefold()
            return lambda i: (needle in i.summary.casefold()) == (op == "~")
        if op in ("~", "!~"):
            raise JqlError(f"The operator '{op}' is not supported by the '{field}' field.")
        if op in ("is", "is not"):
            if field != "labels":
                raise JqlError(f"The operator '{op}' is not supported by the '{field}' field.")
            return lambda i: (not i.labels) == (op == "is")
        wanted = {self.canonical(field, v) for v in values}
        positive = op in ("=", "in")

        def matches(issue: IssueRecord) -> bool:
            have = self.facts(field, issue)
            return bool(have & wanted) == positive

        return matches

    def canonical(self, field: str, value: str) -> str:
        site = self.site
        if field == "project":
            if value.upper() not in (site.project_key, site.project_id) or not self.browse:
                raise JqlError(f"The value '{value}' does not exist for the field 'project'.")
            return site.project_key
        if field == "key":
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*-\d+|\d+", value):
                raise JqlError(f"The issue key '{value}' for field 'key' is invalid.")
            issue = site.issue(value)
            if issue is None:
                raise JqlError(f"An issue with key '{value}' does not exist for field 'key'.")
            return issue.key
        if field == "status":
            status = site.status_named(value) or next(
                (s for s in site.statuses if s.id == value), None
            )
            if status is None:
                raise JqlError(f"The value '{value}' does not exist for the field 'status'.")
            return status.id
        if field == "statusCategory":
            for key, (number, name, _) in CATEGORIES.items():
                if value.casefold() in (key, name.casefold(), str(number)):
                    return key
            raise JqlError(f"The value '{value}' does not exist for the field 'statusCategory'.")
        if field == "issuetype":
            found = next(
                (t for t in site.issue_types if value.casefold() in (t.name.casefold(), t.id)),
                None,
            )
            if found is None:
                raise JqlError(f"The value '{value}' does not exist for the field 'issuetype'.")
            return found.id
        return value  # labels: any value, matched exactly

    def facts(self, field: str, issue: IssueRecord) -> set[str]:
        if field == "project":
            return {self.site.project_key}
        if field == "key":
            return {issue.key}
        if field == "status":
            return {issue.status_id}
        if field == "statusCategory":
            return {self.site.status(issue.status_id).category}
        if field == "issuetype":
            return {issue.type_id}
        return set(issue.labels)

    def dates(self, field: str, op: str, values: list[str]) -> Predicate:
        if op not in ("=", "!=", ">", ">=", "<", "<="):
            raise JqlError(f"The operator '{op}' is not supported by the '{field}' field.")
        moment = self.moment(field, values[0])
        compare: dict[str, Callable[[float], bool]] = {
            "=": lambda t: t == moment,
            "!=": lambda t: t != moment,
            ">": lambda t: t > moment,
            ">=": lambda t: t >= moment,
            "<": lambda t: t < moment,
            "<=": lambda t: t <= moment,
        }
        test = compare[op]
        return lambda i: test(getattr(i, field))

    def moment(self, field: str, text: str) -> float:
        for fmt in DATE_FORMATS:
            try:
                parsed = datetime.strptime(text, fmt)
            except ValueError:
                continue
            return parsed.replace(tzinfo=self.zone).timestamp()
        if PERIOD.match(text):
            seconds = {"w": 604800, "d": 86400, "h": 3600, "m": 60}
            total = sum(int(n) * seconds[u] for n, u in re.findall(r"(\d+)([wdhm])", text))
            sign = -1 if text.strip().startswith("-") else 1
            return self.site.clock + sign * total
        raise JqlError(
            f"Date value '{text}' for field '{field}' is invalid. Valid formats include: "
            "'yyyy/MM/dd HH:mm', 'yyyy-MM-dd HH:mm', 'yyyy/MM/dd', 'yyyy-MM-dd', or a period "
            "format e.g. '-5d', '4w 2d'."
        )


def parse(text: str, site: Site, time_zone: str = "UTC", browse: bool = True) -> Query:
    """``text`` read as Jira reads it for a user in ``time_zone`` (``browse``: who may see the
    project; for anyone else it does not exist); a ``JqlError`` otherwise."""
    return Parser(text, site, time_zone, browse).parse()
