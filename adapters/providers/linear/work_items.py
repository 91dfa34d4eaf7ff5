"""Work items as Linear issues: the reader (pollers, runtimes) and the writer (executor).

A work item's id is its issue's identifier (``ENG-12``); its status is its workflow state
(``workflow.Workflow``); its labels are its labels; its blockers are the issues that block it
(``blocks`` relations) and are not completed or canceled. A status change is one
``issueUpdate`` of ``stateId``; ``done`` is the team's completed state.

Creates are idempotent by id: an issue, relation or comment cpe makes for a key gets an id
derived from it (``api.made_id``), so one a lost answer or a kill left made is found by asking
for that id, and taken only when cpe's own user (or a trusted person) made it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from adapters.providers.admission import has_label
from adapters.providers.idempotency import create_once
from adapters.providers.linear.api import LinearApi, made_id
from adapters.providers.linear.issue_index import IssueIndex, IssueView
from adapters.providers.linear.trust import Trust
from adapters.providers.linear.workflow import Labels, Workflow
from adapters.support.crashpoints import crashpoint
from domain.errors import ConflictError, NotFoundError, ProviderError
from domain.models import STATUSES, IgnoredWorkItem, Status, WorkItem, WorkItemId

log = logging.getLogger(__name__)

_IDENTIFIER = re.compile(r"^[A-Z][A-Z0-9]*-\d+$")


def identifier(work_item_id: str, team: str) -> str:
    """A work item id as an issue identifier; any other shape is no issue of Linear's."""
    if not _IDENTIFIER.match(work_item_id):
        raise NotFoundError(
            f"work item {work_item_id!r} does not exist: ids are issue identifiers ({team}-12)"
        )
    return work_item_id


def _number(identifier: str) -> tuple[str, int]:
    key, _, number = identifier.rpartition("-")
    return (key, int(number) if number.isdecimal() else 0)


class LinearWorkItemReader:
    """``WorkProviderReader`` over the team's issues: the admitted ones (``Trust``); the others
    are ``ignored_work_items``."""

    def __init__(
        self, issues: IssueIndex, workflow: Workflow, labels: Labels, trust: Trust, team: str
    ) -> None:
        self._issues = issues
        self._workflow = workflow
        self._labels = labels
        self._trust = trust
        self._team = team
        self._ignored: tuple[IgnoredWorkItem, ...] = ()

    def list_work_items(self) -> Sequence[WorkItem]:
        views = self._issues.sync()
        items, ignored = [], []
        for view in sorted(views, key=lambda v: _number(v.identifier)):
            self._labels.learn(view.labels)
            admission = self._trust.admit(view)
            item_id = WorkItemId(view.identifier)
            if not admission.admitted:
                if not view.closed:
                    ignored.append(
                        IgnoredWorkItem(id=item_id, title=view.title, reason=admission.reason)
                    )
                continue
            items.append(
                WorkItem(
                    id=item_id,
                    title=admission.title,
                    status=self._workflow.status_of(view.state_id, view.state_type),
                    # A set in Linear: listed by name, whatever order Linear answers in.
                    labels=tuple(sorted(view.label_names, key=str.casefold)),
                    blocked_by=tuple(
                        WorkItemId(b) for b in sorted(self._issues.open_blockers(view), key=_number)
                    ),
                    linked_revision=None,
                )
            )
        self._ignored = tuple(ignored)
        return items

    def ignored_work_items(self) -> Sequence[IgnoredWorkItem]:
        return self._ignored

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        view = self._issues.get(identifier(work_item_id, self._team))
        admission = self._trust.admit(view)
        if not admission.admitted:
            raise NotFoundError(f"issue {work_item_id} is not work: {admission.reason}")
        return admission.body


