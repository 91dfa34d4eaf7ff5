"""A work item as ``cpe work show`` prints it and the dashboard's item page shows it: its facts,
body, status history (from the journal), agent runs and reviews (from the runs' records)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from actors.journal import JOURNAL_NAME, Journal
from adapters.describe.landing import Workflow, show_lines
from adapters.describe.plain import plain as shown
from adapters.describe.runs import describe_run, run_where
from adapters.runtime.artifacts.run_review import comment_lines, plain, run_review
from domain.events import StatusTransitioned, UserTransitionedStatus, WorkItemChanged
from domain.models import EngineState, ReviewerStartParams, WorkItem, WorkItemId, item_ref
from domain.runs import attempt_number
from domain.selectors import revision_for, runs_for_work_item


def item_sections(  # noqa: PLR0917 - what cpe work show and the dashboard both pass
    item: WorkItem,
    items: Mapping[WorkItemId, WorkItem],
    state: EngineState,
    workflow: Workflow,
    state_dir: Path,
    body: str,
) -> list[tuple[str, list[str]]]:
    """What ``cpe work show`` prints of an item, as (heading, lines) sections, each line as
    printed: the item's facts under its ``#id title``, then its body, status history, agent
    runs and reviews. The dashboard's item page shows the same sections."""
    facts = [f"  status    {item.status}"]
    if item.blocked_by:
        blockers = [
            f"{item_ref(b)} ({items[b].status if b in items else 'unknown'})"
            for b in item.blocked_by
        ]
        facts.append(f"  blocked by {', '.join(blockers)}")
    facts.append(f"  attempts  {attempt_number(state, item.id)} of {workflow.max_attempts}")
    revision = revision_for(state, item)
    if revision is not None:
        pipeline = revision.pipeline
        failed = f" (failed: {', '.join(pipeline.failed_checks)})" if pipeline.failed_checks else ""
        facts.append(
            f"  revision  {revision.id} {revision.state}, pipeline {pipeline.status}{failed}, "
            f"head {revision.head_sha[:12]}, branch {revision.branch}"
        )
    facts += show_lines(item, state, workflow)
    runs = runs_for_work_item(state, item.id)
    failures = [run for run in runs if run.failure_reason]
    if failures:
        last = failures[-1]
        why = _flat(last.failure_reason)
        facts.append(f"  last failure  {last.session_id} {last.status}: {why}")
    ran = [f"  {describe_run(run, run_where(state_dir, run.session_id))}" for run in runs]
    ran.append(f"  total cost {item_cost(state, item.id) or '$0'}" if runs else "  (none)")
    sections = [
        (f"{item_ref(item.id)} {item.title}", facts),
        ("body", [f"  {line}" for line in (body or "(empty)").splitlines()]),
        (
            "status history (oldest first)",
            [f"  {line}" for line in _history(state_dir, item.id) or ["(none journaled yet)"]],
        ),
        ("agent runs", ran),
        ("reviews", [f"  {line}" for line in _reviews(state_dir, state, item) or ["(none)"]]),
    ]
    # A title, a body, a reason come from the tracker and the agents: printed as data.
    return [(shown(heading), [shown(line) for line in lines]) for heading, lines in sections]


@dataclass(frozen=True)
class IssuePages:
    """Where a tracker that is not the local one shows its items: ``name`` ("GitHub",
    "GitLab", "Jira", "Linear") and the address an item's id is appended to ("": none known,
    the item is named by its id). Its body is not read: no token needed to look."""

    name: str
    url: str

    def body(self, item: WorkItem) -> str:
        return f"(on {self.name}: {self.url}{item.id})"


def github_pages(repository: str) -> IssuePages:
    """A GitHub repository's (``owner/name``) issues."""
    return IssuePages("GitHub", f"https://github.com/{repository}/issues/")


