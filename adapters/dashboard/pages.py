"""The dashboard's page of one run (``GET /runs/<session>``) and of one item (``GET
/items/<id>``), rendered on the server like the board.

A run's page gives what ``cpe runs show`` gives, readable: its header (role, item, runtime,
status, attempt, duration, cost), its result (a reviewer's verdict, summary and inline comments,
an implementor's outcome and revision, or why it did not complete) and its activity (the
transcript's lines: text, tool calls, results' first lines). While the run is live its script
fetches the page's body again (``?part=body``) as the state changes and the run's activity
comes. ``GET /api/runs/<session>`` keeps the same data as JSON (``run_detail``).

An item's page gives what ``cpe work show`` prints (``adapters.describe.items.item_sections``), each
run's session a link to its page.

Everything shown is escaped; text from agents and the tracker is redacted first (``clean``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from adapters.dashboard.source import Source
from adapters.dashboard.views import clean, ended_words, review_view, run_view
from adapters.describe.items import item_sections
from adapters.runtime.artifacts.activity import run_activity
from domain.models import AgentRun, WorkItem, item_ref

OUTPUT_TAIL = 200_000  # characters of a run's activity (or transcript) a view carries at most


# ---------------------------------------------------------------------------- data


def run_detail(source: Source, run: AgentRun) -> dict[str, Any]:
    """One run, with what it did so far (live) or in all (ended): its transcript's activity,
    as ``cpe runs show`` gives it. A remote run's transcript comes back when it ends: its
    output stream meanwhile; a run from before the normalized transcript: its transcript.log.
    With its item (id, title, status), its result (``review``: a reviewer's verdict, summary
    and inline comments; ``delivered_revision``: an implementor's revision) and the limit of
    attempts, for the run's page. ``live``: the run has not ended (one still starting too)."""
    now = datetime.now(UTC)
    state = source.state()
    run = state.agent_runs.get(run.session_id, run)
    view = run_view(run, source, now, state)
    wid = run.work_item_id
    item = state.work_items.get(wid) if wid is not None else None
    view["item"] = {"id": item.id, "title": item.title, "status": item.status} if item else None
    view["max_attempts"] = source.settings.workflow.max_attempts
    view["delivered_revision"] = run.delivered_revision
    view["review"] = review_view(run, source.review(run)) if run.role == "reviewer" else None
    view["live"] = run.is_active
    buffer = source.engine.streams.buffer(run.session_id)
    activity = run_activity(source.state_dir / "runs" / run.session_id)
    if activity is not None:
        view["output"] = "\n".join(activity)[-OUTPUT_TAIL:]
    elif buffer is not None:
        view["output"] = buffer.text()[-OUTPUT_TAIL:]
    else:
        view["output"] = _transcript(source.state_dir, run)
    cleaned: dict[str, Any] = clean(view)
    return cleaned


def _transcript(state_dir: Path, run: AgentRun) -> str | None:
    path = state_dir / "runs" / run.session_id / "transcript.log"
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - OUTPUT_TAIL))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def item_detail(source: Source, item: WorkItem) -> dict[str, Any]:
    """What ``cpe work show`` prints of ``item`` as sections (heading, lines: their common
    indent taken off), with the sessions and items its lines name, to link them."""
    state = source.state()
    body = source.body(item)
    sections = item_sections(
        item, state.work_items, state, source.settings.workflow, source.state_dir, body
    )
    view = {
        "id": item.id,
        "title": item.title,
        "sections": [
            {"heading": heading, "lines": [line.removeprefix("  ") for line in lines]}
            for heading, lines in sections
        ],
        "sessions": [
            run.session_id for run in state.agent_runs.values() if run.work_item_id == item.id
        ],
        "items": list(state.work_items),
    }
    cleaned: dict[str, Any] = clean(view)
    return cleaned


# ---------------------------------------------------------------------------- pages


def document(title: str, main: str, *, script: str | None, attrs: str = "") -> str:
    """A page of the dashboard around ``main`` (already escaped): the header with the way back
    to the board, its style sheet and icon, and ``script`` if any."""
    tag = f'<script src="/static/{script}" defer></script>\n' if script else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · cpe</title>
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css">
{tag}</head>
<body>
<header>
  <h1><a href="/">cpe</a> <span class="repo">{escape(title)}</span></h1>
</header>
<main class="detail" id="detail"{attrs}>{main}</main>
</body>
</html>
"""


def render_run_page(detail: dict[str, Any]) -> str:
    session = escape(detail["session_id"])
    attrs = f' data-session="{session}" data-part="/runs/{session}?part=body"'
    return document(
        f"run {detail['session_id']}", render_run(detail), script="detail.js", attrs=attrs
    )


def render_run(detail: dict[str, Any]) -> str:
    """The run page's body: its header, its result, its activity."""
    d = detail
    live = "true" if d["live"] else "false"
    item = d["item"]
    if item is not None:
        subject = (
            f'<a href="/items/{escape(item["id"])}">{escape(item_ref(item["id"]))}</a> '
            f'{escape(item["title"])} <span class="badge">{escape(item["status"])}</span>'
        )
    else:
        subject = escape(d["subject"])
    runtime = escape(d["runtime"]) + (f" @{escape(d['node']['label'])}" if d["node"] else "")
    facts = [
        ("role", escape(d["role"])),
        ("item" if item is not None or d["work_item_id"] else "specs", subject),
        ("runtime", runtime),
        ("status", _ending_badge(d)),
    ]
    if d["attempt"] is not None:
        facts.append(("attempt", f"{d['attempt']} of {d['max_attempts']}"))
    facts += [
        ("started", escape(_clock(d["started_at"] or d["requested_at"]))),
        ("ended", escape(_clock(d["ended_at"])) if d["ended_at"] else "—"),
        ("duration", f"{d['duration_s']:.1f}s" if d["duration_s"] is not None else "—"),
        ("cost", f"${d['cost_usd']:.4f}" if d["cost_usd"] is not None else "—"),
        ("turns", str(d["turns"]) if d["turns"] is not None else "—"),
    ]
    rows = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    output = d["output"]
    empty = "nothing yet: the run is starting" if d["live"] else "no activity was recorded"
    activity = escape(output) if output else f'<span class="none">{empty}</span>'
    return (
        f'<div id="run-state" data-live="{live}" hidden></div>'
        f'<h2 class="title">{escape(d["role"])} run <code>{escape(d["session_id"])}</code></h2>'
        f'<dl class="run-facts">{rows}</dl>'
        f'<section class="result" id="result"><h2>Result</h2>{_result(d)}</section>'
        f'<section class="activity"><h2>Activity{" (live)" if d["live"] else ""}</h2>'
        f'<pre id="activity">{activity}</pre></section>'
    )


