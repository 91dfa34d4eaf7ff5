"""Work items as Jira issues: the reader (pollers, runtimes) and the writer (executor).

An issue's status is its Jira status, as ``statuses.StatusMap`` reads it; a status change is a
transition (read the issue's transitions, take the one leading to the chosen status). ``done``
is the status chosen for done: closing an item transitions it there. Labels are Jira's labels.
Blockers are issue links of type ``blocks_link``: an item the planner makes with blockers gets
one link per blocker after it is made (a crash between them is made good when the create is
found again by its key). Every create and comment carries cpe's key (``bodies.py``) and is
looked for before it is made, so neither is made twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from adapters.providers import markers
from adapters.providers.admission import has_label, label_key
from adapters.providers.idempotency import create_once
from adapters.providers.jira import bodies
from adapters.providers.jira.api import JiraApi, person_id
from adapters.providers.jira.issue_index import IssueIndex, IssueView, is_key
from adapters.providers.jira.statuses import StatusMap
from adapters.providers.jira.trust import Trust
from adapters.support.crashpoints import crashpoint
from domain.errors import NotFoundError, ProviderError
from domain.models import STATUSES, IgnoredWorkItem, Status, WorkItem, WorkItemId

log = logging.getLogger(__name__)


def issue_key(work_item_id: str) -> str:
    if not is_key(work_item_id):
        raise NotFoundError(
            f"work item {work_item_id!r} does not exist: ids are Jira issue keys (PROJ-12)"
        )
    return work_item_id


class JiraWorkItemReader:
    """``WorkProviderReader`` over the issues the JQL selects: the admitted ones (``Trust``);
    the others are ``ignored_work_items``."""

    def __init__(self, issues: IssueIndex, statuses: StatusMap, trust: Trust) -> None:
        self._issues = issues
        self._statuses = statuses
        self._trust = trust
        self._ignored: tuple[IgnoredWorkItem, ...] = ()

    def list_work_items(self) -> Sequence[WorkItem]:
        views = self._issues.sync()
        items, ignored = [], []
        for v in sorted(views, key=lambda v: _number(v.key)):
            admission = self._trust.admit(v)
            item_id = WorkItemId(v.key)
            if not admission.admitted:
                if not v.status.done:
                    ignored.append(
                        IgnoredWorkItem(id=item_id, title=v.title, reason=admission.reason)
                    )
                continue
            items.append(
                WorkItem(
                    id=item_id,
                    title=admission.title,
                    status=self._statuses.status_of(v.status),
                    labels=v.labels,
                    blocked_by=tuple(WorkItemId(b) for b in self._issues.open_blockers(v)),
                )
            )
        self._ignored = tuple(ignored)
        return items

    def ignored_work_items(self) -> Sequence[IgnoredWorkItem]:
        return self._ignored

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        view = self._issues.get(issue_key(work_item_id))
        admission = self._trust.admit(view)
        if not admission.admitted:
            raise NotFoundError(f"issue {work_item_id} is not work: {admission.reason}")
        return admission.body


class JiraWorkItemWriter:
    """``WorkProviderWriter`` (and ``WorkItemCommenter``): creates and edits issues, never twice
    for one key."""

    def __init__(
        self,
        api: JiraApi,
        issues: IssueIndex,
        *,
        statuses: StatusMap,
        trust: Trust,
        issue_type: str,
        blocks_link: str,
    ) -> None:
        self._api = api
        self._issues = issues
        self._statuses = statuses
        self._trust = trust
        self._issue_type = issue_type
        self._blocks = blocks_link
        self._cloud = api.cloud

    def _made_by_cpe(self, view: IssueView) -> bool:
        """An issue cpe may take as its own lost write: anyone can copy a key into theirs."""
        return self._trust.trusted(view.creator_id)

    def create_work_item(
        self,
        title: str,
        body: str,
        labels: Sequence[str] = (),
        blocked_by: Sequence[WorkItemId] = (),
        *,
        idempotency_key: str | None = None,
    ) -> WorkItemId:
        # The required labels too: an item cpe makes must be one it reads back as work.
        wanted = list(
            dict.fromkeys(n.strip() for n in [*labels, *self._trust.required] if n.strip())
        )
        bad = [n for n in wanted if any(c.isspace() for c in n)]
        if bad:
            raise ProviderError(
                f"Jira labels are single words: {', '.join(map(repr, bad))} has a space",
                status=400,
                transient=False,
            )
        blockers = [issue_key(b) for b in dict.fromkeys(blocked_by)]
        for blocker in blockers:
            if self._issues.known(blocker) is None:
                self._issues.get(blocker)  # NotFoundError when it does not exist
        token = markers.key_token(idempotency_key) if idempotency_key is not None else None
        fields: dict[str, object] = {
            "project": {"key": self._api.settings.project},
            "issuetype": {"name": self._issue_type},
            "summary": title,
            "description": bodies.to_jira(body, token, cloud=self._cloud),
            "labels": wanted,
        }
        created = create_once(
            token,
            lambda t: self._issues.find_key(t, self._made_by_cpe),
            lambda: self._issues.get(str(self._api.create_issue(fields)["key"])),
            what="issue",
            name=lambda view: view.key,
            after=lambda: crashpoint("jira.issue.after_create"),
        )
        self._issues.made(created)
        if blockers:
            self._link(created.key, blockers)
        return WorkItemId(created.key)

    def _link(self, key: str, blockers: list[str]) -> None:
        """Link ``key`` as blocked by each of ``blockers`` it is not linked to yet (read
        afresh: a link made before a crash is there)."""
        current = self._issues.get(key)
        for blocker in blockers:
            if blocker in current.blockers:
                continue
            self._api.link(self._blocks, blocker, key)
            crashpoint("jira.issue.after_link")
        self._issues.get(key)

    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        current = self._issues.get(issue_key(work_item_id))
        fields: dict[str, object] = {}
        if body is not None and body != current.body:
            # cpe's key line stays: the create is still found by it.
            fields["description"] = bodies.to_jira(body, current.token, cloud=self._cloud)
        if labels is not None:
            # Replacing an item's labels keeps those that make it work: the required ones, and
            # the admit label it carries.
            kept = [*self._trust.required]
            kept += [n for n in current.labels if has_label([n], self._trust.admit_label)]
            wanted = list(dict.fromkeys(n.strip() for n in [*labels, *kept] if n.strip()))
            if sorted(map(label_key, wanted)) != sorted(map(label_key, current.labels)):
                fields["labels"] = wanted
        if fields:
            self._api.update_issue(current.key, fields)
            crashpoint("jira.issue.after_update")
            self._issues.get(current.key)

    def close_work_item(self, work_item_id: WorkItemId) -> None:
        self.transition_status(work_item_id, "done")

    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None:
        if to not in STATUSES:
            raise ProviderError(f"{to!r} is not a work item status", status=422, transient=False)
        key = issue_key(work_item_id)
        target = self._statuses.target(to)
        with self._api.transport.write_turn():
            current = self._issues.get(key)
            if current.status.name.casefold() == target.name.casefold():
                return
            transition = self._statuses.pick(key, current.status, to, self._api.transitions(key))
            self._api.transition(key, transition)
        crashpoint("jira.issue.after_transition")
        self._issues.get(key)

    def comment(
        self, work_item_id: WorkItemId, body: str, *, idempotency_key: str | None = None
    ) -> None:
        """``body`` (Markdown) as a comment; the same key never comments twice."""
        key = issue_key(work_item_id)
        token = markers.key_token(idempotency_key) if idempotency_key is not None else None
        if token is not None:
            for made in self._api.comments(key):
                if bodies.from_jira(made.get("body"))[1] == token and self._trust.trusted(
                    person_id(made.get("author"))
                ):
                    return
        self._api.add_comment(key, bodies.to_jira(body, token, cloud=self._cloud))
        crashpoint("jira.issue.after_comment")


def _number(key: str) -> tuple[str, int]:
    project, _, number = key.rpartition("-")
    return project, int(number) if number.isdigit() else 0
