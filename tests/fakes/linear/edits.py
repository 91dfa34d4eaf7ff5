"""The fake Linear's writes, shared by the mutations and the people helpers, each doing what
Linear does with it.

What changes an issue's ``updatedAt`` (Linear: "the last time at which the entity was
meaningfully updated"): an edit that changes something (title, description, state, labels,
project, priority), archiving or trashing it, and a relation created or deleted on either
side (Linear writes the relation change into both issues' history). A no-op edit changes
nothing. A comment does not: it is an entity of its own with its own ``updatedAt``, and the
issue is untouched (a client that must see new comments asks for them).

History (``Issue.history``): an entry per edit that moves the state (``fromStateId`` /
``toStateId``) or the labels (``addedLabelIds`` / ``removedLabelIds``), with its actor; an
issue created with labels gets an entry adding them by its creator.

Text: Linear keeps a description or a comment as a ProseMirror document and gives back markdown
derived from it; raw HTML does not survive that, HTML comments included. The fake drops
``<!-- ... -->`` from what is written (the cautious reading: a client must not hide anything
it needs in an HTML comment).

State types set the issue's ``startedAt`` (first move to ``started``), ``completedAt`` (to
``completed``) and ``canceledAt`` (to ``canceled``); leaving ``completed``/``canceled`` clears
them again.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable

from tests.fakes.linear.errors import invalid
from tests.fakes.linear.records import (
    RELATION_TYPES,
    Comment,
    History,
    Issue,
    Label,
    Project,
    Relation,
    State,
    Team,
    User,
)

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def markdown(text: str | None) -> str | None:
    """``text`` as Linear gives it back: without HTML comments."""
    return None if text is None else _HTML_COMMENT.sub("", text)


def slug(title: str) -> str:
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "-".join(words)[:60].strip("-")


class Edits:
    """The writes of ``Workspace`` (which holds the stores and the clock named here)."""

    clock: int
    _serial: itertools.count[int]
    teams: dict[str, Team]
    states: dict[str, State]
    labels: dict[str, Label]
    projects: dict[str, Project]
    issues: dict[str, Issue]
    relations: dict[str, Relation]
    history: dict[str, History]
    comments: dict[str, Comment]
    # Told of each change a webhook reports (``hooks.py``): the entity's type, the action
    # (create, update, remove), its id, the actor's id, and (updates) the issue's fields before.
    listener: Callable[[str, str, str, str | None, dict[str, object]], None] | None = None

    def tick(self) -> int:
        raise NotImplementedError

    def heard(
        self,
        kind: str,
        action: str,
        entity_id: str,
        actor: User | None,
        before: dict[str, object] | None = None,
    ) -> None:
        if self.listener is not None:
            self.listener(kind, action, entity_id, actor.id if actor else None, before or {})

    def synced(self) -> float:
        raise NotImplementedError

    def chosen_id(self, kind: str, wanted: str | None) -> str:
        raise NotImplementedError

    def new_id(self, kind: str) -> str:
        raise NotImplementedError

    def team_states(self, team: Team) -> list[State]:
        raise NotImplementedError

    # ------------------------------------------------------------------ writes

    def create_label(
        self,
        actor: User | None,
        name: str,
        team: Team | None,
        *,
        color: str | None = None,
        description: str | None = None,
        label_id: str | None = None,
    ) -> Label:
        if not name.strip():
            raise invalid("Argument Validation Error", "A label needs a name.")
        for label in self.labels.values():
            same_scope = label.team_id == (team.id if team else None) or label.team_id is None
            if label.name.casefold() == name.casefold() and same_scope and not label.archived_at:
                raise invalid(
                    "duplicate label name",
                    f"A label named {label.name!r} already exists.",
                )
        now = self.tick()
        label = Label(
            self.chosen_id("label", label_id),
            now,
            now,
            None,
            name,
            team.id if team else None,
            color or "#6e79d6",
            description,
            False,
            actor.id if actor else None,
        )
        self.labels[label.id] = label
        self.synced()
        return label

    def create_issue(
        self,
        actor: User,
        team: Team,
        title: str,
        description: str | None = None,
        *,
        state: State | None = None,
        labels: Iterable[Label] = (),
        project: Project | None = None,
        priority: int = 0,
        issue_id: str | None = None,
    ) -> Issue:
        if not title.strip():
            raise invalid("Argument Validation Error", "An issue needs a title.")
        if state is None:
            state = self.default_state(team)
        elif state.team_id != team.id:
            raise invalid(
                "Argument Validation Error",
                f"The state {state.name!r} is not a workflow state of the team {team.key}.",
            )
        chosen = self.chosen_id("issue", issue_id)
        label_ids = self.checked_labels(team, labels)
        now = self.tick()
        team.issue_count += 1
        issue = Issue(
            chosen,
            now,
            now,
            None,
            team.id,
            team.issue_count,
            f"{team.key}-{team.issue_count}",
            title,
            markdown(description),
            actor.id,
            state.id,
            label_ids,
            project.id if project else None,
            priority,
        )
        self.stamp_state(issue, state, now)
        self.issues[issue.id] = issue
        if label_ids:
            self.record(issue, actor, now, added_label_ids=list(label_ids))
        self.synced()
        self.heard("Issue", "create", issue.id, actor)
        return issue

    def default_state(self, team: Team) -> State:
        """Where a new issue starts: the team's first backlog state, else its first unstarted."""
        states = self.team_states(team)
        for wanted in ("backlog", "unstarted"):
            for state in states:
                if state.type == wanted and state.archived_at is None:
                    return state
        raise ValueError(f"team {team.key} has no backlog or unstarted state")

    def checked_labels(self, team: Team, labels: Iterable[Label]) -> list[str]:
        ids: list[str] = []
        for label in labels:
            if label.team_id not in (team.id, None):
                raise invalid(
                    "Argument Validation Error",
                    f"The label {label.name!r} belongs to another team.",
                )
            if label.is_group:
                raise invalid(
                    "Argument Validation Error",
                    f"The label {label.name!r} is a group: choose one of its labels.",
                )
            if label.id not in ids:
                ids.append(label.id)
        return ids

    def update_issue(
        self,
        actor: User,
        issue: Issue,
        *,
        title: str | None = None,
        description: str | None = None,
        state: State | None = None,
        label_ids: list[str] | None = None,
        project: Project | bool | None = False,
        priority: int | None = None,
    ) -> bool:
        """Apply an edit; True when something changed (then ``updatedAt`` moves). Checked
        whole before anything changes: a refused edit changes nothing."""
        team = self.teams[issue.team_id]
        if title is not None and not title.strip():
            raise invalid("Argument Validation Error", "An issue needs a title.")
        if priority is not None and priority not in range(5):
            raise invalid("Argument Validation Error", "priority must be 0 to 4.")
        if state is not None and state.team_id != team.id:
            raise invalid(
                "Argument Validation Error",
                f"The state {state.name!r} is not a workflow state of the team {team.key}.",
            )
        wanted = (
            None
            if label_ids is None
            else self.checked_labels(team, (self.labels[i] for i in label_ids))
        )
        now = self.clock + 1000
        changed = False
        before: dict[str, object] = {
            "title": issue.title,
            "description": issue.description,
            "stateId": issue.state_id,
            "labelIds": list(issue.label_ids),
            "priority": issue.priority,
            "projectId": issue.project_id,
            "updatedAt": issue.updated_at,
        }
        if title is not None and title != issue.title:
            issue.title, changed = title, True
        description = markdown(description)
        if description is not None and description != issue.description:
            issue.description, changed = description, True
        if priority is not None and priority != issue.priority:
            issue.priority, changed = priority, True
        if project is not False and (project.id if project else None) != issue.project_id:
            issue.project_id, changed = (project.id if project else None), True
        entry: dict[str, object] = {}
        if state is not None and state.id != issue.state_id:
            entry.update(from_state_id=issue.state_id, to_state_id=state.id)
            issue.state_id, changed = state.id, True
            self.stamp_state(issue, state, now)
        if wanted is not None:
            added = [i for i in wanted if i not in issue.label_ids]
            removed = [i for i in issue.label_ids if i not in wanted]
            if added or removed:
                issue.label_ids, changed = wanted, True
                entry.update(added_label_ids=added or None, removed_label_ids=removed or None)
        if changed:
            self.touch(issue, now)
            if entry:
                self.record(issue, actor, now, **entry)  # type: ignore[arg-type]
            self.synced()
            self.heard("Issue", "update", issue.id, actor, before)
        return changed

    def stamp_state(self, issue: Issue, state: State, now: int) -> None:
        if state.type == "started" and issue.started_at is None:
            issue.started_at = now
        issue.completed_at = now if state.type == "completed" else None
        issue.canceled_at = now if state.type == "canceled" else None

    def touch(self, issue: Issue, now: int | None = None) -> None:
        self.clock = max(self.clock, now or 0)
        issue.updated_at = now if now is not None else self.tick()

    def record(self, issue: Issue, actor: User | None, now: int, **changes: object) -> None:
        entry = History(
            self.new_id("history"), now, now, None, issue.id, actor.id if actor else None
        )
        for name, value in changes.items():
            setattr(entry, name, value)
        self.history[entry.id] = entry

    def archive_issue(self, issue: Issue, *, trash: bool = False) -> None:
        now = self.tick()
        issue.archived_at, issue.trashed = now, trash
        self.touch(issue, now)
        self.synced()
        self.heard("Issue", "remove", issue.id, None)

    def relate(
        self,
        actor: User,
        issue: Issue,
        related: Issue,
        type: str,
        *,
        relation_id: str | None = None,
    ) -> Relation:
        if type not in RELATION_TYPES:
            raise invalid("Argument Validation Error", f"type must be one of {RELATION_TYPES}")
        if issue.id == related.id:
            raise invalid("Argument Validation Error", "An issue cannot be related to itself.")
        for rel in self.relations.values():
            pair = {rel.issue_id, rel.related_issue_id} == {issue.id, related.id}
            if pair and rel.type == type:
                raise invalid(
                    "Argument Validation Error",
                    f"{issue.identifier} and {related.identifier} are related already.",
                )
        chosen = self.chosen_id("relation", relation_id)
        now = self.tick()
        relation = Relation(chosen, now, now, None, type, issue.id, related.id)
        self.relations[relation.id] = relation
        for side in (issue, related):
            self.touch(side, now)
            self.record(side, actor, now)
        self.synced()
        return relation

    def unrelate(self, actor: User, relation: Relation) -> None:
        del self.relations[relation.id]
        now = self.tick()
        for side_id in (relation.issue_id, relation.related_issue_id):
            side = self.issues[side_id]
            self.touch(side, now)
            self.record(side, actor, now)
        self.synced()

    def comment(
        self, actor: User, issue: Issue, body: str, *, comment_id: str | None = None
    ) -> Comment:
        if not body.strip():
            raise invalid("Argument Validation Error", "A comment needs a body.")
        chosen = self.chosen_id("comment", comment_id)
        now = self.tick()
        comment = Comment(chosen, now, now, None, issue.id, actor.id, markdown(body) or "")
        self.comments[comment.id] = comment
        self.synced()
        self.heard("Comment", "create", comment.id, actor)
        return comment

    def add_project(self, name: str) -> Project:
        now = self.tick()
        project = Project(self.new_id("project"), now, now, None, name, slug(name) or "project")
        self.projects[project.id] = project
        return project
