"""The dashboard page, rendered on the server from ``state_view``: the whole page for ``GET /``,
and the board alone for ``GET /board`` (the page's script fetches it again whenever the state
changes). Everything shown is escaped; the page loads only its own script and style sheet.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any

from domain.models import item_ref
from domain.signals import clock

COLUMNS = ("pending", "in-progress", "in-review", "needs-refinement", "approved", "blocked", "done")


def render_page(view: dict[str, Any]) -> str:
    title = escape(view.get("title") or "cpe")
    hidden = "" if view.get("actions") else " hidden"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · cpe</title>
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<header>
  <h1>cpe <span class="repo">{title}</span></h1>
  <form id="token-form" class="token" autocomplete="off"{hidden}>
    <label>token <input id="token" type="password" placeholder="for actions"></label>
  </form>
</header>
<div id="notice" role="status" aria-live="polite"></div>
<main>
  <div id="board">{render_board(view)}</div>
  <section class="live">
    <h2>Live agent activity</h2>
    <div id="live">{render_live(view)}</div>
  </section>
</main>
</body>
</html>
"""


def render_live(view: dict[str, Any]) -> str:
    """A box for each active run (one still starting too), its activity filled in by the
    page's script; "no run is active" only when none is."""
    active = view["runs"]["active"]
    hidden = " hidden" if active else ""
    boxes = "".join(
        f'<article class="run-output" id="live-{escape(run["session_id"])}" '
        f'data-session="{escape(run["session_id"])}"><h3>{escape(_live_head(run))}</h3>'
        f'<p class="signal">{escape(run["signal"]["text"] if run["signal"] else "")}</p>'
        "<pre></pre></article>"
        for run in active
    )
    return f'<p class="none" id="live-none"{hidden}>no run is active</p>{boxes}'


def _live_head(run: dict[str, Any]) -> str:
    """``implementor · #1 · implementor-3f9a…``, as the page's script writes it too."""
    subject = f"{item_ref(run['work_item_id'])}" if run["work_item_id"] else run["subject"]
    node = f" · on {run['node']['label']}" if run["node"] else ""
    return f"{run['role']} · {subject} · {run['session_id']}{node}"


def render_board(view: dict[str, Any]) -> str:
    actions = bool(view.get("actions"))
    parts = [
        _summary(view, actions),
        _columns(view, actions),
        _queue(view),
        _accounts(view),
        _lower(view),
    ]
    return "\n".join(part for part in parts if part)


def _summary(view: dict[str, Any], actions: bool) -> str:
    totals = view["totals"]
    paused = view.get("paused")
    engine = view.get("engine", "running")
    if paused:  # each pause on a line of its own, as cpe status gives them: a person's first
        state = "".join(
            _pause_banner(pause, first=n == 0) for n, pause in enumerate(view["pauses"])
        )
    else:
        what = "running" if engine == "running" else "stopped: the engine has stopped"
        if engine != "running" and not actions:
            what = "stopped: this is the engine's final state"
        state = f'<div class="banner {escape(engine)}" id="paused">dispatch {what}</div>'
    state += "".join(  # a model account whose runs wait, on a line of its own
        f'<div class="banner held" data-account="{escape(account["account"])}">'
        f"{escape(account['hold']['text'])}</div>"
        for account in view.get("accounts", [])
        if account["hold"]
    )
    state += _baseline_banner(view.get("baseline"))
    button = ""
    if actions:
        if paused:
            button = '<button class="act" data-action="resume">Resume dispatch</button>'
        else:  # what the person says goes with the pause: cpe status and the banner show it
            button = (
                '<form class="pause-form" id="pause-form"><input id="pause-reason" '
                'name="reason" maxlength="500" placeholder="why pause? (optional)" '
                'aria-label="why pause dispatch"><button class="act" data-action="pause">'
                "Pause dispatch</button></form>"
            )
    cells = [
        ("runs", str(totals["runs"])),
        ("active", str(totals["active_runs"])),
        ("runs today", str(totals["runs_today"])),
        ("cost today", f"${totals['cost_today_usd']:.4f}"),
        ("cost", f"${totals['cost_usd']:.4f}"),
        ("queue", str(totals["queue_depth"])),
    ]
    stats = "".join(
        f'<div class="stat"><span class="n">{escape(v)}</span>{escape(k)}</div>' for k, v in cells
    )
    return (
        f'<section class="summary"><div class="banners">{state}</div>{button}'
        f'<div class="stats">{stats}</div></section>'
    )


