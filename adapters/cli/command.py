"""``cpe``: ``main`` reads the command line (``parser.build_parser``) and hands each subcommand
to its module (``run``, ``status``, ``runs``, ``work`` …), imported when it runs; ``cpe run``'s
stop signals before its engine takes them over."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from adapters.cli.parser import build_parser
from domain.models import STATUSES

# Each command imports what it needs when it runs, not here: an operator types `cpe status`
# all day (docs/benchmarks.md, startup); tests/adapters/cli/test_imports.py holds the commands
# to it.


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
    from domain.errors import JournalError, ProviderError  # noqa: PLC0415

    try:
        return _dispatch(args)
    except JournalError as exc:  # damaged, newer, or the disk refused it: one line, no traceback
        from actors.process import journal_exit  # noqa: PLC0415 - the engine's whole import

        return fail(f"journal error: {exc}", journal_exit(exc))
    except ProviderError as exc:  # the tracker or the forge could not be read to start
        from adapters.cli.run import unavailable  # noqa: PLC0415

        return unavailable(exc)


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
        from adapters.cli.scripted import run_scripted  # noqa: PLC0415

        def bound(
            *,
            agent_env: Mapping[str, str] | None,
            isolated_home: bool,
            codex_overrides: Sequence[str],
            announce: str | None,
        ) -> int:
            return run(
                args.config,
                args.repo,
                new_journal=args.new_journal,
                stop_requested=_early_stop,
                log_format=args.log_format,
                agent_env=agent_env,
                isolated_home=isolated_home,
                codex_overrides=codex_overrides,
                announce=announce,
            )

        return run_scripted(Path(args.scripted) if args.scripted else None, bound)
    if args.command == "init":
        from adapters.cli.init import init  # noqa: PLC0415

        return init(args.repo, args.tracker, args.forge)
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
    if args.command == "tui":
        from adapters.cli.tui import tui  # noqa: PLC0415

        return tui(args.config, args.repo)
    if args.command == "costs":
        from adapters.cli.costs import costs  # noqa: PLC0415

        return costs(args.by, args.since, args.config, args.repo)
    if args.command == "webhooks":
        from adapters.cli.webhooks import webhooks  # noqa: PLC0415

        return webhooks(args.config, args.repo)
    from adapters.cli.replay import replay  # noqa: PLC0415

    return replay(args.until, args.config, args.repo)


def _work(args: argparse.Namespace) -> int:
    from adapters.cli import work  # noqa: PLC0415
    from domain.models import WorkItemId  # noqa: PLC0415
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
        "tui",
        "webhooks",
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
