"""A reviewer's verdict on a GitLab merge request, and the review history read back.

GitLab has no review object with a verdict: a review is posted as

- one diff discussion per inline comment, anchored with a ``position`` (the merge request's
  ``diff_refs``: base, start and head sha; the new path and line) on a line the diff shows on
  its new side (an added or a context line). A comment on another line, or on a whole file,
  goes into the summary instead of failing the review, and so does one GitLab refuses to anchor
  after all (400);
- then a summary note: the summary, the verdict in words, the comments outside the diff, and
  two hidden markers: the review's digest (of its head and content) and the head it reviewed
  (a note carries no commit of its own). A review whose digest is already there is not posted
  again; after a crash between the two, the discussions already posted (their bodies carry the
  digest too) are not posted twice;
- for an approving verdict, an approval of that head (``POST /approve`` with ``sha``), where
  GitLab lets cpe approve: a project may forbid an author to approve its own merge request
  (cpe opened it), or want approvers it is not. The merge request's approvals say so first
  (``user_can_approve``): no request is spent on a refusal. The summary says so; nothing
  fails.

The history an agent is shown is the notes of trusted people (cpe's own among them): the
merge request's notes and diff notes, system notes left out, and the approvals of people; how
many untrusted ones were left out is counted.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from typing import Any

from adapters.providers import markers
from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.gitlab.errors import gitlab_reason
from adapters.support.crashpoints import crashpoint
from domain.errors import ProviderError
from domain.models import ReviewHistory, ReviewInlineComment, ReviewSubmission
from domain.results import AgentReview, AgentReviewComment

log = logging.getLogger(__name__)

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_HEAD = re.compile(r"<!-- cpe:review-head=([0-9a-f]{40}) -->")
_VERDICT = re.compile(r"^\*\*Verdict: ([a-z-]+)\*\*$", re.MULTILINE)


def head_marker(sha: str) -> str:
    return f"<!-- cpe:review-head={sha} -->"


def reviewed_head(text: str) -> str | None:
    """The head a cpe review note says it reviewed."""
    if markers.review_digest(text) is None:
        return None
    found = _HEAD.search(text)
    return found.group(1) if found else None


def clean(text: str | None) -> str:
    """A note's words without cpe's hidden markers."""
    return markers.strip_markers(_HEAD.sub("", text or ""))


def new_side_lines(diff: str | None) -> dict[int, int | None]:
    """New-file line numbers a diff shows, where a diff note can be anchored: an added line
    (-> None) or a context line (-> its line in the old file, which GitLab wants too)."""
    lines: dict[int, int | None] = {}
    old = new = 0
    for text in (diff or "").split("\n"):
        start = _HUNK.match(text)
        if start:
            old, new = int(start.group(1)), int(start.group(2))
        elif text.startswith("+"):
            lines[new] = None
            new += 1
        elif text.startswith(" "):
            lines[new] = old
            old, new = old + 1, new + 1
        elif text.startswith("-"):
            old += 1
    return lines


def digest(head_sha: str, review: AgentReview) -> str:
    return hashlib.sha256(f"{head_sha}\n{review.model_dump_json()}".encode()).hexdigest()[:20]


def _author(note: Json) -> Json | None:
    author = note.get("author")
    return author if isinstance(author, dict) else None


def _is_own(note: Json, own: int) -> bool:
    author = _author(note)
    return author is not None and author.get("id") == own


class ReviewPoster:
    def __init__(self, api: GitLabApi) -> None:
        self._api = api

    def post(self, iid: int, mr: Json, head_sha: str, review: AgentReview) -> None:
        """Post ``review`` of ``head_sha`` on merge request ``mr`` (as GitLab answered it)."""
        key = digest(head_sha, review)
        own = self._api.own_user()[0]
        notes = [n for n in self._notes(iid) if _is_own(n, own)]
        if any(markers.review_digest(n.get("body")) == key and not _position(n) for n in notes):
            return  # posted before; the answer was lost, or cpe stopped after it
        anchored = {
            (str(p.get("new_path")), p.get("new_line"), clean(n.get("body")))
            for n in notes
            if markers.review_digest(n.get("body")) == key and (p := _position(n))
        }
        diffs = self._diffs(iid)
        lines = {str(d.get("new_path")): new_side_lines(d.get("diff")) for d in diffs}
        old_paths = {str(d.get("new_path")): str(d.get("old_path")) for d in diffs}
        outside: list[AgentReviewComment] = []
        for comment in review.comments:
            shown = lines.get(comment.path, {})
            if comment.line is None or comment.line not in shown:
                outside.append(comment)
            elif (comment.path, comment.line, comment.body.strip()) not in anchored:
                old = (old_paths.get(comment.path, comment.path), shown[comment.line])
                if not self._discuss(iid, mr, comment, head_sha=head_sha, old=old, key=key):
                    outside.append(comment)
        crashpoint("gitlab.review.after_discussions")
        refusal = self._approve(iid, head_sha) if review.verdict == "approve" else None
        body = summary_body(review, outside, refusal, key, head_sha)
        try:
            self._api.post(
                f"post the review of !{iid}", f"/merge_requests/{iid}/notes", {"body": body}
            )
        except ProviderError as exc:
            if not (exc.transient and self._summary_posted(iid, own, key)):
                raise

    def _discuss(
        self,
        iid: int,
        mr: Json,
        comment: AgentReviewComment,
        *,
        head_sha: str,
        old: tuple[str, int | None],
        key: str,
    ) -> bool:
        """A diff discussion on the comment's line; False when GitLab will not anchor it."""
        found = mr.get("diff_refs")
        refs: Json = found if isinstance(found, dict) else {}
        position: dict[str, Any] = {
            "position_type": "text",
            "base_sha": refs.get("base_sha"),
            "start_sha": refs.get("start_sha"),
            "head_sha": refs.get("head_sha") or head_sha,
            "new_path": comment.path,
            "old_path": old[0],
            "new_line": comment.line,
        }
        if old[1] is not None:  # a context line: GitLab anchors it on both sides
            position["old_line"] = old[1]
        body = f"{comment.body.strip()}\n\n{markers.review_marker(key)}"
        try:
            self._api.post(
                f"comment on {comment.path}:{comment.line} of !{iid}",
                f"/merge_requests/{iid}/discussions",
                {"body": body, "position": position},
            )
        except ProviderError as exc:
            if exc.status == 400:
                log.info("GitLab did not anchor a comment on !%s: %s", iid, exc)
                return False
            raise
        return True

    def _approve(self, iid: int, head_sha: str) -> str | None:
        """Approve the head; why GitLab would not, if it would not."""
        own = self._api.own_user()[0]
        try:
            approvals = self._api.get(
                f"read the approvals of !{iid}", f"/merge_requests/{iid}/approvals"
            )
        except ProviderError as exc:
            if exc.transient:
                raise
            approvals = {}
        approvals = approvals if isinstance(approvals, dict) else {}
        for entry in approvals.get("approved_by") or []:
            if isinstance(entry, dict) and (entry.get("user") or {}).get("id") == own:
                return None  # approved before (a retry)
        if approvals.get("user_can_approve") is False:
            # GitLab says so before being asked: cpe opened the merge request and the project
            # forbids its author to approve (its default), or cpe is no eligible approver.
            return "cpe may not approve this merge request (its author, or no eligible approver)"
        try:
            self._api.post(f"approve !{iid}", f"/merge_requests/{iid}/approve", {"sha": head_sha})
        except ProviderError as exc:
            if exc.transient:
                raise
            log.info("GitLab did not let cpe approve !%s: %s", iid, exc)
            return gitlab_reason(exc)
        return None

    def _summary_posted(self, iid: int, own: int, key: str) -> bool:
        return any(
            _is_own(n, own) and markers.review_digest(n.get("body")) == key and not _position(n)
            for n in self._notes(iid)
        )

    def _notes(self, iid: int) -> list[Json]:
        return self._api.all_pages(
            f"list the notes of !{iid}",
            f"/merge_requests/{iid}/notes",
            {"sort": "asc", "order_by": "created_at"},
        )

    def _diffs(self, iid: int) -> list[Json]:
        return self._api.all_pages(f"list the diffs of !{iid}", f"/merge_requests/{iid}/diffs")


