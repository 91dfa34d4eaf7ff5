"""``GitHubApi``: the provider's only door to GitHub — typed githubkit calls, translated errors,
pages with ETags, and (``git_api.GitDataCalls``) immutable git objects cached by sha.

Everything here is a thin wrapper: one method per REST call the provider makes, each returning
githubkit's parsed models (or plain values) and raising only ``domain.errors`` types. The models
are those of the API version githubkit sends (2026-03-10): a field that version removed is not
read, even where GitHub would still send it to an older version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx
from githubkit import AppAuthStrategy, AppInstallationAuthStrategy, GitHub, Response
from githubkit.cache import MemCacheStrategy
from githubkit.cache.mem_cache import MemCache
from githubkit.exception import RequestFailed
from githubkit_schemas.latest.models import (
    CheckRun,
    CommitComparison,
    DiffEntry,
    GitCommit,
    GitTreePropTreeItems,
    Issue,
    Label,
    PullRequest,
    PullRequestReview,
    PullRequestReviewComment,
    PullRequestSimple,
    StateChangeIssueEvent,
    Status,
)

from adapters.providers.github.auth import resolve_auth, token_kind
from adapters.providers.github.errors import translated
from adapters.providers.github.git_api import GitDataCalls
from adapters.providers.github.settings import GitHubSettings
from adapters.providers.github.transport import NOT_MODIFIED, ConditionalTransport
from domain.errors import ProviderError

MergeMethod = Literal["merge", "squash", "rebase"]

T = TypeVar("T")
PER_PAGE = 100


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list. ``items`` is None when its ETag is the one the caller already
    applied (nothing to parse); ``not_modified``: GitHub answered 304 (no rate limit spent)."""

    items: list[T] | None
    etag: str | None
    not_modified: bool
    has_next: bool


def _page(response: Response[list[T], Any], known_etag: str | None) -> Page[T]:
    raw = response.raw_response
    etag = raw.headers.get("etag")
    has_next = 'rel="next"' in raw.headers.get("link", "")
    fresh = etag is None or etag != known_etag
    return Page(
        response.parsed_data if fresh else None,
        etag,
        bool(raw.extensions.get(NOT_MODIFIED)),
        has_next,
    )


class AuthCache(MemCacheStrategy):
    """This provider's own cache of GitHub App JWTs and installation tokens. githubkit's default
    is one per process, keyed by app id (and installation) alone: a second provider with the
    same app id but another key or host would use the first one's tokens."""

    def __init__(self) -> None:
        super().__init__()
        self._storage = MemCache()  # type: ignore[no-untyped-call]  # githubkit: untyped init

    def get_cache_storage(self) -> MemCache:
        return self._storage

    def forget(self) -> None:
        self._storage = MemCache()  # type: ignore[no-untyped-call]  # githubkit: untyped init


