"""Work items as GitHub issues: the reader (pollers, runtimes) and the writer (executor).

An issue's status is its ``status:<value>`` label (none: ``pending``); ``done`` is a closed
issue. A status change replaces the issue's labels in one request, the others as just read
(two, remove then add, would leave an instant in which the issue reads ``pending``, and a poll
that lands there sees a person sending the item back); the read waits for the write's turn in
the pacing first, so a label a person adds meanwhile has the smallest window to be lost in.
Dependencies are "Blocked by #N" lines in the body, and GitHub's native issue dependencies as
well where the repository has them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from adapters.providers.github import markers
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.issue_index import IssueIndex, IssueView
from adapters.providers.github.labels import Labels
from adapters.providers.github.pull_index import PullIndex
from adapters.providers.github.trust import Trust
from adapters.providers.idempotency import create_once
from adapters.support.crashpoints import crashpoint
from domain.errors import NotFoundError, ProviderError
from domain.models import STATUSES, IgnoredWorkItem, RevisionId, Status, WorkItem, WorkItemId

log = logging.getLogger(__name__)


def issue_number(work_item_id: str) -> int:
    if not work_item_id.isdecimal():
        raise NotFoundError(f"work item {work_item_id!r} does not exist: ids are issue numbers")
    return int(work_item_id)


class GitHubWorkItemReader:
    """``WorkProviderReader`` over the repository's issues: the admitted ones (``Trust``);
    the others are ``ignored_work_items``. ``pulls``: the repository's pull requests when they
    are the revisions too (an item's ``linked_revision``); None when the forge is another
    system, whose revisions the engine links to items itself (``work_item_id``)."""

    def __init__(self, issues: IssueIndex, pulls: PullIndex | None, trust: Trust) -> None:
        self._issues = issues
        self._pulls = pulls
        self._trust = trust
        self._ignored: tuple[IgnoredWorkItem, ...] = ()

    def list_work_items(self) -> Sequence[WorkItem]:
        views = self._issues.sync()
        # The pull requests as the revision poller last listed them (listed here only before
        # it ever did): listing them twice a cycle would cost a counted request twice whenever
        # anything was pushed (every pull request embeds the repository, whose pushed_at moves).
        # A link the revision poll finds reaches the engine with that poll's observation.
        linked: dict[str, RevisionId] = {}
        if self._pulls is not None:
            self._pulls.prime()
            linked = self._pulls.linked_revisions()
        items, ignored = [], []
        for v in sorted(views, key=lambda v: v.number):
            admission = self._trust.admit(v)
            if not admission.admitted:
                if not v.closed:
                    ignored.append(
                        IgnoredWorkItem(
                            id=WorkItemId(str(v.number)), title=v.title, reason=admission.reason
                        )
                    )
                continue
            items.append(
                WorkItem(
                    id=WorkItemId(str(v.number)),
                    title=admission.title,
                    status=markers.status_of(v.labels, v.closed),
                    labels=tuple(n for n in v.labels if not markers.is_status_label(n)),
                    blocked_by=tuple(WorkItemId(b) for b in self._issues.open_blockers(v)),
                    linked_revision=linked.get(str(v.number)),
                )
            )
        self._ignored = tuple(ignored)
        return items

    def ignored_work_items(self) -> Sequence[IgnoredWorkItem]:
        return self._ignored

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        view = self._issues.get(issue_number(work_item_id))
        admission = self._trust.admit(view)
        if not admission.admitted:
            raise NotFoundError(f"issue #{work_item_id} is not work: {admission.reason}")
        return markers.user_body(admission.body)


class GitHubWorkItemWriter:
    """``WorkProviderWriter``: creates and edits issues, never twice for one key."""

    def __init__(self, api: GitHubApi, issues: IssueIndex, labels: Labels, trust: Trust) -> None:
        self._api = api
        self._issues = issues
        self._labels = labels
        self._trust = trust

    def _made_by_cpe(self, view: IssueView) -> bool:
        """An issue cpe may take as its own lost write: anyone can copy a key into theirs."""
        return self._trust.trusted(view.author, view.association)

    def create_work_item(
        self,
        title: str,
        body: str,
        labels: Sequence[str] = (),
        blocked_by: Sequence[WorkItemId] = (),
        *,
        idempotency_key: str | None = None,
    ) -> WorkItemId:
        self._labels.ensure_status_labels()
        # The required labels too: an item cpe makes must be one it reads back as work.
        wanted = [
            *dict.fromkeys([*labels, *self._trust.required]),
            markers.status_label("pending"),
        ]
        named = list(dict.fromkeys(blocked_by))
        for b in named:
            if not b.isdecimal() and not markers.is_foreign_blocker(b):
                raise NotFoundError(f"work item {b!r} does not exist: ids are issue numbers")
        # Blockers here are checked and linked natively too; another repository's ("o/r#12")
        # are written down as they are.
        blockers = [self._issues.get(issue_number(b)) for b in named if b.isdecimal()]
        text = markers.issue_body(
            body, [b if not b.isdecimal() else str(int(b)) for b in named], idempotency_key
        )
        created = create_once(
            idempotency_key,
            lambda key: self._issues.find_key(key, self._made_by_cpe),
            lambda: self._issues.note(self._api.create_issue(title, text, wanted)),
            what="issue",
            name=lambda view: f"#{view.number}",
            after=lambda: crashpoint("github.item.after_issue"),
        )
        self._label(created, wanted)
        for blocker in blockers:
            if str(blocker.number) not in created.native_blockers:
                self._add_native_dependency(created.number, blocker)
        return WorkItemId(str(created.number))

    def _label(self, issue: IssueView, wanted: list[str]) -> None:
        """GitHub drops a new issue's labels without a word when the token may not push: add
        them afterwards (a triage user may apply labels that exist). A status label is added
        only to an issue that has none: one found again may have moved on since."""
        has_status = any(markers.is_status_label(n) for n in issue.labels)
        missing = [n for n in wanted if not (has_status and markers.is_status_label(n))]
        if self._labels.apply(issue.number, missing, issue.labels):
            self._issues.get(issue.number)

    def _add_native_dependency(self, number: int, blocker: IssueView) -> None:
        try:
            self._api.add_blocked_by(number, blocker.database_id)
        except ProviderError as exc:
            # Not every repository (or plan) has issue dependencies; the body line is the record.
            log.info("native dependency #%s -> #%s not added: %s", number, blocker.number, exc)

    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        current = self._issues.get(issue_number(work_item_id))
        fields: dict[str, object] = {}
        if body is not None:
            fields["body"] = markers.with_user_body(current.body, body)
        if labels is not None:
            # Status labels are the engine's: replacing a work item's labels keeps its status.
            kept = [n for n in current.labels if markers.is_status_label(n)]
            fields["labels"] = [
                *dict.fromkeys(n for n in labels if not markers.is_status_label(n)),
                *kept,
            ]
        if fields:
            self._api.update_issue(current.number, **fields)
            self._issues.get(current.number)

    def close_work_item(self, work_item_id: WorkItemId) -> None:
        current = self._issues.get(issue_number(work_item_id))
        if not current.closed:
            self._api.update_issue(current.number, state="closed", state_reason="completed")
            self._issues.get(current.number)

    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None:
        if to not in STATUSES:
            raise ProviderError(f"{to!r} is not a work item status", status=422, transient=False)
        self._labels.ensure_status_labels()
        number = issue_number(work_item_id)
        # Each step reads as the old status or the new one, never another: closing comes
        # before the status label goes (a closed issue is done whatever its labels), and the
        # new label before reopening.
        with self._api.transport.write_turn():
            current = self._issues.get(number)
            others = [n for n in current.labels if not markers.is_status_label(n)]
            wanted = others if to == "done" else [*others, markers.status_label(to)]
            if to == "done" and not current.closed:
                self._api.update_issue(number, state="closed", state_reason="completed")
            if [n.strip().casefold() for n in current.labels] != [
                n.strip().casefold() for n in wanted
            ]:
                self._api.set_labels(number, wanted)
            if to != "done" and current.closed:
                self._api.update_issue(number, state="open")
        self._issues.get(number)
