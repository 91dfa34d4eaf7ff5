"""The fake GitLab's project state on the tracker side (people, labels, issues, notes, label
events, links) and the operations its routes and its helpers share, each doing what GitLab does
with it: who may set labels, how a scoped label displaces its scope's other one on Premium,
which label events and system notes an edit leaves."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from tests.fakes.clock import EPOCH_START
from tests.fakes.gitdata import BareRepo
from tests.fakes.gitlab import payloads
from tests.fakes.gitlab.hooks import ProjectHooks
from tests.fakes.gitlab.payloads import PROJECT_ID, Json, Site
from tests.fakes.gitlab.people import People
from tests.fakes.gitlab.records import (
    REPORTER,
    IssueRecord,
    LabelEventRecord,
    LabelRecord,
    LinkRecord,
    MergeRequestRecord,
    NoteRecord,
    Tier,
)
from tests.fakes.gitlab.server import API, Call, forbidden, not_found
from tests.fakes.http import Handler, Reply, Router, ServedFake

CLOSING = re.compile(
    r"\b(?:clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?)"
    r":?\s+#(\d+)\b",
    re.IGNORECASE,
)
IDENTITY = ("Fake GitLab", "noreply@gitlab.invalid")  # the commits GitLab makes itself
LINK_NOTES = {
    "relates_to": ("marked this issue as related to #{}", "marked this issue as related to #{}"),
    "blocks": ("marked this issue as blocking #{}", "marked this issue as blocked by #{}"),
}

PUSHER = "acme"  # who a push hook names: the fake knows no pusher, so the project's owner


class Project(ServedFake):
    """One public project, ``path`` ("acme/widgets"), on a GitLab of ``tier``."""

    def __init__(self, root: Any, path: str, default_branch: str, tier: Tier) -> None:
        self.project_path, self.default_branch, self.tier = path, default_branch, tier
        self.project_id = PROJECT_ID
        self.git = BareRepo.create(
            root / f"{path.rpartition('/')[2]}.git", default_branch, IDENTITY
        )
        self.lock = threading.RLock()
        self.clock = EPOCH_START
        self._ids = iter(range(5000, 10**9))
        self.people = People()
        self.issues: dict[int, IssueRecord] = {}
        self.labels: dict[str, LabelRecord] = {}
        self.notes: list[NoteRecord] = []
        self.label_events: list[LabelEventRecord] = []
        self.links: list[LinkRecord] = []
        self.router = Router()
        self.site = Site("", path)
        self.hooks = ProjectHooks(self)  # type: ignore[arg-type]  # webhooks (``hooks.py``)

    def close(self) -> None:
        self.hooks.close()
        super().close()

    # ------------------------------------------------------------------ plumbing

    @property
    def premium(self) -> bool:
        return self.tier == "premium"

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def next_id(self) -> int:
        return next(self._ids)

    def is_project(self, ref: str) -> bool:
        """``ref`` names this project: its numeric id or its path (any case, encoded or not)."""
        ref = unquote(str(ref))
        return ref == str(self.project_id) or ref.casefold() == self.project_path.casefold()

    def route(
        self, method: str, suffix: str, handler: Handler, op: str, *, project: bool = True
    ) -> None:
        """A route under ``/api/v4/projects/:id`` (``project``) or ``/api/v4``; a project route
        answers ``404 Project Not Found`` for any project but this one."""
        if not project:
            self.router.add(method, API + suffix, handler, op)
            return

        def checked(call: Call) -> Reply:
            if not self.is_project(call.params["project"]):
                raise not_found("Project")
            return handler(call)

        self.router.add(method, f"{API}/projects/(?P<project>[^/]+){suffix}", checked, op)

    def branch_moved(self, branch: str) -> None:
        """A push to ``branch``: the clock moves (and the forge's merge requests follow)."""
        self.tick()
        self.hooks.push(branch, PUSHER)

    # ------------------------------------------------------------------ payloads

    def user(self, username: str) -> Json:
        return payloads.user(self.site, username, self.people.id(username))

    def member(self, username: str) -> Json:
        name = self.people.seen(username)
        return payloads.member(self.site, name, self.people.id(name), self.people.level(name))

    def project_payload(self, viewer: str | None) -> Json:
        opened = sum(1 for i in self.issues.values() if i.state == "opened")
        settings = {**self.project_settings(), "open_issues_count": opened}
        return payloads.project(self.site, settings, self.people.level(viewer), self.default_branch)

    def project_settings(self) -> dict[str, Any]:
        return {}

    def label_payload(self, rec: LabelRecord) -> Json:
        opened = sum(
            1 for i in self.issues.values() if i.state == "opened" and rec.name in i.labels
        )
        return payloads.label(rec, opened)

    def issue_payload(self, rec: IssueRecord) -> Json:
        notes = sum(
            1 for n in self.notes if n.noteable == "Issue" and n.iid == rec.iid and not n.system
        )
        blocking = sum(
            1
            for k in self.links
            if k.link_type == "blocks"
            and k.source == rec.iid
            and self.issues[k.target].state == "opened"
        )
        return payloads.issue(
            self.site,
            rec,
            author=self.user(rec.author),
            closed_by=self.user(rec.closed_by) if rec.closed_by else None,
            notes=notes,
            premium=self.premium,
            blocking=blocking,
        )

    def note_payload(self, rec: NoteRecord, noteable_id: int) -> Json:
        return payloads.note(rec, self.user(rec.author), noteable_id)

    def notes_payload(self, noteable: str, iid: int, noteable_id: int, call: Call) -> list[Json]:
        """Notes, newest first unless ``sort=asc`` (``order_by`` ``created_at`` or
        ``updated_at``: the same for the fake's notes, which no one edits)."""
        found = [n for n in self.notes if n.noteable == noteable and n.iid == iid]
        newest_first = (call.text("sort") or "desc") == "desc"
        found.sort(key=lambda n: (n.created_at, n.id), reverse=newest_first)
        return [self.note_payload(n, noteable_id) for n in found]

    def label_event_payload(self, rec: LabelEventRecord, resource_id: int) -> Json:
        brief = payloads.label_brief(self.labels[rec.label])
        return payloads.label_event(rec, self.user(rec.user), brief, resource_id)

    # ------------------------------------------------------------------ issues

    def issue(self, iid: int) -> IssueRecord:
        found = self.issues.get(iid)
        if found is None:
            raise not_found()
        return found

    def use_label(self, name: str) -> LabelRecord:
        """The project label ``name`` (exactly), created when missing."""
        if name not in self.labels:
            self.labels[name] = LabelRecord(self.next_id(), name)
        return self.labels[name]

    def file_issue(
        self,
        title: str,
        description: str | None,
        author: str,
        labels: Iterable[str],
        *,
        quiet: bool = False,
    ) -> int:
        """``author`` opens an issue; ``labels`` are kept only if they may set them (``quiet``:
        dropped without a word, as GitLab does, else a ValueError)."""
        author = self.people.seen(author)
        labels = list(labels)
        if labels and not self._may_set_labels(author, quiet):
            labels = []
        iid = max(self.issues, default=0) + 1
        stamp = self.tick()
        self.issues[iid] = rec = IssueRecord(iid, title, description, author, stamp, stamp)
        self.hooks.issue(rec, "open", author)
        self.relabel(rec, labels, author, moved=False)
        return iid

    def edit(self, rec: IssueRecord, user: str, args: Mapping[str, Any], *, quiet: bool) -> None:
        """``user`` edits issue ``rec`` as ``PUT /issues/:iid`` does with ``args``."""
        own = user == rec.author
        reporter = self.people.level(user) >= REPORTER
        if not (own or reporter):
            if quiet:
                raise forbidden()
            raise ValueError(
                f"{user} cannot edit #{rec.iid}, which {rec.author} opened: "
                "that takes the Reporter role"
            )
        call = Call("PUT", "", {}, dict(args), user)
        before = (rec.state, list(rec.labels), rec.title, rec.description)
        if call.text("title") is not None:
            rec.title = str(call.text("title"))
        if call.text("description") is not None and call.text("description") != rec.description:
            rec.description = call.text("description")
            self.add_note("Issue", rec.iid, user, "changed the description", system=True)
        wanted = self._wanted_labels(rec, call)
        if wanted is not None and self._may_set_labels(user, quiet):
            self.relabel(rec, wanted, user, moved=False)
        event = call.text("state_event")
        if event == "close" and rec.state == "opened":
            rec.state, rec.closed_at, rec.closed_by = "closed", self.tick(), user
        elif event == "reopen" and rec.state == "closed":
            rec.state, rec.closed_at, rec.closed_by = "opened", None, None
        rec.updated_at = self.tick()
        self._edited(rec, user, before)

    def _edited(self, rec: IssueRecord, user: str, before: tuple[Any, ...]) -> None:
        """The ``Issue Hook`` of an edit: close, reopen or update, with what changed."""
        state, labels, title, description = before
        changes: dict[str, Any] = {}
        if labels != rec.labels:
            changes["labels"] = {"previous": labels, "current": list(rec.labels)}
        if title != rec.title:
            changes["title"] = {"previous": title, "current": rec.title}
        if description != rec.description:
            changes["description"] = {"previous": description, "current": rec.description}
        action = "update"
        if state != rec.state:
            action = "close" if rec.state == "closed" else "reopen"
        elif not changes:
            return
        self.hooks.issue(rec, action, user, changes)

    def _wanted_labels(self, rec: IssueRecord, call: Call) -> list[str] | None:
        labels, add, remove = (
            call.names("labels"),
            call.names("add_labels"),
            call.names("remove_labels"),
        )
        if labels is None and add is None and remove is None:
            return None
        wanted = list(rec.labels) if labels is None else list(labels)
        wanted += [n for n in add or [] if n not in wanted]
        return [n for n in wanted if n not in (remove or [])]

    def _may_set_labels(self, user: str, quiet: bool) -> bool:
        if self.people.level(user) >= REPORTER:
            return True
        if quiet:
            return False
        raise ValueError(
            f"{user} cannot set labels on GitLab: that takes the Reporter role "
            "(GitLab drops the labels of anyone below it)"
        )

    def relabel(
        self,
        rec: IssueRecord | MergeRequestRecord,
        names: Iterable[str],
        actor: str,
        *,
        moved: bool = True,
        noteable: str = "Issue",
    ) -> None:
        """``rec`` (an issue or a merge request) carries ``names`` from now on, created when
        missing; on Premium a scoped label displaces the other labels of its scope (the last
        one named wins). Each label added or removed is a label event by ``actor``."""
        wanted: list[str] = []
        for name in dict.fromkeys(names):
            if self.premium and "::" in name:
                scope = name.rpartition("::")[0]
                wanted = [n for n in wanted if not (("::" in n) and n.rpartition("::")[0] == scope)]
            wanted.append(self.use_label(name).name)
        if moved:
            rec.updated_at = self.tick()
        for name in [n for n in rec.labels if n not in wanted]:
            self._label_event(rec, noteable, actor, name, "remove")
        for name in [n for n in wanted if n not in rec.labels]:
            self._label_event(rec, noteable, actor, name, "add")
        rec.labels = wanted

    def _label_event(
        self, rec: IssueRecord, noteable: str, user: str, label: str, action: str
    ) -> None:
        self.label_events.append(
            LabelEventRecord(self.next_id(), noteable, rec.iid, user, label, action, self.clock)
        )

    def add_note(
        self,
        noteable: str,
        iid: int,
        author: str,
        body: str,
        *,
        system: bool = False,
        discussion: str = "",
        position: dict[str, object] | None = None,
        individual: bool = True,
    ) -> NoteRecord:
        note_id = self.next_id()
        rec = NoteRecord(
            note_id,
            noteable,
            iid,
            self.people.seen(author),
            body,
            self.tick(),
            system,
            discussion or hashlib.sha1(str(note_id).encode(), usedforsecurity=False).hexdigest(),
            position,
            individual=individual,
        )
        self.notes.append(rec)
        self.hooks.note(rec)
        return rec

    def link_issues(self, source: int, target: int, kind: str, user: str) -> LinkRecord | None:
        """A link from issue ``source`` to ``target`` (``is_blocked_by`` stored as ``blocks``
        the other way round), with its system notes on both; None if they are linked already."""
        if kind == "is_blocked_by":
            source, target, kind = target, source, "blocks"
        if any({k.source, k.target} == {source, target} for k in self.links):
            return None
        link = LinkRecord(self.next_id(), source, target, kind, self.tick())
        self.links.append(link)
        there, back = LINK_NOTES[kind]
        self.add_note("Issue", source, user, there.format(target), system=True)
        self.add_note("Issue", target, user, back.format(source), system=True)
        for iid in (source, target):
            self.issues[iid].updated_at = self.clock
        return link

    def close_issues(self, text: str | None, by: str, user: str) -> None:
        """The open issues ``text`` closes ("Closes #N", GitLab's closing patterns) are closed
        by ``user``, a system note naming ``by`` (a merge request's reference) on each."""
        for number in CLOSING.findall(text or ""):
            issue = self.issues.get(int(number))
            if issue is not None and issue.state == "opened":
                issue.state, issue.closed_at, issue.closed_by = "closed", self.tick(), user
                issue.updated_at = self.clock
                self.hooks.issue(issue, "close", user)
                self.add_note(
                    "Issue", issue.iid, user, f"closed via merge request {by}", system=True
                )
