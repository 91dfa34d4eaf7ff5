"""The ``cpe`` command: the composition root.

Subcommands are added as their parts land (the daemon, ``demo``, ``init``, ``status`` …); each
one that exists does what it says.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NoReturn

from domain.models import AGENT_ROLES, STATUSES

# Each command imports what it needs when it runs, not here: an operator types `cpe status`
# all day (docs/benchmarks.md, startup); tests/test_cli_imports.py holds the commands to it.


def _version() -> str:
    try:
        return version("control-plane-engine")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "0+unknown"


def _check_bash(args: argparse.Namespace) -> int:
    from adapters.bash_guard import BashGuardConfig, check_bash_main  # noqa: PLC0415
    from adapters.cli.settings import load_config  # noqa: PLC0415 - keep `cpe --help` fast
    from domain.errors import ConfigError  # noqa: PLC0415

    config = BashGuardConfig()
    if args.config:
        try:
            config = load_config(args.config).bash_guard
        except ConfigError as exc:
            print(f"cpe: configuration error: {exc}", file=sys.stderr)
            return 78
    words = list(args.words)
    return check_bash_main(["--worktree", args.worktree, *words], config=config)


def _engine_command(args: argparse.Namespace) -> int:
    from adapters.cli.common import fail  # noqa: PLC0415
    from domain.errors import JournalError  # noqa: PLC0415

    try:
        return _dispatch(args)
    except JournalError as exc:  # damaged, newer, or the disk refused it: one line, no traceback
        from actors.process import journal_exit  # noqa: PLC0415 - the engine's whole import

        return fail(f"journal error: {exc}", journal_exit(exc))


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        from adapters.cli.run import run  # noqa: PLC0415

        if args.scripted is None:
            return run(
                args.config,
                args.repo,
                new_journal=args.new_journal,
                stop_requested=_early_stop,
                log_format=args.log_format,
            )
        from functools import partial  # noqa: PLC0415

        from adapters.cli.scripted import run_scripted  # noqa: PLC0415

        bound = partial(
            run,
            args.config,
            args.repo,
            new_journal=args.new_journal,
            stop_requested=_early_stop,
            log_format=args.log_format,
        )
        return run_scripted(Path(args.scripted) if args.scripted else None, bound)
    if args.command == "init":
        from adapters.cli.init import init  # noqa: PLC0415

        return init(args.repo)
    if args.command == "status":
        from adapters.cli.status import status  # noqa: PLC0415

        return status(args.config, args.repo, watch=args.watch)
    if args.command == "runs":
        from adapters.cli import runs  # noqa: PLC0415

        if args.runs_command == "list":
            return runs.runs_list(args.config, args.repo, limit=args.limit)
        return runs.runs_show(args.session_id, args.config, args.repo, follow=args.follow)
    if args.command == "work":
        return _work(args)
    if args.command in ("pause", "resume"):
        from adapters.cli.work import request  # noqa: PLC0415
        from domain.requests import Pause, Resume  # noqa: PLC0415

        payload = Pause(reason=args.reason) if args.command == "pause" else Resume()
        return request(payload, args.config, args.repo)
    if args.command == "costs":
        from adapters.cli.costs import costs  # noqa: PLC0415

        return costs(args.by, args.since, args.config, args.repo)
    from adapters.cli.replay import replay  # noqa: PLC0415

    return replay(args.until, args.config, args.repo)


def _work(args: argparse.Namespace) -> int:
    from adapters.cli import work  # noqa: PLC0415
    from domain.models import STATUSES, WorkItemId  # noqa: PLC0415
    from domain.requests import Cancel, Retry, SetStatus  # noqa: PLC0415

    where = (args.config, args.repo)
    if args.work_command == "add":
        body = work.read_body(args.body, args.body_file)
        if body is None:
            return 2
        return work.work_add(args.title, body, *where)
    if args.work_command == "list":
        return work.work_list(args.status, *where)
    if args.work_command == "show":
        return work.work_show(args.item, *where)
    item = WorkItemId(args.item)
    if args.work_command == "retry":
        return work.request(Retry(work_item_id=item), *where)
    if args.work_command == "cancel":
        return work.request(Cancel(work_item_id=item), *where)
    status = next((s for s in STATUSES if s == args.status), None)
    if status is None:
        return work.bad_status(args.status, "STATUS")
    return work.request(SetStatus(work_item_id=item, to=status), *where)


def _add_costs(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], where: argparse.ArgumentParser
) -> None:
    costs = commands.add_parser(
        "costs", parents=[where], help="what the agent runs cost, from the journal"
    )
    costs.add_argument("--by", choices=("item", "role", "runtime", "model", "day"), default="item")
    costs.add_argument("--since", metavar="YYYY-MM-DD", default=None)


def _remote_option(demo: argparse.ArgumentParser) -> None:
    """``cpe demo``'s options after ``--runtime``: --remote, --serve, --listen."""
    demo.add_argument(
        "--remote",
        choices=["ray"],
        default=None,
        help="start a local Ray cluster (a head and a worker node) and run the implementors on "
        "its worker node (needs the cpe[ray] extra; docs/remote.md)",
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="serve the web dashboard while the demo runs, then its finished state until Ctrl-C",
    )
    demo.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help="where --serve listens (default 127.0.0.1:8765, or a free port when that is in "
        "use; port 0: any free one)",
    )


