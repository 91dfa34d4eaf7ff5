"""``FakeGitLab``: one public project's issues, merge requests, pipelines and repository on a
loopback GitLab (``/api/v4``). Tests drive it through python-gitlab or the provider and inspect
it directly (its records, its bare repository, its request log); helpers play the parts of
other people and of CI.

Who is who (``people.py``): ``acme`` owns the project (Owner), ``someone`` (the author helpers
use by default: a teammate) is a Developer, each token's user a member with its
``Token.access_level`` (a bare username: Maintainer); anyone else is a stranger, who can still
read the public project, open issues and comment. A helper that acts as someone does only what
GitLab lets that person do, and refuses the rest with a ValueError.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tests.fakes.gitlab import routes_issues, routes_project
from tests.fakes.gitlab.payloads import Site
from tests.fakes.gitlab.people import level
from tests.fakes.gitlab.project import Project
from tests.fakes.gitlab.records import (
    DEVELOPER,
    GUEST,
    OWNER,
    REPORTER,
    IssueRecord,
    Tier,
    Token,
)
from tests.fakes.gitlab.server import GitLabCore

TEAMMATE = "someone"  # the default author of the helpers' issues and merge requests
OWNER_NAME = "acme"


class FakeGitLab(Project):
    """Start with ``with FakeGitLab(tmp_path / "gl") as gl:``; ``gl.base_url`` is the instance
    root (the API under ``/api/v4``), ``gl.project_path`` "acme/widgets".

    ``tokens`` maps each accepted token to its user's username, or to its ``Token`` (scopes, the
    user's access level). ``tier``: ``free`` or ``premium`` (scoped labels, blocking issue links,
    approval rules). ``now``: the clock the rate limit's window is judged by (a test's clock,
    to reach a reset without waiting)."""

    def __init__(
        self,
        root: Path,
        *,
        path: str = "acme/widgets",
        default_branch: str = "main",
        tokens: Mapping[str, str | Token] | None = None,
        tier: Tier = "free",
        now: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(root, path, default_branch, tier)
        for module in (routes_project, routes_issues):
            module.register(self)
        accepted = {
            token: Token(who) if isinstance(who, str) else who
            for token, who in (tokens or {"test-token": "cpe-bot"}).items()
        }
        self.people.members[self.people.seen(OWNER_NAME)] = OWNER
        self.people.members[self.people.seen(TEAMMATE)] = DEVELOPER
        for token in accepted.values():
            self.people.members[self.people.seen(token.username)] = token.access_level
        self.core = GitLabCore(self.router, accepted, self.lock, now)
        self.base_url = self.start(self.core)
        self.api_url = f"{self.base_url}/api/v4"
        self.site = Site(self.base_url, path)

    def rate_limit(self, limit: int) -> None:
        """``limit`` requests a minute from now on; those past it in a window get a 429."""
        with self.lock:
            self.core.rate.limit = limit

    # ------------------------------------------------------------------ the repository

    def seed(self, files: Mapping[str, str | bytes], message: str = "initial") -> str:
        """The first commit of the default branch."""
        with self.lock:
            return self.git.commit_files(self.default_branch, files, message)

    def commit_to_default(self, files: Mapping[str, str | bytes | None], message: str) -> str:
        """Someone else pushes a commit to the default branch (``None`` deletes a file)."""
        return self.push(self.default_branch, files, message)

    def push(self, branch: str, files: Mapping[str, str | bytes | None], message: str) -> str:
        """Someone else pushes a commit on top of ``branch``."""
        with self.lock:
            assert self.git.resolve(f"refs/heads/{branch}"), f"no branch {branch}: seed() first"
            sha = self.git.commit_files(branch, files, message)
            self.branch_moved(branch)
            return sha

    def branch_moved(self, branch: str) -> None:
        """A push to ``branch``: whatever follows it (merge requests) follows."""
        self.tick()

    def default_head(self) -> str:
        head = self.git.resolve(f"refs/heads/{self.default_branch}")
        assert head is not None, "the fake's default branch has no commit: seed() it"
        return head

    # ------------------------------------------------------------------ who is who

    def add_member(self, username: str, access_level: str | int) -> None:
        """``username`` becomes a member with ``access_level`` (``"developer"`` or 30), or
        takes that level if a member already."""
        with self.lock:
            self.people.members[self.people.seen(username)] = level(access_level)

    def remove_member(self, username: str) -> None:
        with self.lock:
            self.people.members.pop(self.people.find(username) or username, None)

    def add_user(self, username: str, *, bot: bool = False) -> int:
        """An account ``username`` exists (a ``bot``: a project or group access token's user);
        returns its id."""
        with self.lock:
            name = self.people.seen(username)
            if bot:
                self.people.bots.add(name)
            return self.people.id(name)

    def user_id(self, username: str) -> int:
        with self.lock:
            return self.people.id(username)

    # ------------------------------------------------------------------ acting as someone

    def open_issue(
        self, title: str, body: str = "", *, author: str = TEAMMATE, labels: Iterable[str] = ()
    ) -> int:
        """``author`` opens an issue (no request is made or recorded); returns its iid. Anyone
        may; ``labels`` take the Reporter role, as on GitLab."""
        with self.lock:
            return self.file_issue(title, body, author, labels)

    def label(self, iid: int, name: str, *, by: str = TEAMMATE) -> None:
        """``by`` adds the label ``name`` to issue ``iid`` (created if missing): an ``add``
        label event by them (on Premium, a scoped label displaces its scope's other one, a
        ``remove`` event). Takes the Reporter role."""
        with self.lock:
            rec = self.issue_or_fail(iid)
            self.require(by, REPORTER, "label issues")
            if name not in rec.labels:
                self.relabel(rec, [*rec.labels, name], self.people.seen(by))

    def unlabel(self, iid: int, name: str, *, by: str = TEAMMATE) -> None:
        with self.lock:
            rec = self.issue_or_fail(iid)
            self.require(by, REPORTER, "remove labels")
            if name not in rec.labels:
                raise ValueError(f"#{iid} has no label {name!r}")
            self.relabel(rec, [n for n in rec.labels if n != name], self.people.seen(by))

    def comment(self, iid: int, body: str, *, by: str = TEAMMATE) -> int:
        """``by`` comments on issue ``iid`` (anyone may on a public project); returns the
        note's id."""
        with self.lock:
            rec = self.issue_or_fail(iid)
            note = self.add_note("Issue", iid, by, body)
            rec.updated_at = self.clock
            return note.id

    def edit_issue(self, iid: int, *, by: str = TEAMMATE, **changes: object) -> None:
        """``by`` edits issue ``iid`` as ``PUT /issues/:iid`` would with ``changes`` (``title``,
        ``description``, ``labels``, ``add_labels``, ``remove_labels``, ``state_event``):
        the author edits and closes their own issue, anyone else takes the Reporter role."""
        with self.lock:
            self.edit(self.issue_or_fail(iid), self.people.seen(by), changes, quiet=False)

    def close_issue(self, iid: int, *, by: str = TEAMMATE) -> None:
        self.edit_issue(iid, by=by, state_event="close")

    def link(
        self, iid: int, other: int, link_type: str = "relates_to", *, by: str = TEAMMATE
    ) -> None:
        """``by`` links issue ``iid`` to ``other`` (``relates_to``; ``blocks`` or
        ``is_blocked_by`` on Premium only)."""
        with self.lock:
            self.issue_or_fail(iid), self.issue_or_fail(other)
            if link_type != "relates_to" and not self.premium:
                raise ValueError(
                    f"GitLab Free has no {link_type} links (blocked issues are Premium)"
                )
            self.require(by, GUEST, "link issues")
            if self.link_issues(iid, other, link_type, self.people.seen(by)) is None:
                raise ValueError(f"#{iid} and #{other} are linked already")

    def issue_or_fail(self, iid: int) -> IssueRecord:
        found = self.issues.get(iid)
        if found is None:
            raise ValueError(f"no issue #{iid}")
        return found

    def require(self, username: str, least: int, doing: str) -> None:
        """A ValueError unless ``username`` holds at least ``least``: helpers make no one do
        what GitLab would refuse them."""
        held = self.people.level(username)
        if held < least:
            raise ValueError(f"{username} (access level {held}) cannot {doing} on GitLab: that "
                             f"takes access level {least}")  # fmt: skip
