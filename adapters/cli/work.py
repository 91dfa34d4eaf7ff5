"""``cpe work list|show|retry|cancel|set-status`` and ``cpe pause|resume``.

The reads come from the tracker (the local provider) and the journal; on GitHub, from the
journal: the engine's last view, no token needed. The requests go to the running engine over
its control socket, or into the journal when no engine runs (``adapters.control``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from actors.journal import JOURNAL_NAME, Journal
from adapters.cli.common import fail, journal_state
from adapters.cli.landing_view import list_note, show_lines
from adapters.cli.repository import default_branch, resolve_config
from adapters.cli.runs import describe_run, run_where
from adapters.cli.settings import CpeConfig
from adapters.runtime.artifacts.run_review import comment_lines, plain, run_review
from domain.errors import ConfigError, JournalInUseError
from domain.events import StatusTransitioned, UserTransitionedStatus, WorkItemChanged
from domain.models import STATUSES, EngineState, ReviewerStartParams, WorkItem, WorkItemId
from domain.requests import REQUEST_ADAPTER, RequestRefused, SetStatus, UserRequest
from domain.runs import attempt_number
from domain.selectors import open_blockers, ordered, revision_for, runs_for_work_item

EXIT_REFUSED = 1  # the state does not allow it (an unknown item, a status that forbids it)
EXIT_USAGE = 2  # what was typed is not a request (an unknown status name)
ENGINE_START_WAIT = 60.0  # seconds to wait for a starting engine's control socket


def bad_status(text: str, what: str) -> int:
    """One line for a status name that is not one, exit 2."""
    return fail(
        f"{what}: {text!r} is not a status; expected one of {', '.join(STATUSES)}", EXIT_USAGE
    )


# ---------------------------------------------------------------------------- reads


def work_list(status: str | None, config_path: Path | None, repo: Path | None) -> int:
    if status is not None and status not in STATUSES:
        return bad_status(status, "--status")
    try:
        config, root = resolve_config(config_path, repo)
        items, state = _items_and_state(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    shown = [items[wid] for wid in ordered(items) if status in (None, items[wid].status)]
    if not shown:
        print("(no work items" + (f" {status})" if status else ")"))
        return 0
    limit = config.workflow.max_attempts
    print(f"{'item':<6} {'status':<17} {'attempts':<8} {'revision':<22} {'cost':>9}  title")
    for item in shown:
        attempts = f"{attempt_number(state, item.id)}/{limit}"
        revision = revision_for(state, item)
        where = f"{revision.id} {revision.state} {revision.pipeline.status}" if revision else ""
        cost = _cost(state, item.id)
        blockers = ", ".join(f"#{b}" for b in open_blockers(item, items))
        after = f"  (blocked by {blockers})" if blockers else ""
        after += list_note(item, state, config)
        print(
            f"#{item.id:<5} {item.status:<17} {attempts:<8} {where:<22} {cost:>9}  "
            f"{item.title}{after}"
        )
    return 0


def work_show(work_item_id: str, config_path: Path | None, repo: Path | None) -> int:
    try:
        config, root = resolve_config(config_path, repo)
        items, state = _items_and_state(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    item = items.get(WorkItemId(work_item_id))
    if item is None:
        known = ", ".join(f"#{i}" for i in ordered(items)[:20]) or "none yet"
        return fail(
            f"unknown work item {work_item_id!r}; expected one cpe work list shows ({known})",
            EXIT_REFUSED,
        )
    state_dir = root / config.engine.state_dir
    body = _body(config, root, item)
    sections = item_sections(item, items, state, config, state_dir, body)
    for n, (heading, lines) in enumerate(sections):
        print(heading if n == 0 else f"\n{heading}")
        for line in lines:
            print(line)
    return 0


def item_sections(  # noqa: PLR0917 - what cpe work show and the dashboard both pass
    item: WorkItem,
    items: Mapping[WorkItemId, WorkItem],
    state: EngineState,
    config: CpeConfig,
    state_dir: Path,
    body: str,
) -> list[tuple[str, list[str]]]:
    """What ``cpe work show`` prints of an item, as (heading, lines) sections, each line as
    printed: the item's facts under its ``#id title``, then its body, status history, agent
    runs and reviews. The dashboard's item page shows the same sections."""
    facts = [f"  status    {item.status}"]
    if item.blocked_by:
        blockers = [
            f"#{b} ({items[b].status if b in items else 'unknown'})" for b in item.blocked_by
        ]
        facts.append(f"  blocked by {', '.join(blockers)}")
    facts.append(f"  attempts  {attempt_number(state, item.id)} of {config.workflow.max_attempts}")
    revision = revision_for(state, item)
    if revision is not None:
        pipeline = revision.pipeline
        failed = f" (failed: {', '.join(pipeline.failed_checks)})" if pipeline.failed_checks else ""
        facts.append(
            f"  revision  {revision.id} {revision.state}, pipeline {pipeline.status}{failed}, "
            f"head {revision.head_sha[:12]}, branch {revision.branch}"
        )
    facts += show_lines(item, state, config)
    runs = runs_for_work_item(state, item.id)
    failures = [run for run in runs if run.failure_reason]
    if failures:
        last = failures[-1]
        why = _flat(last.failure_reason)
        facts.append(f"  last failure  {last.session_id} {last.status}: {why}")
    ran = [f"  {describe_run(run, run_where(state_dir, run.session_id))}" for run in runs]
    ran.append(f"  total cost {_cost(state, item.id) or '$0'}" if runs else "  (none)")
    return [
        (f"#{item.id} {item.title}", facts),
        ("body", [f"  {line}" for line in (body or "(empty)").splitlines()]),
        (
            "status history (oldest first)",
            [f"  {line}" for line in _history(state_dir, item.id) or ["(none journaled yet)"]],
        ),
        ("agent runs", ran),
        ("reviews", [f"  {line}" for line in _reviews(state_dir, state, item) or ["(none)"]]),
    ]


