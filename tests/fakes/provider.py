"""An in-memory provider that implements every provider port "in the simplest way possible".

``FakeTracker`` holds the data; ``fake_provider()`` hands out one object per port, so a test can
check that no component was given both the reader and the writer of one entity type. Every
call is counted (``calls``), and faults can be injected per method (``fail_next``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.errors import ConflictError, NotFoundError
from domain.models import (
    Pipeline,
    ReviewHistory,
    ReviewInlineComment,
    ReviewSubmission,
    Revision,
    RevisionFile,
    RevisionId,
    Spec,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.ports import ProviderInterfaces
from domain.results import AgentReview


@dataclass
class FakeTracker:
    work_items: dict[str, WorkItem] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)
    revisions: dict[str, Revision] = field(default_factory=dict)
    files: dict[str, list[RevisionFile]] = field(default_factory=dict)
    reviews: dict[str, ReviewHistory] = field(default_factory=dict)
    review_keys: set[str] = field(default_factory=set)
    specs: dict[str, Spec] = field(default_factory=dict)
    blobs: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    log: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)
    faults: dict[str, list[BaseException]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    # -- test helpers
    def add_item(
        self,
        wid: str,
        status: Status = "pending",
        title: str | None = None,
        body: str = "",
        blocked_by: Sequence[str] = (),
    ) -> WorkItem:
        item = WorkItem.model_validate(
            {"id": wid, "title": title or f"Item {wid}", "status": status, "blocked_by": blocked_by}
        )
        with self.lock:
            self.work_items[wid] = item
            self.bodies[wid] = body or f"Body of {wid}"
        return item

    def add_spec(self, path: str, sha: str, text: str = "") -> None:
        with self.lock:
            self.specs[path] = Spec(path=path, blob_sha=sha)
            self.blobs[sha] = text or f"spec {path} at {sha}"

    def fail_next(self, method: str, *errors: BaseException) -> None:
        with self.lock:
            self.faults.setdefault(method, []).extend(errors)

    def wait_for(self, predicate: object, timeout: float = 30.0) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)  # type: ignore[arg-type]

    def _call(self, method: str, *args: object) -> None:
        with self.lock:
            self.calls[method] += 1
            self.log.append((method, args))
            pending = self.faults.get(method)
            fault = pending.pop(0) if pending else None
        if fault is not None:
            raise fault

    def _done(self) -> None:
        with self.changed:
            self.changed.notify_all()


class FakeWorkReader:
    def __init__(self, t: FakeTracker):
        self.t = t

    def list_work_items(self) -> Sequence[WorkItem]:
        self.t._call("list_work_items")
        with self.t.lock:
            return list(self.t.work_items.values())

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        self.t._call("get_work_item_body", work_item_id)
        with self.t.lock:
            if work_item_id not in self.t.bodies:
                raise NotFoundError(f"no work item {work_item_id}")
            return self.t.bodies[work_item_id]


class FakeWorkWriter:
    def __init__(self, t: FakeTracker):
        self.t = t

    def create_work_item(
        self,
        title: str,
        body: str,
        labels: Sequence[str] = (),
        blocked_by: Sequence[WorkItemId] = (),
        *,
        idempotency_key: str | None = None,
    ) -> WorkItemId:
        self.t._call("create_work_item", title, idempotency_key)
        with self.t.lock:
            if idempotency_key and idempotency_key in self.t.keys:
                return WorkItemId(self.t.keys[idempotency_key])
            wid = str(len(self.t.work_items) + 1)
            while wid in self.t.work_items:
                wid = str(int(wid) + 1)
            self.t.work_items[wid] = WorkItem(
                id=WorkItemId(wid),
                title=title,
                status="pending",
                labels=tuple(labels),
                blocked_by=tuple(blocked_by),
            )
            self.t.bodies[wid] = body
            if idempotency_key:
                self.t.keys[idempotency_key] = wid
        self.t._done()
        return WorkItemId(wid)

    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        self.t._call("update_work_item", work_item_id)
        with self.t.lock:
            item = self._get(work_item_id)
            if labels is not None:
                self.t.work_items[work_item_id] = item.model_copy(update={"labels": tuple(labels)})
            if body is not None:
                self.t.bodies[work_item_id] = body
        self.t._done()

    def close_work_item(self, work_item_id: WorkItemId) -> None:
        self.transition_status(work_item_id, "done")

    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None:
        self.t._call("transition_status", work_item_id, to)
        with self.t.lock:
            item = self._get(work_item_id)
            self.t.work_items[work_item_id] = item.model_copy(update={"status": to})
        self.t._done()

    def _get(self, work_item_id: str) -> WorkItem:
        if work_item_id not in self.t.work_items:
            raise NotFoundError(f"no work item {work_item_id}")
        return self.t.work_items[work_item_id]


class FakeRevisionReader:
    def __init__(self, t: FakeTracker):
        self.t = t

    def list_revisions(self) -> Sequence[Revision]:
        self.t._call("list_revisions")
        with self.t.lock:
            return list(self.t.revisions.values())

    def get_revision_files(self, revision_id: RevisionId) -> Sequence[RevisionFile]:
        self.t._call("get_revision_files", revision_id)
        with self.t.lock:
            return list(self.t.files.get(revision_id, []))

    def get_review_history(self, revision_id: RevisionId) -> ReviewHistory:
        self.t._call("get_review_history", revision_id)
        with self.t.lock:
            return self.t.reviews.get(revision_id, ReviewHistory())


class FakeRevisionWriter:
    def __init__(self, t: FakeTracker):
        self.t = t

    def create_from_patch(
        self,
        work_item_id: WorkItemId,
        branch_name: str,
        title: str,
        body: str,
        patch: str,
        *,
        idempotency_key: str | None = None,
    ) -> Revision:
        self.t._call("create_from_patch", work_item_id, idempotency_key)
        with self.t.lock:
            if idempotency_key and idempotency_key in self.t.keys:
                return self.t.revisions[self.t.keys[idempotency_key]]
            rid = f"r{len(self.t.revisions) + 1}"
            revision = Revision(
                id=RevisionId(rid),
                title=title,
                work_item_id=work_item_id,
                branch=branch_name,
                head_sha=f"{rid}-h1",
                pipeline=Pipeline(status="success"),
            )
            self.t.revisions[rid] = revision
            self.t.files[rid] = [RevisionFile(path="f.py", status="added", patch=patch)]
            if idempotency_key:
                self.t.keys[idempotency_key] = rid
        self.t._done()
        return revision

    def update_from_patch(
        self, revision_id: RevisionId, patch: str, *, idempotency_key: str | None = None
    ) -> Revision:
        self.t._call("update_from_patch", revision_id, idempotency_key)
        with self.t.lock:
            revision = self.t.revisions[revision_id]
            n = int(revision.head_sha.rsplit("h", 1)[1]) + 1
            revision = revision.model_copy(update={"head_sha": f"{revision_id}-h{n}"})
            self.t.revisions[revision_id] = revision
            self.t.files[revision_id] = [RevisionFile(path="f.py", status="modified", patch=patch)]
        self.t._done()
        return revision

    def post_review(
        self,
        revision_id: RevisionId,
        head_sha: str,
        review: AgentReview,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        self.t._call("post_review", revision_id, head_sha, review.verdict)
        with self.t.lock:
            if idempotency_key is not None and idempotency_key in self.t.review_keys:
                return
            if idempotency_key is not None:
                self.t.review_keys.add(idempotency_key)
            history = self.t.reviews.get(revision_id, ReviewHistory())
            self.t.reviews[revision_id] = ReviewHistory(
                reviews=(
                    *history.reviews,
                    ReviewSubmission(author="cpe", state=review.verdict, body=review.summary),
                ),
                inline_comments=(
                    *history.inline_comments,
                    *(
                        ReviewInlineComment(path=c.path, line=c.line, author="cpe", body=c.body)
                        for c in review.comments
                    ),
                ),
            )
            revision = self.t.revisions[revision_id]
            self.t.revisions[revision_id] = revision.model_copy(update={"reviewed_sha": head_sha})
        self.t._done()

    def merge(self, revision_id: RevisionId) -> str:
        self.t._call("merge", revision_id)
        with self.t.lock:
            revision = self.t.revisions[revision_id]
            if revision.state == "closed":
                raise ConflictError(f"revision {revision_id} is closed")
            self.t.revisions[revision_id] = revision.model_copy(update={"state": "merged"})
        self.t._done()
        return f"merge-{revision_id}"


class FakeSpecReader:
    def __init__(self, t: FakeTracker):
        self.t = t

    def list_specs(self) -> Sequence[Spec]:
        self.t._call("list_specs")
        with self.t.lock:
            return list(self.t.specs.values())

    def read_spec(self, path: str) -> str:
        self.t._call("read_spec", path)
        with self.t.lock:
            spec = self.t.specs.get(path)
            if spec is None:
                raise NotFoundError(f"no spec {path}")
            return self.t.blobs[spec.blob_sha]

    def read_blob(self, blob_sha: str) -> str:
        self.t._call("read_blob", blob_sha)
        with self.t.lock:
            if blob_sha not in self.t.blobs:
                raise NotFoundError(f"no blob {blob_sha}")
            return self.t.blobs[blob_sha]


def fake_provider(tracker: FakeTracker | None = None) -> tuple[FakeTracker, ProviderInterfaces]:
    t = tracker or FakeTracker()
    return t, ProviderInterfaces(
        work_item_reader=FakeWorkReader(t),
        work_item_writer=FakeWorkWriter(t),
        revision_reader=FakeRevisionReader(t),
        revision_writer=FakeRevisionWriter(t),
        spec_reader=FakeSpecReader(t),
    )