class GitHubApi(GitDataCalls):
    def __init__(
        self,
        settings: GitHubSettings,
        transport: ConditionalTransport,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.owner, self.repo = settings.owner, settings.name
        self.auth_cache = AuthCache()
        auth = resolve_auth(settings, environ)
        self.app_auth = isinstance(auth, AppInstallationAuthStrategy)
        self.token_kind = token_kind(auth)  # for messages: what a refusal may be down to
        self.transport = transport
        self.gh = GitHub(
            auth,
            base_url=settings.base_url,
            timeout=httpx.Timeout(settings.request_timeout),
            transport=transport,
            http_cache=False,
            auto_retry=False,
            cache_strategy=self.auth_cache,
            user_agent="control-plane-engine",
        )
        self._commits: dict[str, GitCommit] = {}
        self._trees: dict[str, list[GitTreePropTreeItems]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.transport.shutdown()

    @contextmanager
    def translated(self, what: str) -> Iterator[None]:
        """``errors.translated``; a 401 also drops the cached App token and JWT, so the next
        call gets new ones (GitHub may reject a token before the expiry githubkit counts on:
        revoked, the App suspended and resumed, a skewed clock). Under App auth, an API call
        refused that way is worth retrying (transient: the executor retries a write); a refused
        token exchange (a wrong key, an unknown installation) is not."""
        try:
            with translated(what):
                yield
        except ProviderError as exc:
            if exc.status != 401:
                raise
            self.auth_cache.forget()
            if self.app_auth and isinstance(exc.__cause__, RequestFailed):
                raise ProviderError(str(exc), status=401, transient=True) from exc.__cause__
            raise

    def all_pages(self, what: str, fetch: Callable[[int], Response[list[T], Any]]) -> list[T]:
        found: list[T] = []
        number = 1
        while True:
            with self.translated(what):
                page = _page(fetch(number), None)
                found += page.items or []
            if not page.has_next:
                return found
            number += 1

    def page(
        self, what: str, fetch: Callable[[], Response[list[T], Any]], known_etag: str | None
    ) -> Page[T]:
        with self.translated(what):
            return _page(fetch(), known_etag)

    # ------------------------------------------------------------------ repository

    def default_branch(self) -> str:
        with self.translated("get repository"):
            return self.gh.rest.repos.get(self.owner, self.repo).parsed_data.default_branch

    def merge_methods(self) -> dict[MergeMethod, bool]:
        """Which merge methods the repository allows (its settings; all when it does not say)."""
        with self.translated("get repository"):
            repo = self.gh.rest.repos.get(self.owner, self.repo).parsed_data
        return {
            "merge": repo.allow_merge_commit is not False,
            "squash": repo.allow_squash_merge is not False,
            "rebase": repo.allow_rebase_merge is not False,
        }

    # ------------------------------------------------------------------ labels

    def labels(self) -> list[Label]:
        return self.all_pages(
            "list labels",
            lambda page: self.gh.rest.issues.list_labels_for_repo(
                self.owner, self.repo, per_page=PER_PAGE, page=page
            ),
        )

    def create_label(self, name: str, color: str, description: str) -> None:
        with self.translated(f"create label {name!r}"):
            self.gh.rest.issues.create_label(
                self.owner, self.repo, name=name, color=color, description=description
            )

    # ------------------------------------------------------------------ issues

    def issues_page(
        self,
        *,
        state: Literal["open", "closed", "all"],
        page: int,
        since: str | None = None,
        known_etag: str | None = None,
    ) -> Page[Issue]:
        extra: dict[str, Any] = {"since": since} if since else {}
        return self.page(
            "list issues",
            lambda: self.gh.rest.issues.list_for_repo(
                self.owner,
                self.repo,
                state=state,
                sort="updated",
                direction="asc",
                per_page=PER_PAGE,
                page=page,
                **extra,
            ),
            known_etag,
        )

    def get_issue(self, number: int) -> Issue:
        with self.translated(f"get issue #{number}"):
            return self.gh.rest.issues.get(self.owner, self.repo, number).parsed_data

    def get_issue_of(self, owner: str, repo: str, number: int) -> Issue:
        """An issue of any repository the token can read (a cross-repository blocker)."""
        with self.translated(f"get issue {owner}/{repo}#{number}"):
            return self.gh.rest.issues.get(owner, repo, number).parsed_data

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        with self.translated("create issue"):
            return self.gh.rest.issues.create(
                self.owner, self.repo, title=title, body=body, labels=list(labels)
            ).parsed_data

    def update_issue(self, number: int, **fields: Any) -> None:
        with self.translated(f"update issue #{number}"):
            self.gh.rest.issues.update(self.owner, self.repo, number, **fields)

    def add_labels(self, number: int, labels: Sequence[str]) -> list[Label]:
        with self.translated(f"label issue #{number}"):
            return self.gh.rest.issues.add_labels(
                self.owner, self.repo, number, labels=list(labels)
            ).parsed_data

    def set_labels(self, number: int, labels: Sequence[str]) -> list[Label]:
        """Replace the issue's labels in one request (no instant without a status label). None
        at all is a removal of every label: githubkit refuses an empty list before sending it,
        as GitHub's schema asks for at least one."""
        with self.translated(f"label issue #{number}"):
            if not labels:
                self.gh.rest.issues.remove_all_labels(self.owner, self.repo, number)
                return []
            return self.gh.rest.issues.set_labels(
                self.owner, self.repo, number, labels=list(labels)
            ).parsed_data

    def blocked_by(self, number: int) -> list[Issue]:
        return self.all_pages(
            f"list what blocks #{number}",
            lambda page: self.gh.rest.issues.list_dependencies_blocked_by(
                self.owner, self.repo, number, per_page=PER_PAGE, page=page
            ),
        )

    def add_blocked_by(self, number: int, blocker_database_id: int) -> None:
        # The dependencies API takes the blocker's database id, not its number (githubkit 0.16).
        with self.translated(f"add a dependency to #{number}"):
            self.gh.rest.issues.add_blocked_by_dependency(
                self.owner, self.repo, number, issue_id=blocker_database_id
            )

    # ------------------------------------------------------------------ pull requests

    def pulls_page(
        self,
        *,
        state: Literal["open", "closed", "all"],
        page: int,
        known_etag: str | None = None,
        head: str | None = None,
    ) -> Page[PullRequestSimple]:
        extra: dict[str, Any] = {"head": f"{self.owner}:{head}"} if head else {}
        return self.page(
            "list pull requests",
            lambda: self.gh.rest.pulls.list(
                self.owner,
                self.repo,
                state=state,
                sort="updated",
                direction="desc",
                per_page=PER_PAGE,
                page=page,
                **extra,
            ),
            known_etag,
        )

    def get_pull(self, number: int) -> PullRequest:
        with self.translated(f"get pull request #{number}"):
            return self.gh.rest.pulls.get(self.owner, self.repo, number).parsed_data

    def merge_commit(self, number: int) -> str | None:
        """The merge commit of a merged pull request: the ``commit_id`` of the ``merged`` event
        on its timeline (API 2026-03-10 removed ``merge_commit_sha`` from pull requests)."""
        found: str | None = None
        for entry in self.timeline(number, "merged"):
            found = StateChangeIssueEvent.model_validate(entry).commit_id or found
        return found

    def timeline(self, number: int, kind: str) -> list[dict[str, Any]]:
        """The entries of one ``kind`` (``merged``, ``labeled``…) on an issue's or pull
        request's timeline, oldest first, as GitHub sent them.

        Only entries of that kind are kept: a timeline holds many kinds of event, and one
        GitHub added after this version's description must not fail the lookup."""
        found: list[dict[str, Any]] = []
        page = 1
        while True:
            with self.translated(f"read the timeline of #{number}"):
                response = self.gh.rest.issues.list_events_for_timeline(
                    self.owner, self.repo, number, per_page=PER_PAGE, page=page
                )
                entries: object = response.raw_response.json()
                found += [
                    entry
                    for entry in (entries if isinstance(entries, list) else [])
                    if isinstance(entry, dict) and entry.get("event") == kind
                ]
            if 'rel="next"' not in response.raw_response.headers.get("link", ""):
                return found
            page += 1

    def collaborator_permission(self, login: str) -> tuple[str, str]:
        """(``permission``, ``role_name``) of ``login`` on the repository: ``permission`` is
        admin, write, read or none (maintain reads as write, triage as read); ``role_name``
        the role itself (admin, maintain, write, triage, read, or a custom role's name)."""
        with self.translated(f"read the permission of {login}"):
            found = self.gh.rest.repos.get_collaborator_permission_level(
                self.owner, self.repo, login
            ).parsed_data
        return found.permission, found.role_name

    def own_login(self) -> str:
        """The login cpe acts as: the token's user (``GET /user``), or an App's bot,
        ``<slug>[bot]`` (``GET /app``, with the App's own JWT)."""
        auth = self.gh.auth
        if isinstance(auth, AppInstallationAuthStrategy):
            as_app = self.gh.with_auth(AppAuthStrategy(auth.app_id, auth.private_key))
            with self.translated("read the App"):
                app = as_app.rest.apps.get_authenticated().parsed_data
            if app is None or not app.slug:
                raise ProviderError("GitHub named no App for its key", transient=False)
            return f"{app.slug}[bot]"
        with self.translated("read the token's user"):
            return self.gh.rest.users.get_authenticated().parsed_data.login

    def create_pull(self, title: str, head: str, base: str, body: str) -> PullRequest:
        with self.translated(f"open a pull request from {head}"):
            return self.gh.rest.pulls.create(
                self.owner, self.repo, title=title, head=head, base=base, body=body
            ).parsed_data

    def merge_pull(self, number: int, sha: str, method: MergeMethod = "merge") -> str:
        with self.translated(f"merge pull request #{number}"):
            return self.gh.rest.pulls.merge(
                self.owner, self.repo, number, sha=sha, merge_method=method
            ).parsed_data.sha

    def merge_branch(self, base: str, head: str, message: str) -> str | None:
        """GitHub's "Merge a branch": merge ``head`` (a branch or a sha) into the branch ``base``
        with a merge commit, and return that commit; None when ``base`` already contains
        ``head`` (204, nothing written). A conflict is GitHub's 409, a ``ConflictError`` here;
        a missing branch a ``NotFoundError``. Never retried blindly: the client makes no
        automatic retries (``auto_retry=False``) and the transport retries only reads."""
        with self.translated(f"merge {head} into {base}"):
            response = self.gh.rest.repos.merge(
                self.owner, self.repo, base=base, head=head, commit_message=message
            )
            if response.status_code == 204:
                return None
            return response.parsed_data.sha

    def compare(self, base: str, head: str) -> CommitComparison:
        """``base...head``: whether ``head`` contains ``base`` (``status`` ``ahead`` or
        ``identical``), their merge base, and the files ``head`` changed since it (up to 300).
        One commit per page: the commits are not read, and the files come with the first."""
        with self.translated(f"compare {base[:12]}...{head[:12]}"):
            return self.gh.rest.repos.compare_commits(
                self.owner, self.repo, f"{base}...{head}", per_page=1
            ).parsed_data

    def pull_files(self, number: int) -> list[DiffEntry]:
        return self.all_pages(
            f"list files of #{number}",
            lambda page: self.gh.rest.pulls.list_files(
                self.owner, self.repo, number, per_page=PER_PAGE, page=page
            ),
        )

    def reviews(self, number: int) -> list[PullRequestReview]:
        return self.all_pages(
            f"list reviews of #{number}",
            lambda page: self.gh.rest.pulls.list_reviews(
                self.owner, self.repo, number, per_page=PER_PAGE, page=page
            ),
        )

    def review_comments(self, number: int) -> list[PullRequestReviewComment]:
        return self.all_pages(
            f"list review comments of #{number}",
            lambda page: self.gh.rest.pulls.list_review_comments(
                self.owner, self.repo, number, per_page=PER_PAGE, page=page
            ),
        )

    def create_review(
        self, number: int, commit: str, event: str, body: str, comments: list[dict[str, Any]]
    ) -> PullRequestReview:
        # Typed as Any: githubkit's TypedDict wants the event as a Literal the caller picked.
        payload: Any = {"commit_id": commit, "event": event, "body": body, "comments": comments}
        with self.translated(f"review pull request #{number}"):
            return self.gh.rest.pulls.create_review(
                self.owner, self.repo, number, data=payload
            ).parsed_data

    # ------------------------------------------------------------------ CI

    def check_runs(self, sha: str) -> tuple[list[CheckRun], bool]:
        """The latest check run per name, and whether GitHub answered 304."""
        with self.translated(f"list check runs of {sha[:12]}"):
            response = self.gh.rest.checks.list_for_ref(
                self.owner, self.repo, sha, filter_="latest", per_page=PER_PAGE
            )
            cached = bool(response.raw_response.extensions.get(NOT_MODIFIED))
            return response.parsed_data.check_runs, cached

    def statuses(self, sha: str) -> tuple[list[Status], bool]:
        """The latest status per context, and whether GitHub answered 304.

        Read from the list of a commit's statuses (newest first), not the combined status:
        the combined status embeds the repository, whose ``pushed_at`` moves with any push, so
        its ETag would change (and each recheck cost a counted request) whenever anything was
        pushed. The newest 100 statuses are read: a context's latest is among them."""
        with self.translated(f"list the statuses of {sha[:12]}"):
            response = self.gh.rest.repos.list_commit_statuses_for_ref(
                self.owner, self.repo, sha, per_page=PER_PAGE
            )
            cached = bool(response.raw_response.extensions.get(NOT_MODIFIED))
            latest: dict[str, Status] = {}
            for status in response.parsed_data:
                latest.setdefault(status.context, status)
            return list(latest.values()), cached
