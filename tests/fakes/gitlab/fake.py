"""``FakeGitLab``: one public project's issues, merge requests, pipelines and repository on a
loopback GitLab (``/api/v4``). Tests drive it through python-gitlab or the provider and inspect
it directly (its records, its bare repository, its request log); helpers play the parts of
other people and of CI.

Who is who (``people.py``): ``acme`` owns the project (Owner), ``someone`` (the author helpers
use by default: a teammate) is a Developer, ``ci-bot`` (the CI the helpers play) a Developer
project bot, each token's user a member with its
``Token.access_level`` (a bare username: Maintainer); anyone else is a stranger, who can still
read the public project, open issues and comment. A helper that acts as someone does only what
GitLab lets that person do, and refuses the rest with a ValueError.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tests.fakes.gitlab import (
    routes_ci,
    routes_issues,
    routes_merge,
    routes_mrs,
    routes_project,
    routes_repo,
)
from tests.fakes.gitlab.forge import Forge
from tests.fakes.gitlab.payloads import Site
from tests.fakes.gitlab.people import level
from tests.fakes.gitlab.records import (
    DEVELOPER,
    GUEST,
    OWNER,
    REPORTER,
    IssueRecord,
    MergeRequestRecord,
    Tier,
    Token,
)
from tests.fakes.gitlab.server import GitLabCore
from tests.fakes.http import HttpError

TEAMMATE = "someone"  # the default author of the helpers' issues and merge requests
CI = "ci-bot"  # who reports commit statuses unless told otherwise (a project bot, Developer)
OWNER_NAME = "acme"


class FakeGitLab(Forge):
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
        for module in (
            routes_project,
            routes_issues,
            routes_repo,
            routes_mrs,
            routes_merge,
            routes_ci,
        ):
            module.register(self)
        accepted = {
            token: Token(who) if isinstance(who, str) else who
            for token, who in (tokens or {"test-token": "cpe-bot"}).items()
        }
        self.people.members[self.people.seen(OWNER_NAME)] = OWNER
        self.people.members[self.people.seen(TEAMMATE)] = DEVELOPER
        self.people.members[self.people.seen(CI)] = DEVELOPER
        self.people.bots.add(CI)
        for token in accepted.values():
            name = self.people.seen(token.username)
            if token.access_level:  # 0: a stranger's token
                self.people.members[name] = token.access_level
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
                before = list(rec.labels)
                self.relabel(rec, [*rec.labels, name], self.people.seen(by))
                self.hooks.relabeled(rec, before, self.people.seen(by))

    def unlabel(self, iid: int, name: str, *, by: str = TEAMMATE) -> None:
        with self.lock:
            rec = self.issue_or_fail(iid)
            self.require(by, REPORTER, "remove labels")
            if name not in rec.labels:
                raise ValueError(f"#{iid} has no label {name!r}")
            before = list(rec.labels)
            self.relabel(rec, [n for n in rec.labels if n != name], self.people.seen(by))
            self.hooks.relabeled(rec, before, self.people.seen(by))

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
            raise ValueError(
                f"{username} (access level {held}) cannot {doing} on GitLab: that "
                f"takes access level {least}"
            )

    # ------------------------------------------------------------------ merge requests and CI

    def configure(self, **settings: object) -> None:
        """Project settings, as the project's settings page sets them: ``merge_method``
        (``merge``, ``rebase_merge``, ``ff``), ``only_allow_merge_if_pipeline_succeeds``,
        ``only_allow_merge_if_all_discussions_are_resolved``,
        ``allow_merge_on_skipped_pipeline``, ``remove_source_branch_after_merge``,
        ``squash_option``, ``merge_requests_author_approval``; on Premium
        ``approvals_before_merge``."""
        with self.lock:
            unknown = set(settings) - set(self.settings)
            if unknown:
                raise ValueError(
                    f"no project setting {sorted(unknown)}: the fake's are {sorted(self.settings)}"
                )
            if "approvals_before_merge" in settings and not self.premium:
                raise ValueError("approval rules are GitLab Premium")
            method = settings.get("merge_method", self.settings["merge_method"])
            if method not in ("merge", "rebase_merge", "ff"):
                raise ValueError(f"no merge method {method!r}: merge, rebase_merge or ff")
            self.settings.update(settings)

    def open_mr(
        self,
        branch: str,
        files: Mapping[str, str | bytes | None],
        title: str,
        description: str = "",
        *,
        author: str = TEAMMATE,
        target: str | None = None,
    ) -> int:
        """``author`` pushes ``branch`` (one commit of ``files`` on the target's head) and opens
        a merge request from it (no request is made or recorded); returns its iid. Takes the
        Developer role, as pushing a branch does."""
        with self.lock:
            self.require(author, DEVELOPER, "push a branch")
            target = target or self.default_branch
            start = self.head_of(target)
            assert start is not None, f"no branch {target}"
            self.git.set_ref(f"refs/heads/{branch}", start)
            self.git.commit_files(branch, files, title)
            try:
                mr = self.open_merge_request(author, branch, target, title, description)
            except HttpError as refused:
                raise ValueError(f"GitLab refuses that merge request: {refused.message}") from None
            return mr.iid

    def report_status(
        self,
        sha: str,
        name: str,
        state: str,
        *,
        by: str = CI,
        ref: str | None = None,
        target_url: str | None = None,
    ) -> int:
        """A CI reports commit status ``name`` in ``state`` for ``sha`` (as ``POST
        /statuses/:sha`` would, no request made or recorded); returns the job's id."""
        with self.lock:
            self.require(by, DEVELOPER, "report commit statuses")
            try:
                job = self.status_job(
                    sha,
                    name,
                    state,
                    self.people.seen(by),
                    ref=ref,
                    target_url=target_url or f"{self.base_url}/ci/{name}",
                )
            except HttpError as refused:
                raise ValueError(f"GitLab refuses that status: {refused.message}") from None
            return job.id

    def approve(self, iid: int, *, by: str = TEAMMATE) -> None:
        """``by`` approves merge request ``iid``; refused (a ValueError) as GitLab refuses:
        below Developer, the author, a second approval."""
        with self.lock:
            mr = self.mr_or_fail(iid)
            if not self.may_approve(mr, by):
                raise ValueError(f"{by} cannot approve !{iid} on GitLab")
            self.approve_as(mr, self.people.seen(by))

    def merge_by_hand(self, iid: int, *, by: str = OWNER_NAME, squash: bool | None = None) -> str:
        """``by`` presses Merge on merge request ``iid`` (it must be mergeable, as GitLab's
        button needs); returns the target branch's new head."""
        with self.lock:
            mr = self.mr_or_fail(iid)
            if not self.may_merge(by):
                raise ValueError(f"{by} may not merge into {mr.target_branch}")
            status = self.mergeability(mr)
            if status != "mergeable":
                raise ValueError(f"!{iid} cannot merge: {status}")
            self.merge(mr, self.people.seen(by), squash=squash)
            head = self.head_of(mr.target_branch)
            assert head is not None
            return head

    def close_mr(self, iid: int, *, by: str = TEAMMATE) -> None:
        with self.lock:
            mr = self.mr_or_fail(iid)
            mr.state, mr.closed_at, mr.closed_by = "closed", self.tick(), self.people.seen(by)
            mr.updated_at = self.clock
            self.hooks.merge_request(mr, "close", self.people.seen(by))

    def mr_or_fail(self, iid: int) -> MergeRequestRecord:
        found = self.merge_requests.get(iid)
        if found is None:
            raise ValueError(f"no merge request !{iid}")
        return found

    def finish_rebases(self) -> None:
        """The rebases asked for run now (GitLab's background worker)."""
        with self.lock:
            for mr in self.merge_requests.values():
                if mr.rebasing:
                    self.run_rebase(mr)
