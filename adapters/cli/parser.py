"""The ``cpe`` command line: ``build_parser``, each subcommand with its arguments and help.
``adapters.cli.command.main`` parses it and runs the subcommand."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from domain.models import AGENT_ROLES, STATUSES

# adapters/cli/provider_settings.py's kinds (not imported: `cpe --help` stays fast)
PROVIDER_KINDS = ("local", "github", "gitlab", "linear", "jira")

# Each command imports what it needs when it runs, not here: an operator types `cpe status`
# all day (docs/benchmarks.md, startup); tests/adapters/cli/test_imports.py holds the commands
# to it.


def _version() -> str:
    try:
        return version("control-plane-engine")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "0+unknown"


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


def _add_pause(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], where: argparse.ArgumentParser
) -> None:
    pause = commands.add_parser(
        "pause", parents=[where], help="start no agent run until cpe resume (runs go on)"
    )
    pause.add_argument("--reason", default="", help="why, for cpe status and the dashboard")
    commands.add_parser(
        "resume", parents=[where], help="dispatch again (ends the breaker's pause too)"
    )


def _add_tui(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], where: argparse.ArgumentParser
) -> None:
    commands.add_parser(
        "tui",
        parents=[where],
        help="the terminal console: the board, items, runs and actions, live (keys: ?)",
        description="A terminal console on the engine: the work items by status, the runs, "
        "the merge queue, pauses and decisions, live while it runs; an item's detail, a run's "
        "output as it comes; actions (retry, cancel, set status, pause, resume, refresh), each "
        "confirmed first. On a stopped engine: its last state, read-only, until one runs "
        "again. Keys in docs/operations.md; q or Ctrl-C quits.",
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
    init.add_argument(
        "--tracker",
        choices=PROVIDER_KINDS,
        default=None,
        help="where the work items are kept (default: local, or the forge's system)",
    )
    init.add_argument(
        "--forge",
        choices=PROVIDER_KINDS,
        default=None,
        help="where the revisions are kept: github or gitlab, local with a local, linear or "
        "jira tracker (default: the tracker's system; local for linear and jira)",
    )
    status = commands.add_parser(
        "status", parents=[where], help="work items, revisions and agent runs"
    )
    status.add_argument("--watch", action="store_true", help="redraw every second until Ctrl-C")
    _add_runs(commands, where)
    _add_tui(commands, where)
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
    _add_pause(commands, where)
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
    commands.add_parser(
        "webhooks",
        parents=[where],
        help="how to register each provider's webhook: URL, events, secret (docs/webhooks.md)",
    )
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
