"""``cpe work list|show|retry|cancel|set-status`` and ``cpe pause|resume``.

The reads come from the tracker (the local one, whatever the forge) and the journal; on GitHub
or GitLab, from the journal: the engine's last view, no token needed. The requests go to the
running engine over its control socket, or into the journal when no engine runs
(``adapters.host.control``).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from adapters.cli.common import fail, journal_state
from adapters.cli.provider_settings import NAMES
from adapters.cli.providers import issue_pages, local_forge_revisions, open_local_tracker
from adapters.cli.repository import default_branch, resolve_config
from adapters.cli.settings import CpeConfig
from adapters.describe.items import item_cost, item_sections
from adapters.describe.landing import list_note
from adapters.describe.plain import plain
from domain.errors import ConfigError, JournalInUseError
from domain.models import STATUSES, EngineState, WorkItem, WorkItemId, item_ref
from domain.requests import REQUEST_ADAPTER, RequestRefused, SetStatus, UserRequest
from domain.runs import attempt_number
from domain.selectors import open_blockers, ordered, revision_for

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
    width = max([5, *(len(item_ref(item.id)) for item in shown)])  # #7, ENG-12, PROJ-1234
    print(f"{'item':<{width}} {'status':<17} {'attempts':<8} {'revision':<22} {'cost':>9}  title")
    for item in shown:
        attempts = f"{attempt_number(state, item.id)}/{limit}"
        revision = revision_for(state, item)
        where = f"{revision.id} {revision.state} {revision.pipeline.status}" if revision else ""
        cost = item_cost(state, item.id)
        blockers = ", ".join(f"{item_ref(b)}" for b in open_blockers(item, items))
        after = f"  (blocked by {blockers})" if blockers else ""
        after += list_note(item, state, config.workflow)
        print(
            f"{item_ref(item.id):<{width}} {item.status:<17} {attempts:<8} {where:<22} {cost:>9}  "
            f"{plain(item.title)}{after}"
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
        known = ", ".join(f"{item_ref(i)}" for i in ordered(items)[:20]) or "none yet"
        return fail(
            f"unknown work item {work_item_id!r}; expected one cpe work list shows ({known})",
            EXIT_REFUSED,
        )
    state_dir = root / config.engine.state_dir
    body = _body(config, root, item)
    sections = item_sections(item, items, state, config.workflow, state_dir, body)
    for n, (heading, lines) in enumerate(sections):
        print(heading if n == 0 else f"\n{heading}")
        for line in lines:
            print(line)
    return 0


def _items_and_state(
    config: CpeConfig, root: Path
) -> tuple[dict[WorkItemId, WorkItem], EngineState]:
    """The work items and the state to describe them by: the journal's, with the local
    tracker's items over it and the local forge's revisions (as they are); on GitHub, GitLab,
    Linear or Jira, the engine's last view of them."""
    state = journal_state(root / config.engine.state_dir)
    branch = default_branch(config, root)
    tracker = open_local_tracker(config, root, branch)
    forge = local_forge_revisions(config, root, branch)
    if forge is not None:
        state = state.model_copy(update={"revisions": {r.id: r for r in forge}})
    if tracker is not None:
        try:
            update: dict[str, object] = {
                "work_items": {i.id: i for i in tracker.work_item_reader.list_work_items()}
            }
            if tracker.revision_reader is not None:
                update["revisions"] = {r.id: r for r in tracker.revision_reader.list_revisions()}
        finally:
            tracker.close()
        state = state.model_copy(update=update)
    return dict(state.work_items), state


def _tracker_items(config: CpeConfig, root: Path) -> list[WorkItem] | None:
    tracker = open_local_tracker(config, root, default_branch(config, root))
    if tracker is None:
        return None
    try:
        return list(tracker.work_item_reader.list_work_items())
    finally:
        tracker.close()


def _body(config: CpeConfig, root: Path, item: WorkItem) -> str:
    pages = issue_pages(config)
    if pages is not None:
        return pages.body(item)
    tracker = open_local_tracker(config, root, default_branch(config, root))
    assert tracker is not None  # no issue pages: the tracker is the local one
    try:
        return tracker.work_item_reader.get_work_item_body(item.id)
    finally:
        tracker.close()


# ---------------------------------------------------------------------------- requests


def request(payload: UserRequest, config_path: Path | None, repo: Path | None) -> int:
    """Send ``payload`` to the running engine, or journal it for the next one."""
    # The control socket's module imports the engine: the requests' alone, not the reads'.
    from adapters.host.control import (  # noqa: PLC0415
        PROCESS_TIMEOUT,
        ControlSettings,
        NoEngine,
        accept_offline,
        exchange,
    )

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
                settings = ControlSettings(config.breaker, config.workflow.max_concurrent)
                accepted = accept_offline(payload, settings, state_dir, tracked)
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
    return config.provider.work_items_kind == "local"


def _write_status(config: CpeConfig, root: Path, payload: SetStatus) -> None:
    tracker = open_local_tracker(config, root, default_branch(config, root))
    assert tracker is not None  # _local(config)
    try:
        tracker.work_item_writer.transition_status(payload.work_item_id, payload.to)
    finally:
        tracker.close()


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
    tracker = open_local_tracker(config, root, branch)
    if tracker is None:
        section = config.provider
        kind = section.work_items_kind
        where = section.where(kind)
        return fail(
            f"work add: {section.key_of('work_items')} is {kind!r}; expected 'local' (the "
            f"work items are kept on {NAMES[kind]}: open an issue"
            f"{f' in {where}' if where else ''} there instead)"
        )
    try:
        wid: WorkItemId = tracker.work_item_writer.create_work_item(title, body)
    finally:
        tracker.close()
    from adapters.host.control import poke  # noqa: PLC0415

    # A running engine reads it now, not at its next poll.
    running = poke(root / config.engine.state_dir, ("work_items",))
    print(f"created work item #{wid}" + (" (the running engine has it)" if running else ""))
    return 0
