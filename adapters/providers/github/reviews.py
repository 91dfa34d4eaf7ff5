"""Posting a reviewer's verdict as a GitHub pull request review.

Inline comments go where GitHub accepts them: on a line the diff shows on its right side (an
added or context line of a hunk). Comments on other lines, or on a whole file, go into the
review body instead of being lost. GitHub refuses to let a pull request's author approve it or
request changes on it (422): the verdict is then posted as a COMMENT review that states it. A
review carries a marker with a digest of what it says, so a review whose response was lost is
found and not posted twice.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from adapters.providers.github import markers
from adapters.providers.github.api import GitHubApi
from domain.errors import ProviderError
from domain.results import AgentReview, AgentReviewComment

log = logging.getLogger(__name__)

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_EVENTS = {"approve": "APPROVE", "needs-changes": "REQUEST_CHANGES"}


def right_side_lines(patch: str | None) -> set[int]:
    """New-file line numbers a patch shows: where an inline comment can be anchored."""
    lines: set[int] = set()
    line = 0
    for text in (patch or "").split("\n"):
        start = _HUNK.match(text)
        if start:
            line = int(start.group(1))
        elif text.startswith((" ", "+")):
            lines.add(line)
            line += 1
    return lines


def _digest(head_sha: str, review: AgentReview) -> str:
    return hashlib.sha256(f"{head_sha}\n{review.model_dump_json()}".encode()).hexdigest()[:20]


def _body(review: AgentReview, event: str, outside: list[AgentReviewComment], digest: str) -> str:
    parts = [review.summary.strip()]
    if event == "COMMENT":
        parts.append(f"**Verdict: {review.verdict}**")
    if outside:
        notes = [f"- `{c.path}{'' if c.line is None else f':{c.line}'}`: {c.body}" for c in outside]
        parts.append("**Comments outside the diff**\n\n" + "\n".join(notes))
    parts.append(markers.review_marker(digest))
    return "\n\n".join(p for p in parts if p)


class ReviewPoster:
    def __init__(self, api: GitHubApi) -> None:
        self._api = api

    def post(self, number: int, head_sha: str, review: AgentReview) -> None:
        digest = _digest(head_sha, review)
        if self._posted(number, digest):
            return
        anchors = {
            f.filename: right_side_lines(f.patch if isinstance(f.patch, str) else None)
            for f in self._api.pull_files(number)
        }
        inline = [c for c in review.comments if c.line in anchors.get(c.path, set())]
        outside = [c for c in review.comments if c not in inline]
        plans = [
            (_EVENTS[review.verdict], inline, outside),
            ("COMMENT", inline, outside),  # GitHub refused the verdict (one's own PR)
            ("COMMENT", [], [*inline, *outside]),  # GitHub refused an anchor after all
        ]
        refused: ProviderError | None = None
        for event, on_lines, in_body in dict.fromkeys((e, tuple(i), tuple(o)) for e, i, o in plans):
            comments: list[dict[str, Any]] = [
                {"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body} for c in on_lines
            ]
            body = _body(review, event, list(in_body), digest)
            try:
                self._api.create_review(number, head_sha, event, body, comments)
            except ProviderError as exc:
                if exc.status == 422:
                    log.info("review of #%s as %s refused: %s", number, event, exc)
                    refused = exc
                    continue
                if exc.transient and self._posted(number, digest):
                    return  # made, but the answer was lost
                raise
            return
        assert refused is not None
        raise refused

    def _posted(self, number: int, digest: str) -> bool:
        return any(markers.review_digest(r.body) == digest for r in self._api.reviews(number))
