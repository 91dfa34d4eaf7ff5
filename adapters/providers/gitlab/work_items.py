"""Work items as GitLab issues: the reader (pollers, runtimes) and the writer (executor).

An issue's status is its status label (``labels.StatusLabels``; none: ``pending``); ``done`` is
a closed issue. A status change is one ``PUT`` carrying the issue's whole label list (the status
label swapped, the others as just read) and, to or from ``done``, its ``state_event``: GitLab
applies both at once, so no poll ever reads the issue without its status, or closed with an
old one. The read waits for the write's turn in the pacing first, so a label a person adds
meanwhile has the smallest window to be lost in.

Blockers (``blockers``): ``text`` writes "Blocked by #N" lines in the description; ``links``
makes issue links of type ``is_blocked_by`` (GitLab Premium and up) and no lines; ``auto``
writes the lines and makes the links as long as GitLab allows them (a refusal, or a link GitLab
made as ``relates_to`` instead, turns links off for this provider's life: the lines are the
record).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from adapters.providers import markers
from adapters.providers.gitlab.api import GitLabApi
from adapters.providers.gitlab.issue_index import IssueIndex, IssueView
from adapters.providers.gitlab.labels import Labels, StatusLabels, label_key
from adapters.providers.gitlab.settings import BlockerSource
from adapters.providers.gitlab.trust import Trust
from adapters.providers.idempotency import create_once
from adapters.support.crashpoints import crashpoint
from domain.errors import ConflictError, NotFoundError, ProviderError
from domain.models import STATUSES, IgnoredWorkItem, RevisionId, Status, WorkItem, WorkItemId

log = logging.getLogger(__name__)

Linked = Callable[[], Mapping[str, str]]  # work item id -> its open revision's id


def issue_iid(work_item_id: str) -> int:
    if not work_item_id.isdecimal():
        raise NotFoundError(f"work item {work_item_id!r} does not exist: ids are issue numbers")
    return int(work_item_id)


class Blockers:
    """How blockers are written and read, and whether GitLab has refused links yet."""

    def __init__(self, mode: BlockerSource) -> None:
        self.mode = mode
        self.refused = False

    @property
    def links(self) -> bool:
        return self.mode == "links" or (self.mode == "auto" and not self.refused)

    @property
    def lines(self) -> bool:
        return self.mode != "links"

    def refuse(self, why: str) -> None:
        if self.mode == "links":
            raise ProviderError(
                f"GitLab refuses blocking issue links ({why}): its tier may not have them; set "
                '[provider.gitlab] blockers = "auto" or "text"',
                transient=False,
            )
        if not self.refused:
            log.warning(
                "GitLab refuses blocking issue links (%s): blockers are description lines", why
            )
        self.refused = True


class GitLabWorkItemReader:
    """``WorkProviderReader`` over the project's issues: the admitted ones (``Trust``); the
    others are ``ignored_work_items``. ``linked``: the open revisions by work item, when this
    provider also serves them (else the engine links them)."""

    def __init__(
        self, issues: IssueIndex, statuses: StatusLabels, trust: Trust, linked: Linked | None
    ) -> None:
        self._issues = issues
        self._statuses = statuses
        self._trust = trust
        self._linked = linked
        self._ignored: tuple[IgnoredWorkItem, ...] = ()

    def list_work_items(self) -> Sequence[WorkItem]:
        views = self._issues.sync()
        linked = self._linked() if self._linked is not None else {}
        items, ignored = [], []
        for v in sorted(views, key=lambda v: v.iid):
            admission = self._trust.admit(v)
            item_id = WorkItemId(str(v.iid))
            if not admission.admitted:
                if not v.closed:
                    ignored.append(
                        IgnoredWorkItem(id=item_id, title=v.title, reason=admission.reason)
                    )
                continue
            revision = linked.get(item_id)
            items.append(
                WorkItem(
                    id=item_id,
                    title=admission.title,
                    status=self._statuses.status_of(v.labels, v.closed),
                    labels=tuple(self._statuses.others(v.labels)),
                    blocked_by=tuple(WorkItemId(b) for b in self._issues.open_blockers(v)),
                    linked_revision=RevisionId(revision) if revision is not None else None,
                )
            )
        self._ignored = tuple(ignored)
        return items

    def ignored_work_items(self) -> Sequence[IgnoredWorkItem]:
        return self._ignored

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        view = self._issues.get(issue_iid(work_item_id))
        admission = self._trust.admit(view)
        if not admission.admitted:
            raise NotFoundError(f"issue #{work_item_id} is not work: {admission.reason}")
        return markers.user_body(admission.body)


class GitLabWorkItemWriter:
    """``WorkProviderWriter``: creates and edits issues, never twice for one key."""

    def __init__(
        self,
        api: GitLabApi,
        issues: IssueIndex,
        *,
        labels: Labels,
        statuses: StatusLabels,
        trust: Trust,
        blockers: Blockers,
    ) -> None:
        self._api = api
        self._issues = issues
        self._labels = labels
        self._statuses = statuses
        self._trust = trust
        self._blockers = blockers

    def _made_by_cpe(self, view: IssueView) -> bool:
        """An issue cpe may take as its own lost write: anyone can copy a key into theirs."""
        return self._trust.trusted(view.author_id, view.author)

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
            *dict.fromkeys(n for n in [*labels, *self._trust.required] if n.strip()),
            self._statuses.label("pending"),
        ]
        named = list(dict.fromkeys(blocked_by))
        for b in named:
            if not b.isdecimal() and not markers.is_foreign_blocker(b):
                raise NotFoundError(f"work item {b!r} does not exist: ids are issue numbers")
        # Blockers here must exist; another project's ("group/project#12") are taken as named.
        local = [self._issues.get(issue_iid(b)) for b in named if b.isdecimal()]
        ids = [str(int(b)) if b.isdecimal() else b for b in named]
        text = markers.issue_body(body, ids if self._blockers.lines else [], idempotency_key)
        created = create_once(
            idempotency_key,
            lambda key: self._issues.find_key(key, self._made_by_cpe),
            lambda: self._issues.note(self._api.create_issue(title, text, wanted), links=False),
            what="issue",
            name=lambda view: f"#{view.iid}",
            after=lambda: crashpoint("gitlab.issue.after_create"),
        )
        self._label(created, wanted)
        if self._blockers.links and ids:
            self._link(created, [str(v.iid) for v in local] + [b for b in ids if not b.isdecimal()])
        return WorkItemId(str(created.iid))

    def _label(self, issue: IssueView, wanted: list[str]) -> None:
        """GitLab drops a new issue's labels without a word when the token's user may not set
        them: add what is missing. A status label is added only to an issue that has none: one
        found again may have moved on since."""
        has_status = any(self._statuses.is_status(n) for n in issue.labels)
        have = {label_key(n) for n in issue.labels}
        missing = [
            n
            for n in wanted
            if label_key(n) not in have and not (has_status and self._statuses.is_status(n))
        ]
        if missing:
            self._api.update_issue(issue.iid, add_labels=",".join(missing))
            self._issues.get(issue.iid)

    def _link(self, issue: IssueView, blockers: list[str]) -> None:
        """Link ``issue`` as blocked by each of ``blockers`` it is not linked to yet (read
        afresh: a link made before a crash is there)."""
        current = self._issues.get(issue.iid, links=True)
        for blocker in blockers:
            if blocker in current.link_blockers:
                continue
            project, _, number = blocker.rpartition("#")
            try:
                made = self._api.link_issue(
                    issue.iid, int(number), "is_blocked_by", project=project or None
                )
            except ConflictError:
                continue  # linked meanwhile: what we wanted
            except ProviderError as exc:
                if exc.transient:
                    raise
                self._blockers.refuse(str(exc))
                return
            crashpoint("gitlab.issue.after_link")
            if made.get("link_type") == "relates_to":
                # An instance that ignores the type (blocked issues are a paid feature) makes
                # a plain relation: no blocker, and none will be.
                self._blockers.refuse("it made a relates_to link instead")
                return
        self._issues.get(issue.iid)

    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        current = self._issues.get(issue_iid(work_item_id))
        fields: dict[str, object] = {}
        if body is not None:
            description = markers.with_user_body(current.body, body)
            if description != current.body:  # as it is already: nothing to write again
                fields["description"] = description
        if labels is not None:
            # Status labels are the engine's: replacing a work item's labels keeps its status.
            kept = [n for n in current.labels if self._statuses.is_status(n)]
            wanted = [
                *dict.fromkeys(n for n in labels if n.strip() and not self._statuses.is_status(n)),
                *kept,
            ]
            if sorted(map(label_key, wanted)) != sorted(map(label_key, current.labels)):
                fields["labels"] = wanted
        if fields:
            self._issues.note(self._api.update_issue(current.iid, **fields), links=False)
            crashpoint("gitlab.issue.after_update")

    def close_work_item(self, work_item_id: WorkItemId) -> None:
        current = self._issues.get(issue_iid(work_item_id))
        if not current.closed:
            self._issues.note(self._api.update_issue(current.iid, state_event="close"), links=False)
            crashpoint("gitlab.issue.after_update")

    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None:
        if to not in STATUSES:
            raise ProviderError(f"{to!r} is not a work item status", status=422, transient=False)
        self._labels.ensure_status_labels()
        iid = issue_iid(work_item_id)
        with self._api.adapter.write_turn():
            current = self._issues.get(iid)
            others = self._statuses.others(current.labels)
            wanted = others if to == "done" else [*others, self._statuses.label(to)]
            fields: dict[str, object] = {}
            if [label_key(n) for n in current.labels] != [label_key(n) for n in wanted]:
                fields["labels"] = wanted
            if to == "done" and not current.closed:
                fields["state_event"] = "close"
            if to != "done" and current.closed:
                fields["state_event"] = "reopen"
            if fields:
                self._issues.note(self._api.update_issue(iid, **fields), links=False)
                crashpoint("gitlab.issue.after_transition")