def gitlab_pages(base_url: str, project: str) -> IssuePages:
    """A GitLab project's (``group/name`` on the instance at ``base_url``) issues."""
    return IssuePages("GitLab", f"{base_url.rstrip('/')}/{project}/-/issues/")


def jira_pages(base_url: str) -> IssuePages:
    """A Jira site's (Cloud or Data Center, at ``base_url``) issues, by key: ``/browse/PROJ-12``."""
    return IssuePages("Jira", f"{base_url.rstrip('/')}/browse/")


def linear_pages() -> IssuePages:
    """Linear's issues: their address holds the workspace's URL key
    (``https://linear.app/<workspace>/issue/ENG-12``), which the settings do not name, so an
    item is named by its identifier alone."""
    return IssuePages("Linear", "")


def github_body(repository: str, item: WorkItem) -> str:
    """Where a GitHub item's body is, in ``repository`` (``owner/name``)."""
    return github_pages(repository).body(item)


def _history(state_dir: Path, wid: WorkItemId) -> list[str]:
    """Each change of the item's status the journal holds: the engine's, a person's request,
    one seen on the tracker."""
    path = state_dir / JOURNAL_NAME
    if not path.exists():
        return []
    from domain.narration import narrate  # noqa: PLC0415
    from domain.state import apply_event  # noqa: PLC0415

    lines: list[str] = []
    last: str | None = None
    state = EngineState()
    journal = Journal(path)
    try:
        for entry in journal.entries():
            event = entry.event
            before, state = state, apply_event(state, event)
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(entry.at))
            if isinstance(event, StatusTransitioned) and event.work_item_id == wid:
                # in the console's words: why, as the engine said it then
                said = narrate(event, before, state)
                if said and ": " in said[0]:  # with its why (else the reason cpe wrote)
                    lines.append(f"{when}  {said[0].removeprefix(f'{item_ref(wid)} ')}  (cpe)")
                    last = event.to
                    continue
            if isinstance(event, WorkItemChanged) and event.work_item.id == wid:
                status = event.work_item.status
                if last is None:
                    lines.append(f"{when}  first seen: {status}  (tracker)")
                elif status != last:
                    lines.append(f"{when}  {last} → {status}  (seen on the tracker)")
                last = status
            elif isinstance(event, StatusTransitioned) and event.work_item_id == wid:
                why = f": {event.reason}" if event.reason else ""
                lines.append(f"{when}  {last or '?'} → {event.to}  (cpe{why})")
                last = event.to
            elif isinstance(event, UserTransitionedStatus) and event.work_item_id == wid:
                lines.append(f"{when}  {event.to} requested by a person")
    finally:
        journal.close()
    return lines


def _reviews(state_dir: Path, state: EngineState, item: WorkItem) -> list[str]:
    """Each review of the item's reviewer runs: its verdict, revision and head, summary, and
    its inline comments under it (``path:line — body``), from the run's record."""
    lines: list[str] = []
    for run in runs_for_work_item(state, item.id):
        if run.role != "reviewer" or not run.outcome:
            continue
        params, on = run.params, ""
        if isinstance(params, ReviewerStartParams):
            on = f" on revision {params.revision_id}"
        review = run_review(state_dir / "runs" / run.session_id)
        summary = f": {plain(_flat(review.summary))[:200]}" if review and review.summary else ""
        head = f" (head {run.subject_sha[:12]})" if run.subject_sha else ""
        lines.append(f"{run.session_id} {run.outcome}{on}{head}{summary}")
        for comment in review.comments if review else ():
            first, *rest = comment_lines(comment)
            lines.append(f"  {first}")
            lines.extend(f"      {line}" for line in rest)
    return lines


def item_cost(state: EngineState, wid: WorkItemId) -> str:
    costs = [run.cost_usd for run in runs_for_work_item(state, wid) if run.cost_usd is not None]
    return f"${sum(costs):.4f}" if costs else ""


def _flat(text: str | None) -> str:
    return " ".join((text or "").split())
