"""What ``create_engine`` checks and wires, apart from the ``Engine`` that runs it: the
provider's ports, the runtime adapters the injected factory gives (one for every role), the
merge queue's landable writer, the executor with its wake-up timer, the pollers for what the
provider can read (polled at once when a reader says it changed, or after a write that changes
what they read; what a failed write was about reported again at their next cycle), and the
actor tree's permanent children."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pykka
import structlog

from actors.config import EngineConfig
from actors.executor import CommandExecutor, ExecutorActor, SpawnSession
from actors.journal import Journal
from actors.loop import EngineActor, EngineLoop
from actors.pollers import (
    BASELINE,
    IGNORED,
    REVISIONS,
    SPECS,
    WORK_ITEMS,
    Enqueue,
    Poller,
    PollerActor,
    Watch,
    make_poller,
    read_baseline,
)
from actors.queue import Inbox, QueueActor
from actors.session_registry import SessionManager
from actors.supervisor import ChildSpec, Supervisor
from domain.commands import EngineCommand
from domain.errors import ConfigError
from domain.events import CommandFailed, DispatchDue, EngineEvent
from domain.handlers.options import HandlerOptions
from domain.models import AGENT_ROLES, AgentRole, EngineState
from domain.policy import DEFAULT_POLICY
from domain.ports import (
    BaselineReader,
    ChangeNotifier,
    IgnoredItemsReader,
    ProviderInterfaces,
    RevisionLander,
    RevisionProviderReader,
    RevisionProviderWriter,
    RuntimeAdapter,
    SpecProviderReader,
    WorkProviderReader,
    WorkProviderWriter,
)
from domain.selectors import revision_for

log = structlog.get_logger("cpe.engine")

_PORTS: Mapping[str, type] = {
    "work_item_reader": WorkProviderReader,
    "work_item_writer": WorkProviderWriter,
    "revision_reader": RevisionProviderReader,
    "revision_writer": RevisionProviderWriter,
    "spec_reader": SpecProviderReader,
}

# What each provider write changes that a poller reads (a transition the engine records itself;
# a review is in the write's own result): polled right after the write, not at the interval.
WRITES_SEEN_BY: dict[str, tuple[str, ...]] = {
    "ApplyPlan": (WORK_ITEMS.name,),
    "CreateRevision": (REVISIONS.name,),
    "UpdateRevision": (REVISIONS.name,),
    "UpdateBranch": (REVISIONS.name,),
    "MergeRevision": (REVISIONS.name, WORK_ITEMS.name, BASELINE.name),
}


def validate_provider(provider: object) -> ProviderInterfaces:
    if provider is None:
        raise ConfigError("provider: missing", expected=f"the interfaces {', '.join(_PORTS)}")
    found: dict[str, Any] = {}
    for name, port in _PORTS.items():
        if isinstance(provider, Mapping):
            value = provider.get(name)
        else:
            value = getattr(provider, name, None)
        if value is None:
            raise ConfigError(f"provider.{name}: missing", expected=f"a {port.__name__}")
        if not isinstance(value, port):
            raise ConfigError(
                f"provider.{name}: {type(value).__name__} does not implement {port.__name__}"
            )
        found[name] = value
    return ProviderInterfaces(**found)


def landable(options: HandlerOptions, provider: ProviderInterfaces) -> HandlerOptions:
    """The merge queue needs a writer that can land (``RevisionLander``); a seed writer's
    approved revisions are merged as they are."""
    if (
        options.auto_merge
        and options.merge_queue
        and not isinstance(provider.revision_writer, RevisionLander)
    ):
        log.warning(
            "the revision writer cannot land through the merge queue; approved revisions are "
            "merged as they are",
            writer=type(provider.revision_writer).__name__,
        )
        return options.model_copy(update={"merge_queue": False})
    return options


def checked_runtime_adapters(adapters: object) -> dict[AgentRole, RuntimeAdapter]:
    """What the runtime adapter factory returned, checked: a ``RuntimeAdapter`` for each role."""
    if not isinstance(adapters, Mapping):
        raise ConfigError(
            f"create_runtime_adapters returned {type(adapters).__name__}",
            expected="a mapping {role: RuntimeAdapter}",
        )
    for role in AGENT_ROLES:
        adapter = adapters.get(role)
        if adapter is None:
            raise ConfigError(
                f"create_runtime_adapters: no adapter for the {role} role",
                expected="a RuntimeAdapter for planner, implementor and reviewer",
            )
        if not isinstance(adapter, RuntimeAdapter):
            raise ConfigError(
                f"create_runtime_adapters: the {role} adapter "
                f"({type(adapter).__name__}) does not implement RuntimeAdapter"
            )
    return dict(adapters)


def make_pollers(
    config: EngineConfig,
    provider: ProviderInterfaces,
    *,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
) -> tuple[Poller[Any], ...]:
    """One poller per thing the provider reads: work items, revisions, specs, and where the
    provider can say them, the default branch's pipeline and the items it ignores."""
    items, revisions, specs = (
        provider.work_item_reader,
        provider.revision_reader,
        provider.spec_reader,
    )
    watched: list[tuple[Watch[Any], object, Callable[[], Sequence[Any]], float]] = [
        (WORK_ITEMS, items, items.list_work_items, config.work_item_poller.poll_interval),
        (REVISIONS, revisions, revisions.list_revisions, config.revision_poller.poll_interval),
        (SPECS, specs, specs.list_specs, config.spec_poller.poll_interval),
    ]
    if isinstance(revisions, BaselineReader):
        interval = config.revision_poller.poll_interval
        watched.append((BASELINE, revisions, read_baseline(revisions), interval))
    if isinstance(items, IgnoredItemsReader):
        interval = config.work_item_poller.poll_interval
        watched.append((IGNORED, items, items.ignored_work_items, interval))
    return tuple(
        make_poller(watch, reader, read, get_state=get_state, enqueue=enqueue, interval=interval)
        for watch, reader, read, interval in watched
    )