def _baseline_banner(red: dict[str, Any] | None) -> str:
    """The red default branch, as cpe status says it: where and which checks, the last lines
    of its failure, its log, and what it means for revisions."""
    if not red:
        return ""
    failure = "".join(f"<code>{escape(line)}</code>" for line in red["failure"])
    url = red["url"] or ""
    log = ""
    if url.startswith(("http://", "https://")):
        log = f'<a href="{escape(url)}" rel="noreferrer">log</a>'
    elif url:
        log = f"log: {escape(url)}"
    means = escape(" ".join(red["means"]))
    return (
        f'<div class="banner red" id="baseline"><div>{escape(red["headline"])}</div>'
        f'<div class="lines">{failure}</div><div class="means">{means} {log}</div></div>'
    )


def _pause_banner(pause: dict[str, Any], *, first: bool) -> str:
    """A pause of dispatch in cpe status's words; what goes with it when hovered."""
    where = ' id="paused"' if first else ""
    return (
        f'<div class="banner paused"{where} data-by="{escape(pause["by"])}"'
        f"{_title(pause['detail'])}>{escape(pause['text'])}</div>"
    )


def _columns(view: dict[str, Any], actions: bool) -> str:
    by_status: dict[str, list[dict[str, Any]]] = {status: [] for status in COLUMNS}
    for item in view["work_items"]:
        by_status.setdefault(item["status"], []).append(item)
    columns = []
    for status in COLUMNS:
        items = by_status[status]
        cards = "".join(_card(item, actions) for item in items) or '<p class="none">—</p>'
        columns.append(
            f'<section class="column" data-status="{status}"><h2>{status} '
            f'<span class="count">{len(items)}</span></h2>{cards}</section>'
        )
    return f'<div class="columns">{"".join(columns)}</div>'


def _card(item: dict[str, Any], actions: bool) -> str:
    wid = escape(item["id"])
    lines = [
        f'<h3><a class="item-link" href="/items/{wid}"><span class="id">{item_ref(wid)}</span> '
        f"{escape(item['title'])}</a></h3>"
    ]
    if item["blocked_by"]:
        chips = "".join(
            f'<span class="chip {escape(b["status"])}">'
            f"{item_ref(escape(b['id']))} {escape(b['status'])}</span>"
            for b in item["blocked_by"]
        )
        lines.append(f'<div class="deps">needs {chips}</div>')
    facts = [f"attempts {item['attempts']}/{item['max_attempts']}"]
    if item["cost_usd"] is not None:
        facts.append(f"${item['cost_usd']:.4f}")
    facts.append(f"{len(item['runs'])} run{'s' if len(item['runs']) != 1 else ''}")
    lines.append(f'<div class="facts">{escape(" · ".join(facts))}</div>')
    revision = item["revision"]
    if revision:
        pipeline = revision["pipeline"]["status"]
        lines.append(
            f'<div class="rev">revision {escape(revision["id"])} {escape(revision["state"])} '
            f'<span class="badge {escape(pipeline)}">pipeline {escape(pipeline)}</span></div>'
        )
    if item["reviews"]:
        verdicts = "".join(
            f'<span class="badge {escape(r["verdict"] or "")}">{escape(r["verdict"] or "")}</span>'
            for r in item["reviews"]
        )
        lines.append(f'<div class="reviews">reviews {verdicts}</div>')
        lines.extend(_comments(review) for review in item["reviews"] if review["comments"])
    sent = item.get("sent_back")
    if sent:
        files = f" in {_short(', '.join(sent['files']), 120)}" if sent["files"] else ""
        lines.append(
            f'<div class="sentback" title="{escape(sent["reason"])}">sent back by the merge '
            f"queue: {escape(sent['problem'])}{escape(files)} (round {sent['rounds']} of "
            f"{sent['max_rounds']}) · {escape(_short(sent['reason'], 200))}</div>"
        )
    why = item.get("not_merged")
    if why:  # cpe status's words: the queue's step, or what the merge waits for
        lines.append(f'<div class="not-merged">not merged: {escape(_short(why, 300))}</div>')
    lines.append(_last_end(item))
    if actions:
        buttons = []
        if item["can_retry"]:
            buttons.append(
                f'<button class="act" data-action="retry" data-item="{wid}">Retry</button>'
            )
        if item["can_cancel"]:
            ask = (
                f"Cancel the run on {item_ref(item['id'])} {item['title']!r}? The item is blocked "
                "until someone retries it."
            )
            buttons.append(
                f'<button class="act" data-action="cancel" data-item="{wid}" '
                f'data-confirm="{escape(ask)}">Cancel</button>'
            )
        if buttons:
            lines.append(f'<div class="buttons">{"".join(buttons)}</div>')
    status = escape(item["status"])
    body = "".join(lines)
    return f'<article class="card" id="item-{wid}" data-status="{status}">{body}</article>'


