"""``FakeGitHub``: one repository's issues, pull requests, reviews, CI and git data, served on
loopback. Tests drive it through the real provider and inspect it directly (its records, its
bare repository, its request log); helpers play the parts of other people and of CI."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from tests.fakes.github import app as app_routes
from tests.fakes.github import routes_git, routes_issues, routes_merge, routes_pulls
from tests.fakes.github.app import FakeApp
from tests.fakes.github.gitdata import BareRepo
from tests.fakes.github.payloads import Urls
from tests.fakes.github.records import (
    EPOCH_START,
    Access,
    CheckRunRecord,
    EventRecord,
    Fault,
    IssueRecord,
    Protection,
    PullRecord,
    RecordedRequest,
    ReviewCommentRecord,
    ReviewRecord,
    Stall,
    StatusRecord,
)
from tests.fakes.github.server import SECONDARY_LIMIT_MESSAGE, HttpCore, HttpError, Router, serve

CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+#(\d+)\b", re.IGNORECASE)


class FakeGitHub:
    """Start with ``with FakeGitHub(tmp_path / "gh") as gh:``; ``gh.base_url`` is the API root.

    ``tokens`` maps each accepted token to its user's login, or to its ``Access`` (a
    fine-grained token, a triage user). ``allow_self_review`` lets the PR author approve or
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
        for module in (routes_issues, routes_pulls, routes_merge, routes_git):
            module.register(router, prefix, self)
        self.app = app
        if app is not None:
            app_routes.register(router, self, app)
        accesses = {
            token: Access(who) if isinstance(who, str) else who
            for token, who in (tokens or {"test-token": "cpe-bot"}).items()
        }
        self.http = HttpCore(router, accesses, self.lock, now)
        self.http.app = app
        self._server, self._thread = serve(self.http)
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}"
        self.http.base_url = self.base_url
        self.urls = Urls(self.base_url, owner, repo)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self.http.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeGitHub:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

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

    def label_id(self, name: str) -> int:
        if name not in self.labels:
            self.labels[name] = self.next_id()
        return self.labels[name]

    def ref_moved(self, branch: str, sha: str) -> None:
        """A push to ``branch``: the repository's ``pushed_at`` moves (so does every payload
        that embeds the repository), and open pull requests from it follow (``synchronize``)."""
        self.pushed_at = self.tick()
        for pr in self.pulls.values():
            if pr.head_ref == branch and self.issues[pr.number].state == "open":
                pr.head_sha = sha
                self.issues[pr.number].updated_at = self.tick()

    def close_linked_issues(self, body: str | None) -> None:
        for number in CLOSING.findall(body or ""):
            linked = self.issues.get(int(number))
            if linked is not None and linked.state == "open" and not linked.is_pull:
                linked.state, linked.state_reason = "closed", "completed"
                linked.closed_at = linked.updated_at = self.tick()
                self.event(linked.number, "closed", "someone")

    def event(self, number: int, kind: str, actor: str, commit_id: str | None = None) -> None:
        """An entry of an issue's (or pull request's) timeline."""
        self.events.append(EventRecord(self.next_id(), number, kind, actor, commit_id, self.clock))

    # ------------------------------------------------------------------ test helpers

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.http.requests

    @property
    def keep_responses(self) -> bool:
        """Keep each response's body in ``requests`` (for checking payloads; off by default)."""
        return self.http.keep_responses

    @keep_responses.setter
    def keep_responses(self, keep: bool) -> None:
        self.http.keep_responses = keep

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

    def clear_requests(self) -> None:
        with self.lock:
            self.http.requests.clear()

    def fail(self, fault: Fault) -> Fault:
        with self.lock:
            self.http.faults.append(fault)
        return fault

    def stall(self, stall: Stall) -> Stall:
        with self.lock:
            self.http.stalls.append(stall)
        return stall

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
            tree = self._tree_with(None, files)
            sha = self.git.commit(tree, [], message + "\n")
            self.git.set_ref(f"refs/heads/{self.default_branch}", sha)
            return sha

    def commit_to_default(self, files: Mapping[str, str | bytes | None], message: str) -> str:
        """Someone else pushes a commit to the default branch."""
        with self.lock:
            head = self.default_head()
            tree = self._tree_with(self.git.line("rev-parse", f"{head}^{{tree}}"), files)
            sha = self.git.commit(tree, [head], message + "\n")
            self.git.set_ref(f"refs/heads/{self.default_branch}", sha, head)
            self.ref_moved(self.default_branch, sha)
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
        user: str = "someone",
    ) -> int:
        """An issue someone else filed (no request is made or recorded)."""
        with self.lock:
            number, stamp = self.next_number(), self.tick()
            for name in labels:
                self.label_id(name)
            self.issues[number] = IssueRecord(
                number, title, body, user, stamp, stamp, list(labels), state,
                "completed" if state == "closed" else None, stamp if state == "closed" else None,
            )  # fmt: skip
            return number

    def add_pull(
        self, branch: str, files: Mapping[str, str | bytes | None], title: str, body: str = ""
    ) -> int:
        """Someone else pushes ``branch`` (one commit on the default head) and opens a pull
        request from it (no request is made or recorded)."""
        with self.lock:
            head = self.default_head()
            tree = self._tree_with(self.git.line("rev-parse", f"{head}^{{tree}}"), files)
            sha = self.git.commit(tree, [head], title + "\n")
            self.git.set_ref(f"refs/heads/{branch}", sha)
            number, stamp = self.next_number(), self.tick()
            self.pushed_at = stamp
            self.issues[number] = IssueRecord(
                number, title, body, "someone", stamp, stamp, is_pull=True
            )
            self.pulls[number] = PullRecord(number, branch, sha, self.default_branch, head)
            return number

    def push(self, branch: str, files: Mapping[str, str | bytes | None], message: str) -> str:
        """Someone else pushes a commit on top of ``branch``."""
        with self.lock:
            head = self.git.resolve(f"refs/heads/{branch}")
            assert head is not None, f"no branch {branch}"
            tree = self._tree_with(self.git.line("rev-parse", f"{head}^{{tree}}"), files)
            sha = self.git.commit(tree, [head], message + "\n")
            self.git.set_ref(f"refs/heads/{branch}", sha, head)
            self.ref_moved(branch, sha)
            return sha

    def edit_issue(self, number: int, **changes: object) -> None:
        with self.lock:
            record = self.issue(number)
            for name in changes.get("labels", []):  # type: ignore[attr-defined]
                self.label_id(str(name))
            for key, value in changes.items():
                setattr(record, key, value)
            record.updated_at = self.tick()

    def add_check_run(
        self, sha: str, name: str, status: str = "completed", conclusion: str | None = "success"
    ) -> None:
        with self.lock:
            stamp = self.tick()
            self.check_runs.append(
                CheckRunRecord(
                    self.next_id(), sha, name, status, conclusion,
                    f"{self.base_url}/ci/{name}", stamp, stamp if status == "completed" else None,
                )
            )  # fmt: skip

    def add_status(self, sha: str, context: str, state: str, url: str | None = None) -> None:
        with self.lock:
            stamp = self.tick()
            self.statuses.append(
                StatusRecord(self.next_id(), sha, context, state, f"{context} {state}", url,
                             stamp, stamp)
            )  # fmt: skip

    def _tree_with(self, base: str | None, files: Mapping[str, str | bytes | None]) -> str:
        entries: list[dict[str, object]] = []
        for path, content in files.items():
            if content is None:
                entries.append({"path": path, "sha": None})
                continue
            data = content.encode() if isinstance(content, str) else content
            entries.append({"path": path, "mode": "100644", "sha": self.git.write_blob(data)})
        return self.git.build_tree(base, entries)