def make_executor(
    config: EngineConfig,
    provider: ProviderInterfaces,
    *,
    journal: Journal,
    inbox: Inbox,
    sessions: SessionManager,
    spawn_session: SpawnSession,
    wake_at: Callable[[datetime], None],
    written: Callable[[EngineCommand], None],
) -> CommandExecutor:
    """The executor, with the provider's writers and the config's admission settings."""
    return CommandExecutor(
        work_item_writer=provider.work_item_writer,
        revision_writer=provider.revision_writer,
        policy=config.policy or DEFAULT_POLICY,
        journal=journal,
        inbox=inbox,
        sessions=sessions,
        spawn_session=spawn_session,
        max_concurrent=config.handlers.max_concurrent,
        retry=config.write_retry,
        breaker=config.breaker,
        wake_at=wake_at,
        retry_backoff=(
            config.handlers.retry_backoff_initial,
            config.handlers.retry_backoff_max,
        ),
        daily_budget=config.daily_budget,
        quota=config.quota,
        accounts=config.accounts,
        written=written,
    )


def dispatch_due_at(inbox: Inbox, when: datetime) -> None:
    """Queue a ``DispatchDue`` at ``when`` (the end of a pause of dispatch): the executor's
    ``wake_at``."""
    delay = max(0.0, (when - datetime.now(UTC)).total_seconds())

    def due() -> None:
        if not inbox.closed:
            inbox.put(DispatchDue(at=datetime.now(UTC)), internal=True)

    timer = threading.Timer(delay, due)
    timer.daemon = True  # a stop does not wait for it; a restart recomputes the pause
    timer.name = "cpe-dispatch-due"
    timer.start()


def recheck_failed_writes(
    pollers: Sequence[Poller[Any]],
) -> Callable[[EngineEvent, EngineState, EngineState], None]:
    """An engine watcher: a write that failed past its retries (``CommandFailed``: a status,
    a branch update or a merge while the provider was unreachable) has its work item and its
    revision reported by the next poll cycle that reads the provider, changed or not, so what
    the write was for is decided (and made) again then, as a restart would. Nothing else asks
    again: the provider shows no change."""
    by_name = {poller.name: poller for poller in pollers}

    def watcher(event: EngineEvent, before: EngineState, after: EngineState) -> None:
        if not isinstance(event, CommandFailed):
            return
        wid = getattr(event.command, "work_item_id", None)
        rid = getattr(event.command, "revision_id", None)
        item = after.work_items.get(wid) if wid is not None else None
        if rid is None and item is not None and (revision := revision_for(after, item)):
            rid = revision.id
        if item is not None and WORK_ITEMS.name in by_name:
            by_name[WORK_ITEMS.name].recheck([item.id])
        if rid is not None and REVISIONS.name in by_name:
            by_name[REVISIONS.name].recheck([rid])

    return watcher


def listen_for_changes(
    pollers: Sequence[Poller[Any]], refresh: Callable[[tuple[str, ...]], None]
) -> None:
    """A reader that says when what it reads changed on its own (``ChangeNotifier``: the
    local pipeline finished) has its pollers polled at once."""
    by_reader: dict[int, tuple[object, list[str]]] = {}
    for poller in pollers:
        if isinstance(poller.reader, ChangeNotifier):
            by_reader.setdefault(id(poller.reader), (poller.reader, []))[1].append(poller.name)
    for reader, names in by_reader.values():
        assert isinstance(reader, ChangeNotifier)
        reader.on_change(functools.partial(refresh, tuple(names)))


def child_specs(
    tree: Supervisor,
    inbox: Inbox,
    executor: CommandExecutor,
    loop: EngineLoop,
    pollers: Sequence[Poller[Any]],
) -> list[ChildSpec]:
    """The actor tree's permanent children, in start order: the event queue, the executor,
    the engine loop, a poller actor per poller."""
    specs = [
        ChildSpec(
            "event_queue",
            lambda g, r: QueueActor.start(
                inbox,
                lambda: tree.ref("engine"),
                child_id="event_queue",
                generation=g,
                report=r,
            ),
        ),
        ChildSpec(
            "executor",
            lambda g, r: ExecutorActor.start(executor, child_id="executor", generation=g, report=r),
        ),
        ChildSpec(
            "engine",
            lambda g, r: EngineActor.start(loop, child_id="engine", generation=g, report=r),
        ),
    ]
    specs += [ChildSpec(f"poller:{p.name}", _poller_starter(p)) for p in pollers]
    return specs


def _poller_starter(poller: Poller[Any]) -> Any:
    child_id = f"poller:{poller.name}"

    def start(generation: int, report: Any) -> pykka.ActorRef[Any]:
        return PollerActor.start(poller, child_id=child_id, generation=generation, report=report)

    return start