class LinearWorkItemWriter:
    """``WorkProviderWriter`` (and ``comment``): creates and edits issues, never twice for one
    key."""

    def __init__(
        self,
        api: LinearApi,
        issues: IssueIndex,
        *,
        team: tuple[str, str],  # (id, key)
        workflow: Workflow,
        labels: Labels,
        trust: Trust,
    ) -> None:
        self._api = api
        self._issues = issues
        self._team_id, self._team = team
        self._workflow = workflow
        self._labels = labels
        self._trust = trust

    def create_work_item(
        self,
        title: str,
        body: str,
        labels: Sequence[str] = (),
        blocked_by: Sequence[WorkItemId] = (),
        *,
        idempotency_key: str | None = None,
    ) -> WorkItemId:
        named = list(dict.fromkeys(identifier(b, self._team) for b in blocked_by))
        # Blockers must exist (another team's issue too): their ids are what a relation takes.
        blockers = {b: self._blocker_id(b) for b in named}
        # The required labels too: an item cpe makes must be one it reads back as work.
        label_ids = self._labels.ids(
            [*labels, *self._trust.required, *self._issues.scope_labels], self._trust.admit_label
        )
        fields: dict[str, object] = {
            "teamId": self._team_id,
            "title": title,
            "description": body,
            "stateId": self._workflow.state_for("pending"),
            "labelIds": label_ids,
        }
        fields.update(self._issues.scope_fields())
        issue_id = made_id("issue", self._team_id, idempotency_key) if idempotency_key else None
        if issue_id is not None:
            fields["id"] = issue_id
        created = create_once(
            issue_id,
            self._find_made,
            lambda: self._issues.note(self._api.create_issue(fields)),
            what="issue",
            name=lambda view: view.identifier,
            after=lambda: crashpoint("linear.issue.after_create"),
        )
        if blockers:
            self._relate(created, blockers)
        return WorkItemId(created.identifier)

    def _find_made(self, issue_id: str) -> IssueView | None:
        """The issue cpe made with ``issue_id`` before (a lost answer, a kill), if any: taken
        only when a trusted person made it (an id is no secret)."""
        found = self._api.find_issue(issue_id)
        if found is None:
            return None
        view = self._issues.note(found)
        if view.team_id != self._team_id or not self._trust.trusted(
            view.creator_id, view.creator_email
        ):
            raise ProviderError(
                f"issue {view.identifier} has the id cpe derives for this create, but cpe did "
                "not make it: not taken",
                transient=False,
            )
        return view

    def _blocker_id(self, blocker: str) -> str:
        known = self._issues.known(blocker)
        if known is not None:
            return known.id
        try:
            return str(self._api.issue(blocker)["id"])
        except NotFoundError:
            raise NotFoundError(f"work item {blocker!r} does not exist in Linear") from None

    def _relate(self, issue: IssueView, blockers: dict[str, str]) -> None:
        """Relate ``issue`` as blocked by each of ``blockers`` it is not yet (read afresh: a
        relation made before a crash is there)."""
        current = self._issues.get(issue.identifier)
        have = {b for b, _ in current.blockers}
        for blocker, blocker_id in blockers.items():
            if blocker in have:
                continue
            try:
                self._api.relate(made_id("blocks", blocker_id, issue.id), blocker_id, issue.id)
            except ConflictError as exc:
                # Related meanwhile, or before a lost answer: what we wanted; or related the
                # other way (Linear keeps one relation a pair): left as the person made it.
                log.warning(
                    "%s is not related as blocked by %s: %s", issue.identifier, blocker, exc
                )
                continue
            crashpoint("linear.issue.after_link")
        self._issues.get(issue.identifier)

    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        current = self._issues.get(identifier(work_item_id, self._team))
        fields: dict[str, object] = {}
        if body is not None and body != current.body:
            fields["description"] = body
        if labels is not None:
            # Replacing an item's labels keeps those that make it work: the scope's, the
            # required ones, and the admit label it carries.
            kept = [*self._issues.scope_labels, *self._trust.required]
            kept += [n for n in current.label_names if has_label([n], self._trust.admit_label)]
            wanted = self._labels.ids([*labels, *kept], self._trust.admit_label)
            if sorted(wanted) != sorted(i for i, _ in current.labels):
                fields["labelIds"] = wanted
        if fields:
            self._issues.note(self._api.update_issue(current.id, fields, "update issue"))
            crashpoint("linear.issue.after_update")

    def close_work_item(self, work_item_id: WorkItemId) -> None:
        current = self._issues.get(identifier(work_item_id, self._team))
        if self._workflow.status_of(current.state_id, current.state_type) != "done":
            fields = {"stateId": self._workflow.state_for("done")}
            self._issues.note(self._api.update_issue(current.id, fields, "close issue"))
            crashpoint("linear.issue.after_update")

    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None:
        if to not in STATUSES:
            raise ProviderError(f"{to!r} is not a work item status", status=422, transient=False)
        name = identifier(work_item_id, self._team)
        with self._api.transport.write_turn():
            current = self._issues.get(name)
            if self._workflow.status_of(current.state_id, current.state_type) == to:
                return
            fields = {"stateId": self._workflow.state_for(to)}
            self._issues.note(self._api.update_issue(current.id, fields, f"move issue to {to}"))
            crashpoint("linear.issue.after_transition")

    def comment(
        self, work_item_id: WorkItemId, body: str, *, idempotency_key: str | None = None
    ) -> None:
        """What cpe says on an item, once per key."""
        current = self._issues.get(identifier(work_item_id, self._team))
        comment_id = made_id("comment", current.id, idempotency_key) if idempotency_key else None
        if comment_id is not None and self._api.comment_exists(comment_id):
            return
        try:
            self._api.comment(comment_id, current.id, body)
        except ConflictError:
            if comment_id is None:
                raise
            return  # made before a lost answer
        except ProviderError as exc:
            if comment_id is None or not exc.transient:
                raise
            if not self._api.comment_exists(comment_id):
                raise
            return
        crashpoint("linear.issue.after_comment")