def _add_scripted_model(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], run: argparse.ArgumentParser
) -> None:
    """``cpe scripted-model serve|check`` and ``cpe run --scripted [BOOK]``."""
    run.add_argument(
        "--scripted",
        nargs="?",
        const="",
        default=None,
        metavar="BOOK",
        help="every agent talks to a scripted model playing BOOK (default: the shipped "
        "one-file example), started in this process: no model account, no tokens counted "
        "(docs/scripted-model.md)",
    )
    scripted = commands.add_parser(
        "scripted-model",
        help="a scripted model for the agents: watch the loop on your repository, no account",
    )
    verbs = scripted.add_subparsers(dest="scripted_command", metavar="COMMAND", required=True)
    book = argparse.ArgumentParser(add_help=False)
    book.add_argument(
        "--book",
        type=Path,
        default=None,
        help="the book of scenarios to play (default: the shipped one-file example; format in "
        "docs/scripted-model.md)",
    )
    serve = verbs.add_parser(
        "serve",
        parents=[book],
        help="serve the book until Ctrl-C, printing how to point the CLIs at it",
    )
    serve.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1:0: a free port, printed)",
    )
    verbs.add_parser("check", parents=[book], help="load the book and print what it plays")


def _add_runs(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], where: argparse.ArgumentParser
) -> None:
    runs = commands.add_parser("runs", help="agent runs: list, show")
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    listed = runs_commands.add_parser(
        "list", parents=[where], help="the agent runs, newest first: role, item, status, cost"
    )
    listed.add_argument(
        "--limit", type=int, default=50, metavar="N", help="at most N runs (default 50; 0: all)"
    )
    show = runs_commands.add_parser("show", parents=[where], help="a run's transcript")
    show.add_argument("session_id", metavar="SESSION")
    show.add_argument(
        "--follow",
        action="store_true",
        help="a live run: stream its output as it happens, until it ends",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cpe",
        description=(
            "Control Plane Engine: turns a repository's specs into work items, runs coding "
            "agents on them in isolated git worktrees, and turns their patches into reviewed "
            "revisions."
        ),
    )
    parser.add_argument("--version", action="version", version=f"cpe {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--config", type=Path, help="supervisor.toml (default: REPO/supervisor.toml)"
    )
    where.add_argument(
        "--repo",
        type=Path,
        help="the git repository (default: [repository] path in the config, relative to the "
        "config file; without --config, the current repository)",
    )

    run = commands.add_parser(
        "run",
        parents=[where],
        help="run the engine on a repository until stopped (Ctrl-C or SIGTERM)",
        description="Run the engine on the repository until stopped: plan the specs into work "
        "items, run agents on the ready ones in worktrees of their own, turn their patches into "
        "revisions, review and merge them. Ctrl-C or SIGTERM stops it gracefully (the runs are "
        "cancelled, the journal closed); a second Ctrl-C exits at once; SIGHUP reloads "
        "supervisor.toml. On a terminal it says each decision in a line and logs everything to "
        "<state>/cpe.log.",
    )
    run.add_argument(
        "--new-journal",
        action="store_true",
        help="set the journal aside (renamed .old-<time>) and start a new one: the specs are "
        "planned again and attempts start from zero",
    )
    run.add_argument(
        "--log-format",
        choices=["auto", "human", "json", "console"],
        default=None,
        help="human: one line per engine decision (the default on a terminal); json: JSON "
        "lines (the default otherwise: files, journald); console: key=value lines "
        "(default: [logging] format)",
    )
    init = commands.add_parser(
        "init", help="prepare a repository: supervisor.toml, .claude/ agents, .gitignore"
    )
    init.add_argument(
        "--repo", type=Path, default=Path("."), help="the git repository (default: this one)"
    )
    status = commands.add_parser(
        "status", parents=[where], help="work items, revisions and agent runs"
    )
    status.add_argument("--watch", action="store_true", help="redraw every second until Ctrl-C")
    _add_runs(commands, where)
    work = commands.add_parser(
        "work", help="work items: list, show, add, retry, cancel, set-status"
    )
    work_commands = work.add_subparsers(dest="work_command", metavar="COMMAND", required=True)
    add = work_commands.add_parser("add", parents=[where], help="add a work item (local provider)")
    add.add_argument("title", help="what to do, in a few words (not empty)")
    body = add.add_mutually_exclusive_group()
    body.add_argument("--body", default="", help="the details (markdown)")
    body.add_argument(
        "--body-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="read the details from FILE ('-': standard input)",
    )
    listing = work_commands.add_parser(
        "list", parents=[where], help="work items with status, attempts, revision and cost"
    )
    listing.add_argument("--status", metavar="STATUS", help="only items in STATUS")
    show = work_commands.add_parser(
        "show",
        parents=[where],
        help="an item's body, status history, runs with cost, revision, reviews, last failure",
    )
    show.add_argument("item", metavar="N")
    for name, text in (
        (
            "retry",
            "run the implementor on N now (out of blocked or needs-refinement; "
            "its attempts start again)",
        ),
        ("cancel", "cancel N's running agent; N goes to blocked"),
    ):
        work_commands.add_parser(name, parents=[where], help=text).add_argument("item", metavar="N")
    set_status = work_commands.add_parser(
        "set-status", parents=[where], help="set N's status (any status; a person's call)"
    )
    set_status.add_argument("item", metavar="N")
    set_status.add_argument("status", metavar="STATUS", help=" | ".join(STATUSES))
    pause = commands.add_parser(
        "pause", parents=[where], help="start no agent run until cpe resume (runs go on)"
    )
    pause.add_argument("--reason", default="", help="why, for cpe status and the dashboard")
    commands.add_parser(
        "resume", parents=[where], help="dispatch again (ends the breaker's pause too)"
    )
    _add_costs(commands, where)
    replay = commands.add_parser(
        "replay", parents=[where], help="the engine state rebuilt from the journal"
    )
    replay.add_argument("--until", type=int, default=None, help="the last event sequence number")
    demo = commands.add_parser(
        "demo",
        help="run the whole loop offline on a sample repository (the scripted model stands in "
        "for the LLM)",
    )
    demo.add_argument(
        "--dir", type=Path, default=None, help="where to create it (default: a temp dir)"
    )
    demo.add_argument(
        "--runtime",
        action="append",
        default=[],
        metavar="ROLE=KIND",
        type=_role_runtime,
        help="run ROLE (planner, implementor, reviewer) on KIND (claude-sdk, claude-cli, "
        "codex-cli: the codex CLI from PATH); repeatable",
    )
    _remote_option(demo)
    commands.add_parser("workflow", help="print the work item status table")
    _add_scripted_model(commands, run)

    check = commands.add_parser(
        "check-bash",
        help="would the agents' Bash guard allow COMMAND? exit 0 allowed, 1 denied",
        description="Checks a command as the agents' PreToolUse Bash hook would. "
        "Example: cpe check-bash -- 'git push origin main'",
    )
    check.add_argument("--worktree", default=".", help="the agent's working directory")
    check.add_argument(
        "--config", default=None, help="supervisor.toml whose [bash_guard] section applies"
    )
    check.add_argument("words", nargs=argparse.REMAINDER, metavar="-- COMMAND")

    schema = commands.add_parser(
        "schema", help="print the JSON Schema an agent of ROLE must return"
    )
    schema.add_argument("role", choices=AGENT_ROLES)
    schema.add_argument(
        "--strict",
        action="store_true",
        help="the strict form (closed objects, every property required) for strict runtimes",
    )
    return parser