def _items_and_state(
    config: CpeConfig, root: Path
) -> tuple[dict[WorkItemId, WorkItem], EngineState]:
    """The work items and the state to describe them by: the journal's, with the tracker's
    items and revisions over it (local provider); on GitHub, the engine's last view."""
    state = journal_state(root / config.engine.state_dir)
    if config.provider.kind == "local":
        from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

        branch = default_branch(config, root)
        provider = LocalProvider(root, root / config.engine.state_dir, branch)
        try:
            items = provider.work_item_reader.list_work_items()
            revisions = provider.revision_reader.list_revisions()
        finally:
            provider.close()
        state = state.model_copy(
            update={
                "work_items": {i.id: i for i in items},
                "revisions": {r.id: r for r in revisions},
            }
        )
    return dict(state.work_items), state


def _tracker_items(config: CpeConfig, root: Path) -> list[WorkItem] | None:
    if config.provider.kind != "local":
        return None
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(root, root / config.engine.state_dir, default_branch(config, root))
    try:
        return list(provider.work_item_reader.list_work_items())
    finally:
        provider.close()


def _body(config: CpeConfig, root: Path, item: WorkItem) -> str:
    if config.provider.kind != "local":
        return github_body(config, item)
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(root, root / config.engine.state_dir, default_branch(config, root))
    try:
        return provider.work_item_reader.get_work_item_body(item.id)
    finally:
        provider.close()


def github_body(config: CpeConfig, item: WorkItem) -> str:
    """Where a GitHub item's body is (it is not read: no token needed to look)."""
    github = config.provider.github
    where = github.repository if github else ""
    return f"(on GitHub: https://github.com/{where}/issues/{item.id})"


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
                    lines.append(f"{when}  {said[0].removeprefix(f'#{wid} ')}  (cpe)")
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


def _cost(state: EngineState, wid: WorkItemId) -> str:
    costs = [run.cost_usd for run in runs_for_work_item(state, wid) if run.cost_usd is not None]
    return f"${sum(costs):.4f}" if costs else ""


