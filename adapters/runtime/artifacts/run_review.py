"""A reviewer run's review (verdict, summary, inline comments), as ``cpe work show`` and the
dashboard's item card show it.

It is read from the run's final response (``runner_final_response.json``), the structured output
the review was validated from (``domain.results.validate_output``, as the runtime did), redacted
as every artifact is. The engine's state keeps only a review's verdict, and the dashboard lives
beside the engine, where reading the journal would hold up the engine's writes: the run's
record is the one place both can read.

A review's text is the model's, and what it quotes comes from the repository and the tracker:
:func:`comment_lines` gives it as plain lines with no control characters (no terminal escape
sequence gets through); a web page escapes it itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from adapters.runtime.artifacts.files import CANONICAL_FILES
from domain.errors import InvalidAgentOutputError
from domain.results import AgentReview, AgentReviewComment, ReviewerResult, validate_output

__all__ = ["comment_lines", "comment_where", "plain", "run_review"]

_FINAL = CANONICAL_FILES["runner_final_response"]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
LINE_CHARS = 200  # of each line of a comment's body
BODY_LINES = 3  # of a comment's body, in cpe work show


def run_review(run_dir: Path) -> AgentReview | None:
    """The review of the reviewer run whose record is ``run_dir``; None when it has none (a
    run that failed, or whose record is gone)."""
    try:
        final = json.loads((run_dir / _FINAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(final, dict) or not final.get("available"):
        return None
    data = final.get("structured_output")
    try:
        output = validate_output("reviewer", data if data is not None else final.get("text"))
    except InvalidAgentOutputError:
        return None
    return output.review if isinstance(output, ReviewerResult) else None


def comment_where(comment: AgentReviewComment) -> str:
    """``path:line``, or the path alone for a comment on the whole file."""
    where = plain(comment.path)
    return where if comment.line is None else f"{where}:{comment.line}"


def comment_lines(comment: AgentReviewComment, limit: int = BODY_LINES) -> list[str]:
    """``path:line — body``: the body's first ``limit`` lines, each cut to LINE_CHARS, an
    ellipsis where more was left out."""
    body = [plain(line).strip() for line in comment.body.splitlines()]
    body = [line for line in body if line] or ["(no text)"]
    shown = [line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…" for line in body]
    shown = shown[:limit]
    if len(body) > limit and not shown[-1].endswith("…"):
        shown[-1] += " …"
    first, *rest = shown
    return [f"{comment_where(comment)} — {first}", *rest]


def plain(text: str) -> str:
    """``text`` without control characters (tabs become spaces)."""
    return _CONTROL.sub("", text.replace("\t", " "))
