"""``FakeGitHub``: one repository's issues, pull requests, reviews, CI and git data, served on
loopback. Tests drive it through the real provider and inspect it directly (its records, its
bare repository, its request log); helpers play the parts of other people and of CI.

Who is who (``people.py``): the owner (``acme``) is admin, ``someone`` (the author helpers use
by default: a teammate) a collaborator with the write role, each token's user a collaborator with
its ``Access.role``; anyone else is a stranger, who can still read the public repository and
open issues. A helper that acts as someone does only what GitHub lets that person do."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from tests.fakes.clock import EPOCH_START
from tests.fakes.gitdata import BareRepo, FileChange
from tests.fakes.github import app as app_routes
from tests.fakes.github import (
    hook_payloads,
    hooks,
    routes_git,
    routes_issues,
    routes_merge,
    routes_people,
    routes_pulls,
)
from tests.fakes.github.app import FakeApp
from tests.fakes.github.hooks import RepoHooks
from tests.fakes.github.payloads import Urls
from tests.fakes.github.people import RANK, People, role
from tests.fakes.github.records import (
    Access,
    CheckRunRecord,
    EventRecord,
    IssueRecord,
    Protection,
    PullRecord,
    ReviewCommentRecord,
    ReviewRecord,
    StatusRecord,
)
from tests.fakes.github.server import SECONDARY_LIMIT_MESSAGE, GitHubCore
from tests.fakes.http import Fault, HttpError, Router, ServedFake

CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+#(\d+)\b", re.IGNORECASE)
TEAMMATE = "someone"  # the default author of the helpers' issues and pull requests
# A review's state as GitHub shows it -> the event that submits it.
REVIEW_EVENTS = {
    "APPROVED": "APPROVE",
    "CHANGES_REQUESTED": "REQUEST_CHANGES",
    "COMMENTED": "COMMENT",
}


class FakeGitHub(ServedFake):
    """Start with ``with FakeGitHub(tmp_path / "gh") as gh:``; ``gh.base_url`` is the API root.

    ``tokens`` maps each accepted token to its user's login, or to its ``Access`` (a
    fine-grained token, a triage user); each token's user is a collaborator with the
    ``Access.role`` (admin for a bare login). ``allow_self_review`` lets the PR author approve or
    request changes (GitHub refuses that with 422). ``app``: a GitHub App installed on the
    repository, whose installation tokens are accepted too (``app.py``). ``now``: the time the
    secondary rate limit on content creation is judged by (a test's clock, to pace without
    waiting).
    """

    def __init__(
        self,
        root: Path,
        *,
        owner: str = "acme",
        repo: str = "widgets",
        default_branch: str = "main",
        tokens: Mapping[str, str | Access] | None = None,
        allow_self_review: bool = False,
        app: FakeApp | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.owner, self.repo, self.default_branch = owner, repo, default_branch
        self.git = BareRepo.create(root / f"{repo}.git", default_branch)
        self.allow_self_review = allow_self_review
        self.lock = threading.RLock()
        self.clock = EPOCH_START
        self.pushed_at = EPOCH_START  # the repository's ``pushed_at``: any push moves it
        self._ids = iter(range(1000, 10**9))
        self.issues: dict[int, IssueRecord] = {}
        self.pulls: dict[int, PullRecord] = {}
        self.labels: dict[str, int] = {}
        self.reviews: list[ReviewRecord] = []
        self.review_comments: list[ReviewCommentRecord] = []
        self.check_runs: list[CheckRunRecord] = []
        self.statuses: list[StatusRecord] = []
        self.events: list[EventRecord] = []
        self.protection: dict[str, Protection] = {}
        # The repository's merge settings (``allow_merge_commit`` … on the repository).
        self.merge_methods: dict[str, bool] = {"merge": True, "squash": True, "rebase": True}
        # Issues of other repositories ("other/repo" -> number -> issue), for cross-repository
        # dependencies; readable with the same token.
        self.foreign: dict[str, dict[int, IssueRecord]] = {}
        router = Router()
        prefix = f"/repos/{owner}/{repo}"
        for module in (routes_issues, routes_pulls, routes_merge, routes_git, routes_people, hooks):
            module.register(router, prefix, self)
        self.app = app
        if app is not None:
            app_routes.register(router, self, app)
        accesses = {
            token: Access(who) if isinstance(who, str) else who
            for token, who in (tokens or {"test-token": "cpe-bot"}).items()
        }
        self.people = People(owner)
        self.people.collaborators[self.people.seen(TEAMMATE)] = "write"
        for access in accesses.values():
            if self.people.seen(access.login) != owner:
                self.people.collaborators[access.login] = access.role
        if app is not None:
            self.people.seen(app.bot_login)
        core = GitHubCore(router, accesses, self.lock, now)
        core.app = app
        self.base_url = self.start(core)
        self.urls = Urls(self.base_url, owner, repo)
        self.hooks = RepoHooks(self)  # webhooks: ``hooks.add(url, secret)`` (``hooks.py``)

    def close(self) -> None:
        self.hooks.close()
        super().close()

    # ------------------------------------------------------------------ used by the routes

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def next_id(self) -> int:
        return next(self._ids)

    def next_number(self) -> int:
        return max(self.issues, default=0) + 1

    def issue(self, number: int) -> IssueRecord:
        found = self.issues.get(number)
        if found is None:
            raise HttpError(404, "Not Found")
        return found

    def pull(self, number: int) -> PullRecord:
        found = self.pulls.get(number)
        if found is None:
            raise HttpError(404, "Not Found")
        return found

    def pull_files(self, pr: PullRecord) -> list[FileChange]:
        """The files a pull request changes (a merged one: as they were when it merged)."""
        base = pr.merge_base or self.git.merge_base(self.default_head(), pr.head_sha)
        return self.git.changed_files(base or pr.base_sha, pr.head_sha)

    def association(self, login: str) -> str:
        """``login``'s ``author_association`` with the repository, as of now."""
        opened = {self.issues[n].user for n in self.pulls}
        merged = {self.issues[n].user for n, pr in self.pulls.items() if pr.merged}
        return self.people.association(login, merged, opened)

    def label_name(self, name: str) -> str | None:
        """The existing label ``name`` names, as it is spelled: GitHub ignores case."""
        folded = name.casefold()
        return next((n for n in self.labels if n.casefold() == folded), None)

    def label_id(self, name: str) -> int:
        """The id of the label ``name`` names (any case), created when there is none."""
        found = self.label_name(name)
        if found is None:
            self.labels[name] = self.next_id()
            found = name
        return self.labels[found]

    def use_labels(self, names: Iterable[str]) -> list[str]:
        """The labels ``names`` name (each once, as spelled where it exists), created when
        missing."""
        ids = [self.label_id(name) for name in names]
        spelled = {label_id: name for name, label_id in self.labels.items()}
        return list(dict.fromkeys(spelled[i] for i in ids))

    def relabel(
        self, rec: IssueRecord, names: Iterable[str], actor: str, *, moved: bool = True
    ) -> None:
        """``rec`` carries the existing labels ``names`` from now on: each label removed is an
        ``unlabeled`` event by ``actor`` on its timeline, each added a ``labeled`` one, and
        (``moved``) its ``updated_at`` moves."""
        wanted = self.use_labels(names)
        if moved:
            rec.updated_at = self.tick()
        for name in [n for n in rec.labels if n not in wanted]:
            self.event(rec.number, "unlabeled", actor, label=name)
        for name in [n for n in wanted if n not in rec.labels]:
            self.event(rec.number, "labeled", actor, label=name)
        rec.labels = wanted

    def retitle(self, rec: IssueRecord, title: str, actor: str) -> None:
        """A new title: a ``renamed`` event by ``actor`` (none when it is the same)."""
        if title != rec.title:
            self.event(rec.number, "renamed", actor, rename=(rec.title, title))
            rec.title = title

    def ref_moved(
        self, branch: str, sha: str, before: str | None = None, pusher: str = TEAMMATE
    ) -> None:
        """A push to ``branch`` (from ``before``; None: a new branch) by ``pusher``: the
        repository's ``pushed_at`` moves (so does every payload that embeds the repository), and
        open pull requests from it follow (``synchronize``)."""
        self.pushed_at = self.tick()
        old = before or "0" * 40
        self.hooks.send("push", None, pusher, lambda: hook_payloads.push(self, branch, old, sha,
                                                                       pusher))  # fmt: skip
        for pr in self.pulls.values():
            if pr.head_ref == branch and self.issues[pr.number].state == "open":
                head_before, pr.head_sha = pr.head_sha, sha
                self.issues[pr.number].updated_at = self.tick()
                self.hooks.pull_request(
                    "synchronize", pr.number, pusher, before=head_before, after=sha
                )

    def close_linked_issues(self, body: str | None) -> None:
        for number in CLOSING.findall(body or ""):
            linked = self.issues.get(int(number))
            if linked is not None and linked.state == "open" and not linked.is_pull:
                linked.state, linked.state_reason = "closed", "completed"
                linked.closed_at = linked.updated_at = self.tick()
                self.event(linked.number, "closed", "someone")

    def event(
        self,
        number: int,
        kind: str,
        actor: str,
        commit_id: str | None = None,
        *,
        label: str | None = None,
        rename: tuple[str, str] | None = None,
    ) -> None:
        """An entry of an issue's (or pull request's) timeline; a hook hears of it as GitHub's
        ``issues`` (or ``pull_request``) event: labeled, unlabeled, closed, reopened, edited."""
        self.events.append(
            EventRecord(self.next_id(), number, kind, actor, commit_id, self.clock, label, rename)
        )
        if kind in ("labeled", "unlabeled"):
            self.hooks.issues(kind, number, actor, label_name=label)
        elif kind in ("closed", "reopened"):
            self.hooks.issues(kind, number, actor)
        elif kind == "renamed" and rename is not None:
            self.hooks.issues("edited", number, actor, changes={"title": {"from": rename[0]}})

    # ------------------------------------------------------------------ test helpers

    def protect(
        self,
        branch: str | None = None,
        *,
        checks: tuple[str, ...] = (),
        reviews: int = 0,
        up_to_date: bool = False,
    ) -> None:
        """Branch protection: a merge into ``branch`` (default: the default branch) needs each
        of ``checks`` green on the head, ``reviews`` approvals by others than the author and,
        with ``up_to_date``, a head that contains the branch's head; until then GitHub refuses
        it with 405 and says what is missing."""
        with self.lock:
            self.protection[branch or self.default_branch] = Protection(checks, reviews, up_to_date)

    def secondary_limit(
        self, method: str, path: str, *, retry_after: int | None = None, times: int = 1
    ) -> Fault:
        """GitHub's secondary rate limit for matching requests: a 403, with ``Retry-After``
        or (as GitHub often sends it) without."""
        return self.fail(
            Fault(method, path, 403, times, retry_after=retry_after,
                  message=SECONDARY_LIMIT_MESSAGE)
        )  # fmt: skip

    def add_foreign_issue(self, repository: str, title: str, state: str = "open") -> int:
        """An issue in another repository ("owner/name"), numbered there; a cross-repository
        blocker (``edit_issue(n, foreign_blockers=[(repository, number)])``)."""
        with self.lock:
            issues = self.foreign.setdefault(repository, {})
            number, stamp = max(issues, default=0) + 1, self.tick()
            issues[number] = IssueRecord(
                number, title, "", "someone", stamp, stamp, [], state,
                "completed" if state == "closed" else None, stamp if state == "closed" else None,
            )  # fmt: skip
            return number

    def close_foreign_issue(self, repository: str, number: int) -> None:
        with self.lock:
            record = self.foreign[repository][number]
            record.state, record.state_reason = "closed", "completed"
            record.closed_at = record.updated_at = self.tick()

    def exhaust_rate_limit(self, reset: int) -> None:
        """No requests left until ``reset`` (epoch seconds): every request is refused with a
        403 and ``X-RateLimit-Remaining: 0`` until ``restore_rate_limit``."""
        with self.lock:
            self.http.rate_limit = self.http.rate_used
            self.http.rate_reset = reset

    def restore_rate_limit(self) -> None:
        """The reset came: a fresh allowance."""
        with self.lock:
            self.http.rate_limit = 5000
            self.http.rate_used = 0

    def seed(self, files: Mapping[str, str | bytes], message: str = "initial") -> str:
        """The first commit of the default branch."""
        with self.lock:
            return self.git.commit_files(self.default_branch, files, message)

    def commit_to_default(self, files: Mapping[str, str | bytes | None], message: str) -> str:
        """Someone else pushes a commit to the default branch."""
        with self.lock:
            before = self.default_head()
            sha = self.git.commit_files(self.default_branch, files, message)
            self.ref_moved(self.default_branch, sha, before)
            return sha

    def default_head(self) -> str:
        head = self.git.resolve(f"refs/heads/{self.default_branch}")
        assert head is not None, "the fake's default branch has no commit: seed() it"
        return head

    def add_issue(
        self,
        title: str,
        body: str = "",
        labels: tuple[str, ...] = (),
        state: str = "open",
        user: str = TEAMMATE,
    ) -> int:
        """An issue ``user`` filed (no request is made or recorded). ``labels`` come with it
        as an issue template gives them, whoever files it: ``labeled`` events by ``user``."""
        with self.lock:
            number, stamp = self.next_number(), self.tick()
            self.issues[number] = rec = IssueRecord(
                number, title, body, self.people.seen(user), stamp, stamp, [], state,
                "completed" if state == "closed" else None, stamp if state == "closed" else None,
            )  # fmt: skip
            self.hooks.issues("opened", number, user)
            self.relabel(rec, labels, user, moved=False)
            return number

    def add_pull(
        self,
        branch: str,
        files: Mapping[str, str | bytes | None],
        title: str,
        body: str = "",
        user: str = TEAMMATE,
    ) -> int:
        """``user`` pushes ``branch`` (one commit on the default head) and opens a pull request
        from it (no request is made or recorded). Its author is a ``FIRST_TIME_CONTRIBUTOR``
        until it merges, a ``CONTRIBUTOR`` then (unless a member or a collaborator)."""
        with self.lock:
            head = self.default_head()
            tree = self.git.tree_with(self.git.line("rev-parse", f"{head}^{{tree}}"), files)
            sha = self.git.commit(tree, [head], title + "\n")
            self.git.set_ref(f"refs/heads/{branch}", sha)
            number, stamp = self.next_number(), self.tick()
            self.pushed_at = stamp
            self.issues[number] = IssueRecord(
                number, title, body, self.people.seen(user), stamp, stamp, is_pull=True
            )
            self.pulls[number] = PullRecord(number, branch, sha, self.default_branch, head)
            self.hooks.send("push", None, user, lambda: hook_payloads.push(self, branch, "0" * 40,
                                                                         sha, user))  # fmt: skip
            self.hooks.pull_request("opened", number, user)
            return number

    def push(self, branch: str, files: Mapping[str, str | bytes | None], message: str) -> str:
        """Someone else pushes a commit on top of ``branch``."""
        with self.lock:
            before = self.git.resolve(f"refs/heads/{branch}")
            assert before is not None, f"no branch {branch}"
            sha = self.git.commit_files(branch, files, message)
            self.ref_moved(branch, sha, before)
            return sha

    # ------------------------------------------------------------------ who is who

    def add_collaborator(self, login: str, permission: str) -> None:
        """``login`` becomes a collaborator with the role ``permission`` (read, triage, write,
        maintain or admin), or takes that role if a collaborator already."""
        with self.lock:
            self.people.collaborators[self.people.seen(login)] = role(permission)

    def remove_collaborator(self, login: str) -> None:
        """``login`` is a collaborator no more (a stranger, unless a member)."""
        with self.lock:
            self.people.collaborators.pop(login, None)

    def add_member(self, login: str, permission: str = "read") -> None:
        """``login`` is a member of the organization that owns the repository (its owner then
        stands for an organization), with the role ``permission`` on the repository (the
        organization's base permission, or a team's): ``author_association`` ``MEMBER``."""
        with self.lock:
            self.people.members[self.people.seen(login)] = role(permission)

    def add_user(self, login: str) -> None:
        """An account ``login`` exists (with no role here, unless given one): the permission
        endpoint knows it. Helpers that act as someone add them too."""
        with self.lock:
            self.people.seen(login)

    def require(self, login: str, least: str, doing: str) -> None:
        """A ValueError unless ``login`` has at least the role ``least``: helpers make no one
        do what GitHub would refuse them."""
        held = self.people.role(login)
        if RANK.get(held or "", 0) < RANK[least]:
            raise ValueError(
                f"{login} ({held or 'no role'}) cannot {doing} on GitHub: "
                f"that takes the {least} role"
            )

    # ------------------------------------------------------------------ acting as someone

    def label_issue(self, number: int, name: str, actor: str) -> None:
        """``actor`` adds the label ``name`` (an existing one in any case applies it as it is
        spelled) to issue or pull request ``number``: a ``labeled`` event by ``actor``, none when
        it is there already. Takes the triage role; a label that does not exist yet, write."""
        with self.lock:
            rec = self.issue(number)
            self.people.seen(actor)
            self.require(actor, "triage", "label issues")
            if self.label_name(name) is None:
                self.require(actor, "write", f"create the label {name!r}")
            if self.label_name(name) not in rec.labels:
                self.relabel(rec, [*rec.labels, name], actor)

    def unlabel_issue(self, number: int, name: str, actor: str) -> None:
        """``actor`` removes the label ``name`` (any case): an ``unlabeled`` event."""
        with self.lock:
            rec = self.issue(number)
            self.people.seen(actor)
            self.require(actor, "triage", "remove labels")
            found = self.label_name(name)
            if found is None or found not in rec.labels:
                raise ValueError(f"#{number} has no label {name!r}")
            self.relabel(rec, [n for n in rec.labels if n != found], actor)

    def edit_issue(self, number: int, *, editor: str = TEAMMATE, **changes: object) -> None:
        """``editor`` changes fields of issue ``number`` (no request is made or recorded), and
        its ``updated_at`` moves. As on GitHub's timeline, a new title is a ``renamed`` event,
        each label added or removed a ``labeled`` or ``unlabeled`` one, a close or a reopen a
        ``closed`` or ``reopened`` one, each by ``editor``; a new body shows nowhere a REST
        client reads (GitHub keeps who edited in GraphQL's edit history only).

        GitHub lets the author edit their own title and body and close their own issue; anyone
        else needs the write role for the title and body, the triage role to close, reopen or
        relabel: what GitHub would refuse is a ValueError."""
        with self.lock:
            record = self.issue(number)
            self.people.seen(editor)
            self._may_edit(record, editor, changes)
            labels = changes.pop("labels", None)
            if labels is not None:
                if not isinstance(labels, list | tuple):
                    raise TypeError("labels: a list of label names")
                self.relabel(record, [str(n) for n in labels], editor)
            if "title" in changes:
                self.retitle(record, str(changes.pop("title")), editor)
            state = changes.pop("state", record.state)
            if state != record.state:
                closed = state == "closed"
                record.state = str(state)
                record.state_reason = "completed" if closed else "reopened"
                record.closed_at = self.clock if closed else None
                self.event(record.number, "closed" if closed else "reopened", editor)
            if "body" in changes and changes["body"] != record.body:
                self.hooks.issues("edited", number, editor, changes={"body": {"from": record.body}})
            for key, value in changes.items():
                setattr(record, key, value)
            record.updated_at = self.tick()

    def _may_edit(self, rec: IssueRecord, editor: str, changes: Mapping[str, object]) -> None:
        own = editor == rec.user
        if not own and {"title", "body"} & changes.keys():
            self.require(editor, "write", f"edit #{rec.number}, which {rec.user} filed")
        if not own and "state" in changes:
            self.require(editor, "triage", f"close or reopen #{rec.number}")
        names = changes.get("labels")
        if isinstance(names, list | tuple):
            self.require(editor, "triage", "label issues")
            missing = [str(n) for n in names if self.label_name(str(n)) is None]
            if missing:
                self.require(editor, "write", f"create the labels {missing}")

    def add_review(
        self,
        pull: int,
        user: str,
        state: str,
        body: str = "",
        comments: Sequence[tuple[str, int, str]] = (),
    ) -> int:
        """``user`` reviews pull request ``pull`` (no request is made or recorded); returns the
        review's id. ``state`` as GitHub shows a review: APPROVED, CHANGES_REQUESTED or
        COMMENTED; ``comments`` as (path, line, body) on lines of its diff. On a public
        repository anyone may review; only approvals by people with write access count for
        branch protection. What GitHub refuses (approving one's own pull request, no body but
        for an approval, a line outside the diff) is a ValueError."""
        if state not in REVIEW_EVENTS:
            raise ValueError(f"no review state {state!r}: GitHub's are {', '.join(REVIEW_EVENTS)}")
        shaped = [{"path": path, "line": line, "body": text} for path, line, text in comments]
        with self.lock:
            return self._review(pull, user, REVIEW_EVENTS[state], body, shaped).id

    def add_review_comment(self, pull: int, user: str, path: str, line: int, body: str) -> int:
        """``user`` comments on line ``line`` of ``path`` in pull request ``pull``'s diff (no
        request is made or recorded); returns the comment's id. As on GitHub, a comment made on
        its own comes in a review of its own: ``COMMENTED``, with an empty body."""
        comment = [{"path": path, "line": line, "body": body}]
        with self.lock:
            review = self._review(pull, user, "COMMENT", "", comment, single_comment=True)
            return next(c.id for c in self.review_comments if c.review_id == review.id)

    def _review(
        self,
        pull: int,
        user: str,
        event: str,
        body: str,
        comments: Sequence[dict[str, object]],
        *,
        single_comment: bool = False,
    ) -> ReviewRecord:
        pr = self.pull(pull)
        try:
            return routes_pulls.submit_review(
                self,
                pr,
                self.people.seen(user),
                event,
                body=body,
                comments=comments,
                single_comment=single_comment,
            )
        except HttpError as refused:
            raise ValueError(f"GitHub refuses that review: {refused.errors}") from refused

    def add_check_run(
        self, sha: str, name: str, status: str = "completed", conclusion: str | None = "success"
    ) -> None:
        with self.lock:
            stamp = self.tick()
            run = CheckRunRecord(
                self.next_id(), sha, name, status, conclusion,
                f"{self.base_url}/ci/{name}", stamp, stamp if status == "completed" else None,
            )  # fmt: skip
            self.check_runs.append(run)
            self.hooks.check_run(run)

    def add_status(self, sha: str, context: str, state: str, url: str | None = None) -> None:
        with self.lock:
            stamp = self.tick()
            rec = StatusRecord(
                self.next_id(), sha, context, state, f"{context} {state}", url, stamp, stamp
            )
            self.statuses.append(rec)
            self.hooks.send("status", None, "ci-bot", lambda: hook_payloads.status(self, rec))