def _flat(text: str | None) -> str:
    return " ".join((text or "").split())


# ---------------------------------------------------------------------------- requests


def request(payload: UserRequest, config_path: Path | None, repo: Path | None) -> int:
    """Send ``payload`` to the running engine, or journal it for the next one."""
    # The control socket's module imports the engine: the requests' alone, not the reads'.
    from adapters.control import PROCESS_TIMEOUT, NoEngine, accept_offline, exchange  # noqa: PLC0415

    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    state_dir = root / config.engine.state_dir
    message = {"request": REQUEST_ADAPTER.dump_python(payload, mode="json")}
    deadline = time.monotonic() + ENGINE_START_WAIT
    pause = threading.Event()  # never set: a bounded pause between two tries

    def tracked() -> list[WorkItem] | None:
        return _tracker_items(config, root)

    while True:
        try:
            replies = exchange(state_dir, message, 30, read_timeout=PROCESS_TIMEOUT + 30)
            reply = next(iter(replies), None)
        except (TimeoutError, ConnectionError) as exc:
            return fail(f"the engine did not answer on {state_dir / 'control.sock'}: {exc}", 1)
        except NoEngine:
            reply = None
            try:
                accepted = accept_offline(payload, config, state_dir, tracked)
            except JournalInUseError as exc:
                # An engine holds the state but does not answer yet (it is starting).
                if time.monotonic() < deadline:
                    pause.wait(0.2)
                    continue
                return fail(f"{exc}; it does not answer on {state_dir / 'control.sock'}", 1)
            except RequestRefused as exc:
                return fail(str(exc), _exit(exc.kind))
            if isinstance(payload, SetStatus) and accepted.events and _local(config):
                _write_status(config, root, payload)  # seen at once; the engine says it again
            print(accepted.message)
            return 0
        if reply is None:
            return fail("the engine closed the control socket without an answer", 1)
        if not reply.get("ok"):
            return fail(str(reply.get("error")), _exit(str(reply.get("kind"))))
        print(reply.get("message", "done"))
        return 0


def _local(config: CpeConfig) -> bool:
    return config.provider.kind == "local"


def _write_status(config: CpeConfig, root: Path, payload: SetStatus) -> None:
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(root, root / config.engine.state_dir, default_branch(config, root))
    try:
        provider.work_item_writer.transition_status(payload.work_item_id, payload.to)
    finally:
        provider.close()


def _exit(kind: str) -> int:
    return EXIT_USAGE if kind == "invalid" else EXIT_REFUSED


def read_body(body: str, body_file: Path | None) -> str | None:
    """A work item's body: ``--body``, or ``--body-file`` (``-``: standard input); None, said
    on stderr, when the file cannot be read."""
    if body_file is None:
        return body
    try:
        if str(body_file) == "-":
            return sys.stdin.read()
        return body_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"cpe: work add: --body-file {body_file}: cannot read it: {exc}", file=sys.stderr)
        return None


def work_add(title: str, body: str, config_path: Path | None, repo: Path | None) -> int:
    if not title.strip():
        return fail("work add: the title is empty; expected a few words saying what to do", 2)
    try:
        config, root = resolve_config(config_path, repo)
        branch = default_branch(config, root)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if config.provider.kind != "local":
        github = config.provider.github
        where = f" in {github.repository}" if github else ""
        return fail(
            f"work add: provider.kind is {config.provider.kind!r}; expected 'local' "
            f"(on GitHub, open an issue{where} instead)"
        )
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(root, root / config.engine.state_dir, branch)
    try:
        wid: WorkItemId = provider.work_item_writer.create_work_item(title, body)
    finally:
        provider.close()
    from adapters.control import poke  # noqa: PLC0415

    # A running engine reads it now, not at its next poll.
    running = poke(root / config.engine.state_dir, ("work_items",))
    print(f"created work item #{wid}" + (" (the running engine has it)" if running else ""))
    return 0