def _ending_badge(d: dict[str, Any]) -> str:
    ending = escape(d["ending"])
    return f'<span class="badge {ending}">{ending}</span>'


def _result(d: dict[str, Any]) -> str:
    """What the run came to: still running (and what its CLI says of the model API), a
    reviewer's review, an implementor's outcome, or why it did not complete."""
    ending = d["ending"]
    if d["live"]:
        signal = d["signal"]
        said = f'<p class="signal">{escape(signal["text"])}</p>' if signal else ""
        return f'<p class="none">{"running" if ending == "running" else "starting"}…</p>{said}'
    reason = escape(d["failure_reason"] or "")
    if ending in ("failed", "timed-out"):
        under = "under the agent · " if d["failure_class"] == "infrastructure" else ""
        return f'<p class="failure">{escape(ending)}: {under}{reason}</p>'
    if ending in ("cancelled", "interrupted"):
        said = escape(ended_words(ending, d["failure_reason"]))
        note = (
            " (by cpe itself: no failure of the work; it runs again if it is still due)"
            if ending == "interrupted"
            else ""
        )
        return f'<p class="ended-note">{said}{note}</p>'
    review = d["review"]
    if review is not None:
        return _review(review)
    outcome = escape(d["outcome"] or "completed")
    revision = d["delivered_revision"]
    delivered = f" · revision {escape(revision)}" if revision else ""
    return f'<p>outcome <span class="badge {outcome}">{outcome}</span>{delivered}</p>'


def _review(review: dict[str, Any]) -> str:
    verdict = escape(review["verdict"] or "")
    head = f" on head {escape(review['head'][:12])}" if review["head"] else ""
    summary = review["summary"]
    said = f'<p class="summary">{escape(summary)}</p>' if summary else ""
    comments = "".join(
        f'<li><code class="where">{escape(c["where"])}</code>'
        f'<span class="body">{escape(c["body"].strip())}</span></li>'
        for c in review["comments"]
    )
    listed = f'<ul class="review-comments">{comments}</ul>' if comments else ""
    return f'<p>verdict <span class="badge {verdict}">{verdict}</span>{head}</p>{said}{listed}'


def render_missing(what: str, message: str) -> str:
    """A page for a run or an item the engine does not know: what was asked, what was
    expected, and the way back."""
    body = (
        f'<h2 class="title">{escape(what)}</h2><p>{escape(message)}</p>'
        '<p><a href="/">the board</a></p>'
    )
    return document(what, body, script=None)


def render_item_page(detail: dict[str, Any]) -> str:
    return document(f"{item_ref(detail['id'])} {detail['title']}", render_item(detail), script=None)


def render_item(detail: dict[str, Any]) -> str:
    """``cpe work show``'s sections: the first (the item's own line and facts) as the title."""
    link = _linker(detail["sessions"], detail["items"])
    parts = []
    for n, section in enumerate(detail["sections"]):
        lines = "\n".join(link(escape(line)) for line in section["lines"])
        heading = escape(section["heading"])
        title = ' class="title"' if n == 0 else ""
        parts.append(
            f'<section class="item-section"><h2{title}>{heading}</h2><pre>{lines}</pre></section>'
        )
    return "".join(parts)


def _linker(sessions: list[str], items: list[str]) -> Any:
    """A function that makes each session id and ``#item`` in an escaped line a link."""
    names = sorted(sessions, key=len, reverse=True)
    alternatives = "|".join(re.escape(s) for s in names)
    session = re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w.-])") if names else None
    known = set(items)

    def link(line: str) -> str:
        if session is not None:
            line = session.sub(lambda m: f'<a href="/runs/{m[0]}">{m[0]}</a>', line)
        line = re.sub(
            r"(?<![\w&/])#([A-Za-z0-9._-]+)",
            lambda m: f'<a href="/items/{m[1]}">#{m[1]}</a>' if m[1] in known else m[0],
            line,
        )
        # A key (Linear's, Jira's ENG-12) is written without '#'.
        return re.sub(
            r"(?<![\w&/#>-])([A-Z][A-Z0-9]*-\d+)(?![\w-])",
            lambda m: f'<a href="/items/{m[1]}">{m[1]}</a>' if m[1] in known else m[0],
            line,
        )

    return link


def _clock(iso: str | None) -> str:
    if not iso:
        return "—"
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