def _position(note: Json) -> Json | None:
    position = note.get("position")
    return position if isinstance(position, dict) else None


def summary_body(
    review: AgentReview,
    outside: list[AgentReviewComment],
    refusal: str | None,
    key: str,
    head_sha: str,
) -> str:
    parts = [review.summary.strip(), f"**Verdict: {review.verdict}**"]
    if refusal is not None:
        parts.append(f"(GitLab did not take cpe's approval: {refusal})")
    if outside:
        notes = [f"- `{c.path}{'' if c.line is None else f':{c.line}'}`: {c.body}" for c in outside]
        parts.append("**Comments outside the diff**\n\n" + "\n".join(notes))
    parts.append(markers.review_marker(key) + "\n" + head_marker(head_sha))
    return "\n\n".join(p for p in parts if p)


def review_history(
    api: GitLabApi, iid: int, trusted: Callable[[Json | None], bool]
) -> ReviewHistory:
    """The notes, diff notes and approvals of trusted people on merge request ``iid``."""
    own = api.own_user()[0]
    notes = [
        n
        for n in api.all_pages(
            f"list the notes of !{iid}",
            f"/merge_requests/{iid}/notes",
            {"sort": "asc", "order_by": "created_at"},
        )
        if not n.get("system")
    ]
    kept = [n for n in notes if trusted(_author(n))]
    try:
        approvals = api.get(f"read the approvals of !{iid}", f"/merge_requests/{iid}/approvals")
    except ProviderError as exc:
        if exc.transient:
            raise
        approvals = {}  # a project or tier without approvals: the notes say it all
    approvers = [
        entry["user"]
        for entry in (approvals.get("approved_by") if isinstance(approvals, dict) else None) or []
        if isinstance(entry, dict) and isinstance(entry.get("user"), dict)
    ]
    people = [u for u in approvers if u.get("id") != own]  # cpe's approval is in its note
    trusted_people = [u for u in people if trusted(u)]
    reviews = [
        ReviewSubmission(author=_name(_author(n)), state=_state(n, own), body=clean(n.get("body")))
        for n in kept
        if _position(n) is None
    ]
    reviews += [
        ReviewSubmission(author=_name(u), state="approved", body="") for u in trusted_people
    ]
    inline = [
        ReviewInlineComment(
            path=str(p.get("new_path") or p.get("old_path") or ""),
            line=_line(p),
            author=_name(_author(n)),
            body=clean(n.get("body")),
        )
        for n in kept
        if (p := _position(n)) is not None
    ]
    return ReviewHistory(
        reviews=tuple(reviews),
        inline_comments=tuple(inline),
        left_out=len(notes) - len(kept) + len(people) - len(trusted_people),
    )


def _name(user: Json | None) -> str:
    name = (user or {}).get("username")
    return str(name) if name else "ghost"


def _state(note: Json, own: int) -> str:
    if _is_own(note, own):
        found = _VERDICT.search(str(note.get("body") or ""))
        if found:
            return found.group(1)
    return "commented"


def _line(position: Json) -> int | None:
    line = position.get("new_line") or position.get("old_line")
    return line if isinstance(line, int) else None
