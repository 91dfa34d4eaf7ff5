"""Project webhooks of the fake GitLab: hooks (``FakeGitLab.hooks.add``) and the deliveries
GitLab sends them when the project changes.

As GitLab documents it (user/project/integrations/webhooks.md, "Delivery headers";
webhook_events.md): a POST of the event's JSON with ``X-Gitlab-Event`` (``Issue Hook``,
``Merge Request Hook``, ``Note Hook``, ``Pipeline Hook``, ``Push Hook``), the hook's secret
token *in plain text* in ``X-Gitlab-Token`` (only when it has one; no HMAC),
``X-Gitlab-Event-UUID`` (one per triggering event, shared by every hook), ``Idempotency-Key``
(one per delivery, kept by a retry or "Resend Request"), ``X-Gitlab-Webhook-UUID`` (new on every
attempt), ``X-Gitlab-Instance`` and ``User-Agent: GitLab/<version>``. A hook subscribes per
event type (``push_events``, ``issues_events``, ``merge_requests_events``, ``note_events``,
``pipeline_events``). The receiver has 10 s (GitLab.com). ``redeliver(key)`` resends one as
"Resend Request" does.

Payloads are rendered on the sender's thread under the fake's lock and POSTed outside it
(``tests/fakes/deliveries.py``). A project with no hook sends nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.fakes.clock import iso_ms
from tests.fakes.deliveries import DEFAULT_TIMEOUT, Delivery, Sender
from tests.fakes.gitlab.payloads import PROJECT_ID

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab
    from tests.fakes.gitlab.records import (
        IssueRecord,
        MergeRequestRecord,
        NoteRecord,
        PipelineRecord,
    )

Json = dict[str, Any]
VERSION = "18.6.0"
ZERO = "0" * 40
# X-Gitlab-Event -> the hook setting that subscribes to it.
EVENTS = {
    "Push Hook": "push_events",
    "Issue Hook": "issues_events",
    "Merge Request Hook": "merge_requests_events",
    "Note Hook": "note_events",
    "Pipeline Hook": "pipeline_events",
}


@dataclass
class ProjectHook:
    """A project webhook: its URL, its secret token (None: no ``X-Gitlab-Token``), the event
    settings it has on (default: all of ``EVENTS``)."""

    id: int
    url: str
    token: str | None = None
    events: frozenset[str] = frozenset(EVENTS.values())

    def wants(self, event: str) -> bool:
        return EVENTS[event] in self.events


class ProjectHooks:
    """The project's hooks and its delivery log (``FakeGitLab.hooks``)."""

    def __init__(self, gl: FakeGitLab, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.gl = gl
        self.hooks: dict[int, ProjectHook] = {}
        self.sender = Sender("fake-gitlab", timeout)
        self._heads: dict[str, str] = {}  # each branch's head as of the last push hooks heard

    # ------------------------------------------------------------------ for tests

    def add(
        self, url: str, token: str | None = None, events: Iterable[str] | None = None
    ) -> ProjectHook:
        """A new hook; ``events``: hook settings (``issues_events``...), all when None."""
        chosen = frozenset(EVENTS.values() if events is None else events)
        unknown = chosen - set(EVENTS.values())
        if unknown:
            raise ValueError(f"no hook setting {sorted(unknown)}: {sorted(EVENTS.values())}")
        with self.gl.lock:
            hook = ProjectHook(self.gl.next_id(), url, token, chosen)
            self.hooks[hook.id] = hook
            self._heads = self._branch_heads()
            return hook

    @property
    def deliveries(self) -> list[Delivery]:
        return self.sender.deliveries()

    def redeliver(self, key: str) -> list[Delivery]:
        """ "Resend Request": the same body and ``Idempotency-Key``, a new
        ``X-Gitlab-Webhook-UUID``."""
        return self.sender.redeliver(key)

    def wait_idle(self, timeout: float = 30.0) -> None:
        self.sender.wait_idle(timeout)

    def close(self) -> None:
        self.sender.close()

    # ------------------------------------------------------------------ used by the fake

    def issue(self, rec: IssueRecord, action: str, user: str, changes: Json | None = None) -> None:
        """``Issue Hook``: open, update, close, reopen."""
        if self.hooks:
            self._queue("Issue Hook", action, lambda: self._issue(rec, action, user, changes))

    def relabeled(self, rec: IssueRecord, before: list[str], user: str) -> None:
        """An ``Issue Hook`` update: ``user`` changed the labels from ``before``."""
        changes = {"labels": {"previous": before, "current": list(rec.labels)}}
        self.issue(rec, "update", user, changes)

    def merge_request(
        self, mr: MergeRequestRecord, action: str, user: str, oldrev: str | None = None
    ) -> None:
        """``Merge Request Hook``: open, update (``oldrev``: the head before a push), close,
        reopen, merge, approved."""
        if self.hooks:
            self._queue("Merge Request Hook", action, lambda: self._mr(mr, action, user, oldrev))

    def note(self, rec: NoteRecord) -> None:
        """``Note Hook``: a comment (not a system note) on an issue or a merge request."""
        if self.hooks and not rec.system:
            self._queue("Note Hook", "create", lambda: self._note(rec))

    def pipeline(self, pipeline: PipelineRecord) -> None:
        if self.hooks:
            self._queue("Pipeline Hook", pipeline.status, lambda: self._pipeline(pipeline))

    def push(self, branch: str, user: str) -> None:
        """``Push Hook``: ``branch`` moved (from the head hooks last saw)."""
        if not self.hooks:
            return
        after = self.gl.head_of(branch) or ZERO
        before = self._heads.get(branch, ZERO)
        self._heads[branch] = after
        self._queue("Push Hook", None, lambda: self._push(branch, before, after, user))

    # ------------------------------------------------------------------ deliveries

    def _queue(self, event: str, action: str | None, render: Callable[[], Json]) -> None:
        event_uuid = str(uuid.uuid4())

        def build() -> list[Delivery]:
            with self.gl.lock:
                hooks = [h for h in self.hooks.values() if h.wants(event)]
                if not hooks:
                    return []
                body = json.dumps(render()).encode()
            return [self._delivery(h, event, action, event_uuid, body) for h in hooks]

        self.sender.queue(build)

    def _delivery(
        self, hook: ProjectHook, event: str, action: str | None, event_uuid: str, body: bytes
    ) -> Delivery:
        key = str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"GitLab/{VERSION}",
            "X-Gitlab-Event": event,
            "X-Gitlab-Event-UUID": event_uuid,
            "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),
            "Idempotency-Key": key,
            "X-Gitlab-Instance": self.gl.base_url,
        }
        if hook.token:
            headers["X-Gitlab-Token"] = hook.token
        return Delivery(
            key, hook.url, event, action, body, headers, hook.id, resend_headers=_resend
        )

    # ------------------------------------------------------------------ payloads

    def _user(self, username: str) -> Json:
        people = self.gl.people
        name = people.seen(username)
        return {
            "id": people.id(name),
            "name": name.replace(".", " ").title(),
            "username": name,
            "avatar_url": None,
            "email": "[REDACTED]",
        }

    def _project(self) -> Json:
        site = self.gl.site
        return {
            "id": PROJECT_ID,
            "name": site.name,
            "description": None,
            "web_url": site.web,
            "avatar_url": None,
            "git_ssh_url": f"git@127.0.0.1:{site.path}.git",
            "git_http_url": f"{site.web}.git",
            "namespace": site.namespace,
            "visibility_level": 20,
            "path_with_namespace": site.path,
            "default_branch": self.gl.default_branch,
            "ci_config_path": None,
            "homepage": site.web,
            "url": f"git@127.0.0.1:{site.path}.git",
            "ssh_url": f"git@127.0.0.1:{site.path}.git",
            "http_url": f"{site.web}.git",
        }

    def _repository(self) -> Json:
        site = self.gl.site
        return {
            "name": site.name,
            "url": f"git@127.0.0.1:{site.path}.git",
            "description": None,
            "homepage": site.web,
        }

    def _labels(self, names: Iterable[str]) -> list[Json]:
        out = []
        for name in names:
            rec = self.gl.labels[name]
            out.append(
                {
                    "id": rec.id,
                    "title": rec.name,
                    "color": rec.color,
                    "project_id": PROJECT_ID,
                    "created_at": iso_ms(self.gl.clock),
                    "updated_at": iso_ms(self.gl.clock),
                    "template": False,
                    "description": rec.description,
                    "type": "ProjectLabel",
                    "group_id": None,
                }
            )
        return out

    def _issue_attributes(self, rec: IssueRecord) -> Json:
        people = self.gl.people
        return {
            "id": 90_000 + rec.iid,
            "iid": rec.iid,
            "title": rec.title,
            "description": rec.description,
            "state": rec.state,
            "state_id": 1 if rec.state == "opened" else 2,
            "author_id": people.id(rec.author),
            "project_id": PROJECT_ID,
            "assignee_ids": [],
            "confidential": False,
            "created_at": iso_ms(rec.created_at),
            "updated_at": iso_ms(rec.updated_at),
            "closed_at": iso_ms(rec.closed_at),
            "url": f"{self.gl.site.web}/-/issues/{rec.iid}",
            "labels": self._labels(rec.labels),
        }

    def _issue(self, rec: IssueRecord, action: str, user: str, changes: Json | None) -> Json:
        attributes = {**self._issue_attributes(rec), "action": action}
        changes = dict(changes or {})
        if "labels" in changes:  # label objects, as GitLab gives them
            changes["labels"] = {k: self._labels(v) for k, v in changes["labels"].items()}
        return {
            "object_kind": "issue",
            "event_type": "issue",
            "user": self._user(user),
            "project": self._project(),
            "object_attributes": attributes,
            "repository": self._repository(),
            "assignees": [],
            "labels": attributes["labels"],
            "changes": changes,
        }

    def _mr_attributes(self, mr: MergeRequestRecord) -> Json:
        people, site = self.gl.people, self.gl.site
        commit = self.gl.git.commit_info(mr.head_sha)
        return {
            "id": 80_000 + mr.iid,
            "iid": mr.iid,
            "title": mr.title,
            "description": mr.description,
            "state": mr.state,
            "author_id": people.id(mr.author),
            "source_branch": mr.source_branch,
            "target_branch": mr.target_branch,
            "source_project_id": PROJECT_ID,
            "target_project_id": PROJECT_ID,
            "merge_status": "can_be_merged",
            "detailed_merge_status": self.gl.detailed_status(mr),
            "created_at": iso_ms(mr.created_at),
            "updated_at": iso_ms(mr.updated_at),
            "merge_commit_sha": mr.merge_commit_sha,
            "url": f"{site.web}/-/merge_requests/{mr.iid}",
            "source": self._project(),
            "target": self._project(),
            "last_commit": {
                "id": mr.head_sha,
                "message": commit.message,
                "title": commit.message.splitlines()[0] if commit.message else "",
                "timestamp": iso_ms(commit.committer[2]),
                "url": f"{site.web}/-/commit/{mr.head_sha}",
                "author": {"name": commit.author[0], "email": commit.author[1]},
            },
            "work_in_progress": False,
            "draft": False,
            "labels": self._labels(mr.labels),
        }

    def _mr(self, mr: MergeRequestRecord, action: str, user: str, oldrev: str | None) -> Json:
        attributes = {**self._mr_attributes(mr), "action": action}
        if oldrev is not None:
            attributes["oldrev"] = oldrev
        return {
            "object_kind": "merge_request",
            "event_type": "merge_request",
            "user": self._user(user),
            "project": self._project(),
            "object_attributes": attributes,
            "repository": self._repository(),
            "labels": attributes["labels"],
            "changes": {},
        }

    def _note(self, rec: NoteRecord) -> Json:
        on_issue = rec.noteable == "Issue"
        path = "issues" if on_issue else "merge_requests"
        data: Json = {
            "object_kind": "note",
            "event_type": "note",
            "user": self._user(rec.author),
            "project_id": PROJECT_ID,
            "project": self._project(),
            "repository": self._repository(),
            "object_attributes": {
                "id": rec.id,
                "note": rec.body,
                "noteable_type": rec.noteable,
                "author_id": self.gl.people.id(rec.author),
                "created_at": iso_ms(rec.created_at),
                "updated_at": iso_ms(rec.created_at),
                "project_id": PROJECT_ID,
                "system": rec.system,
                "url": f"{self.gl.site.web}/-/{path}/{rec.iid}#note_{rec.id}",
                "action": "create",
            },
        }
        if on_issue:
            data["issue"] = self._issue_attributes(self.gl.issues[rec.iid])
        else:
            data["merge_request"] = self._mr_attributes(self.gl.merge_requests[rec.iid])
        return data

    def _pipeline(self, pipeline: PipelineRecord) -> Json:
        mr = next(
            (
                m
                for m in self.gl.merge_requests.values()
                if m.head_sha == pipeline.sha and m.state == "opened"
            ),
            None,
        )
        commit = self.gl.git.commit_info(pipeline.sha)
        return {
            "object_kind": "pipeline",
            "object_attributes": {
                "id": pipeline.id,
                "iid": pipeline.iid,
                "ref": pipeline.ref,
                "tag": False,
                "sha": pipeline.sha,
                "before_sha": ZERO,
                "source": pipeline.source,
                "status": pipeline.status,
                "detailed_status": pipeline.status,
                "stages": ["test"],
                "created_at": iso_ms(pipeline.created_at),
                "finished_at": iso_ms(pipeline.updated_at),
                "url": f"{self.gl.site.web}/-/pipelines/{pipeline.id}",
            },
            "merge_request": None
            if mr is None
            else {
                "id": 80_000 + mr.iid,
                "iid": mr.iid,
                "title": mr.title,
                "source_branch": mr.source_branch,
                "target_branch": mr.target_branch,
                "state": mr.state,
                "url": f"{self.gl.site.web}/-/merge_requests/{mr.iid}",
            },
            "user": self._user(pipeline.user),
            "project": self._project(),
            "commit": {
                "id": pipeline.sha,
                "message": commit.message,
                "timestamp": iso_ms(commit.committer[2]),
                "url": f"{self.gl.site.web}/-/commit/{pipeline.sha}",
                "author": {"name": commit.author[0], "email": commit.author[1]},
            },
            "builds": [
                {"id": job.id, "stage": "test", "name": job.name, "status": job.status}
                for job in pipeline.jobs
                if not job.retried
            ],
        }

    def _push(self, branch: str, before: str, after: str, user: str) -> Json:
        shas = [] if after == ZERO else self._new_commits(before, after)
        commits = []
        for sha in shas[-20:]:
            info = self.gl.git.commit_info(sha)
            commits.append(
                {
                    "id": sha,
                    "message": info.message,
                    "title": info.message.splitlines()[0] if info.message else "",
                    "timestamp": iso_ms(info.committer[2]),
                    "url": f"{self.gl.site.web}/-/commit/{sha}",
                    "author": {"name": info.author[0], "email": info.author[1]},
                    "added": [],
                    "modified": [],
                    "removed": [],
                }
            )
        who = self._user(user)
        return {
            "object_kind": "push",
            "event_name": "push",
            "before": before,
            "after": after,
            "ref": f"refs/heads/{branch}",
            "ref_protected": branch == self.gl.default_branch,
            "checkout_sha": after,
            "user_id": who["id"],
            "user_name": who["name"],
            "user_username": who["username"],
            "user_email": "",
            "user_avatar": None,
            "project_id": PROJECT_ID,
            "project": self._project(),
            "commits": commits,
            "total_commits_count": len(shas),
            "repository": self._repository(),
        }

    def _new_commits(self, before: str, after: str) -> list[str]:
        args = ["rev-list", "--reverse", after] + ([] if before == ZERO else [f"^{before}"])
        return self.gl.git.line(*args).split()

    def _branch_heads(self) -> dict[str, str]:
        out = self.gl.git.line("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
        heads = {}
        for line in out.splitlines():
            ref, _, sha = line.partition(" ")
            heads[ref.removeprefix("refs/heads/")] = sha
        return heads


def _resend(delivery: Delivery) -> dict[str, str]:
    """A resent delivery's headers: a new ``X-Gitlab-Webhook-UUID``, the rest as before."""
    return {**delivery.headers, "X-Gitlab-Webhook-UUID": str(uuid.uuid4())}