def _last_end(item: dict[str, Any]) -> str:
    """How the item's current run ended, when it did not complete: a failure in red; a
    cancellation by a person, or an interruption by cpe's own stop, neutral. A previous run's
    end is not the card's (the item's page has the history)."""
    end = item["last_end"]
    if not end or item["status"] == "done":
        return ""
    session = escape(end["session_id"])
    if end["ending"] in ("cancelled", "interrupted"):
        return (
            f'<div class="ended-note" data-ending="{escape(end["ending"])}" title="{session}">'
            f"{escape(_short(end['text'], 240))}</div>"
        )
    return f'<div class="failure" title="{session}">{escape(_short(end["reason"], 240))}</div>'


def _comments(review: dict[str, Any]) -> str:
    """A review's inline comments, folded under its verdict: ``path:line`` and the body."""
    comments = review["comments"]
    rows = "".join(
        f'<li><code class="where">{escape(c["where"])}</code> '
        f'<span class="body">{escape(_cut(c["body"].strip(), 600))}</span></li>'
        for c in comments
    )
    count = len(comments)
    verdict = escape(review["verdict"] or "")
    return (
        f'<details class="comments" id="comments-{escape(review["session_id"])}"'
        f"{_title(review['summary'])}><summary>{verdict}: {count} inline comment"
        f"{'s' if count != 1 else ''}</summary><ul>{rows}</ul></details>"
    )