def _role_runtime(text: str) -> tuple[str, str]:
    from adapters.runtime.settings import RUNTIME_KINDS  # noqa: PLC0415 - keep `cpe --help` fast

    role, equals, kind = text.partition("=")
    if not equals or role not in AGENT_ROLES or kind not in RUNTIME_KINDS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected ROLE=KIND, ROLE one of {', '.join(AGENT_ROLES)}, "
            f"KIND one of {', '.join(RUNTIME_KINDS)}"
        )
    return role, kind


_early_stop = threading.Event()


def _catch_stop_signals_early() -> None:
    """Remember a SIGTERM or SIGINT that comes before ``run_engine`` installs its handlers
    (while the rest of cpe imports, the configuration loads, the engine is built): it then
    stops cleanly, exit 0, instead of dying of the signal."""

    def remember(signum: int, frame: object) -> None:
        _early_stop.set()

    signal.signal(signal.SIGTERM, remember)
    signal.signal(signal.SIGINT, remember)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a reload before the start: nothing to do


def _exit_now(code: int) -> NoReturn:
    """End ``cpe run`` with ``code`` now that its engine has stopped. Python's finalization
    would first put the default signal handlers back, and a SIGINT arriving then (a second
    Ctrl-C just after the stop finished) would end the process by the signal (-2) instead of
    130; the engine, its journal and its logs are closed and flushed by now."""
    import contextlib  # noqa: PLC0415
    import logging  # noqa: PLC0415
    import os  # noqa: PLC0415

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before a command took it over (while Python imports): no traceback; the
        # shell's code for an interrupt. `cpe run` and `--watch` handle their own.
        return 130
    except BrokenPipeError:
        # The reader went away (`cpe status | head`): end quietly, as `git log | head` does.
        # Python would report the failed flush of stdout at exit: point it at /dev/null.
        import os  # noqa: PLC0415

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "check-bash":
        return _check_bash(args)
    if args.command == "demo":
        from adapters.cli.demo import demo  # noqa: PLC0415

        serve = None
        if args.serve:
            from pydantic import ValidationError  # noqa: PLC0415

            from adapters.cli.settings import DashboardSection  # noqa: PLC0415

            serve = args.listen or DashboardSection().listen
            try:
                DashboardSection(listen=serve)
            except ValidationError:
                print(
                    f"cpe: --listen: {serve!r} is not HOST:PORT; expected e.g. 127.0.0.1:8765",
                    file=sys.stderr,
                )
                return 2
        return demo(
            args.dir,
            roles=dict(args.runtime),
            serve=serve,
            remote=args.remote,
            serve_fallback=args.listen is None,
        )
    if args.command == "run" and argv is None:  # the process itself: see _exit_now
        _catch_stop_signals_early()
        _exit_now(_engine_command(args))
    if args.command in (
        "run",
        "init",
        "status",
        "runs",
        "work",
        "pause",
        "resume",
        "replay",
        "costs",
    ):
        return _engine_command(args)
    if args.command == "workflow":
        from domain.workflow import render_table  # noqa: PLC0415

        print(render_table())
        return 0
    if args.command == "scripted-model":
        from adapters.cli import scripted  # noqa: PLC0415

        if args.scripted_command == "check":
            return scripted.check(args.book)
        return scripted.serve(args.book, args.listen)
    if args.command == "schema":
        from domain.results import output_schema, strict_output_schema  # noqa: PLC0415

        schema = strict_output_schema(args.role) if args.strict else output_schema(args.role)
        print(json.dumps(schema, indent=2))
        return 0
    parser.print_help()
    return 0