def _queue(view: dict[str, Any]) -> str:
    """The merge queue in order, each entry's step and last test; the merges held below."""
    queue = view["merge_queue"]
    entries = queue["entries"]
    rows = "".join(_queue_row(entry) for entry in entries)
    if rows:
        table = (
            '<table class="queue-entries"><thead><tr><th>#</th><th>item</th><th>revision</th>'
            f"<th>step</th><th>last test</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    elif queue["active"]:
        table = '<p class="none">empty</p>'
    else:
        table = '<p class="none">off: approved revisions are not landed through the queue</p>'
    held = "".join(_held_row(h) for h in queue["held"])
    if held:
        held = f'<h3>merges held</h3><ul class="held">{held}</ul>'
    landed = queue["landings_total"]
    return (
        f'<section class="queue" id="merge-queue"><h2>merge queue <span class="count">'
        f'{len(entries)}</span> <span class="landed">{landed} landed</span></h2>'
        f"{table}{held}</section>"
    )


def _held_row(held: dict[str, Any]) -> str:
    item, tries = held["item"], held["tries"]
    return (
        f'<li data-revision="{escape(held["revision_id"])}"><span class="id">#'
        f"{escape(item['id'])}</span> {escape(item['title'] or '')} · revision "
        f"{escape(held['revision_id'])} at {escape(held['head_sha'])}: "
        f"{escape(_short(held['reason'], 300))} "
        f'<span class="tries">({tries} tr{"ies" if tries != 1 else "y"})</span></li>'
    )


def _queue_row(entry: dict[str, Any]) -> str:
    item = entry["item"]
    test = entry["test"]
    tested = ""
    if test:
        runs = test["tests"]
        tested = (
            f"{escape(test['tested_sha'])} on {escape(test['base_sha'])} · "
            f"{runs} pipeline run{'s' if runs != 1 else ''}{' · stale' if test['stale'] else ''}"
        )
    return (
        f'<tr data-item="{escape(item["id"])}"><td>{entry["position"]}</td>'
        f'<td><span class="id">{escape(item_ref(item["id"]))}</span> {escape(item["title"])}</td>'
        f"<td>{escape(entry['revision_id'])}</td><td>{escape(entry['step'])}</td>"
        f"<td>{tested}</td></tr>"
    )


def _accounts(view: dict[str, Any]) -> str:
    """The model accounts whose runs reported their usage: each window's utilization and
    reset, and the account's hold, as cpe status lists them. Nothing before any report."""
    accounts = view.get("accounts") or []
    if not accounts:
        return ""
    rows = "".join(_account_row(account) for account in accounts)
    return (
        '<section class="accounts" id="model-accounts"><h2>model accounts <span class="note">'
        f"usage as their runs last reported it</span></h2><ul>{rows}</ul></section>"
    )


def _account_row(account: dict[str, Any]) -> str:
    name = escape(account["account"])
    roles = f' <span class="roles">({escape(", ".join(account["roles"]))})</span>'
    seen = account["reported_at"]
    reported = f' <span class="seen">reported {escape(_clock(seen))}</span>' if seen else ""
    meters = "".join(_meter(window) for window in account["windows"])
    hold = account["hold"]
    held = f'<div class="hold">{escape(hold["text"])}</div>' if hold else ""
    return (
        f'<li data-account="{name}"><b>{name}</b>{roles if account["roles"] else ""}: '
        f'<span class="usage">{escape(account["usage"])}</span>{reported}'
        f'<div class="meters">{meters}</div>{held}</li>'
    )


def _meter(window: dict[str, Any]) -> str:
    """A window's utilization as a bar (its words are the account's ``usage``)."""
    used = window["utilization"]
    if used is None:
        return ""
    width = max(0.0, min(1.0, used)) * 100
    spent = " spent" if window["status"] == "rejected" or used >= 1 else ""
    return (
        f'<span class="meter{spent}" data-window="{escape(window["name"])}" '
        f'title="{escape(window["label"])} {used:.0%} used">{escape(window["label"])} '
        f'<span class="bar"><span style="width:{width:.0f}%"></span></span> {used:.0%}</span>'
    )


def _clock(iso: str) -> str:
    """``2026-11-29T12:00:00+00:00`` as cpe status gives a time: ``2026-11-29 12:00 UTC``."""
    return clock(datetime.fromisoformat(iso).astimezone(UTC))


def _title(text: str | None) -> str:
    return f' title="{escape(text)}"' if text else ""


def _lower(view: dict[str, Any]) -> str:
    failures = (
        "".join(
            f'<li><a href="/runs/{escape(run["session_id"])}"><b>{escape(run["role"])} '
            f"{escape(run['subject'])}</b></a> "
            f'<span class="badge {escape(run["status"])}">{escape(run["status"])}</span> '
            f"{'under the agent · ' if run['failure_class'] == 'infrastructure' else ''}"
            f"{escape(_short(run['failure_reason'], 400))}</li>"
            for run in view["failures"]
        )
        or '<li class="none">none</li>'
    )
    active = view["runs"]["active"]
    runs = "".join(_run_row(run) for run in active + view["runs"]["recent"][:15])
    decisions = (
        "".join(
            f"<li><time>{escape(d['at'][11:19])}</time> {escape(d['text'])}</li>"
            for d in view["decisions"][:30]
        )
        or '<li class="none">none yet</li>'
    )
    return f"""<div class="lower">
<section><h2>Recent failures</h2><ul class="failures">{failures}</ul></section>
<section class="runs-panel"><h2>Agent runs</h2><table class="runs"><thead><tr><th>session</th>
<th>role</th><th>runtime</th><th>subject</th><th>status</th><th>time</th><th>cost</th><th>outcome</th></tr>
</thead><tbody>{runs or _NO_RUNS}</tbody></table></section>
<section><h2>Decisions</h2><ul class="decisions">{decisions}</ul></section>
</div>"""


_NO_RUNS = '<tr><td colspan="8" class="none">none yet</td></tr>'


def _run_row(run: dict[str, Any]) -> str:
    duration = f"{run['duration_s']:.1f}s" if run["duration_s"] is not None else ""
    cost = f"${run['cost_usd']:.4f}" if run["cost_usd"] is not None else ""
    outcome = run["outcome"] or _short(run["failure_reason"], 160) or ""
    attempt = f' <span class="attempt">attempt {run["attempt"]}</span>' if run["attempt"] else ""
    session = escape(run["session_id"])
    active = "true" if run["status"] in ("requested", "running") else "false"
    ending = escape(run["ending"])  # interrupted, cancelled: neutral, not a failure
    runtime = escape(run["runtime"])
    if run.get("node"):  # a remote run: on which node, as cpe status shows it
        node = run["node"]
        runtime += (
            f'<span class="node" title="node {escape(node["id"])} at {escape(node["address"])}">'
            f"@{escape(node['label'])}</span>"
        )
    row = (
        f'<tr data-session="{session}" data-active="{active}">'
        f'<td><a href="/runs/{session}">{session}</a></td><td>{escape(run["role"])}</td>'
        f"<td>{runtime}</td><td>{escape(run['subject'])}{attempt}</td>"
        f'<td><span class="badge {ending}">{ending}</span></td>'
        f'<td>{duration}</td><td>{cost}</td><td class="outcome">{escape(outcome)}</td></tr>'
    )
    signal = run.get("signal")
    if signal:  # what the run's CLI says of the model API, under its row (as cpe status does)
        row += (
            f'<tr class="signal {escape(signal["kind"])}" data-signal-of="{session}">'
            f'<td colspan="8">{escape(signal["text"])}</td></tr>'
        )
    return row


def _cut(text: str, limit: int) -> str:
    """``text`` as it is (its lines and spaces: code), cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(text: str | None, limit: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
