"""The ``cpe`` command: the composition root.

Subcommands are added as their parts land (the daemon, ``demo``, ``init``, ``status`` …); each
one that exists does what it says.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from domain.models import AGENT_ROLES
from domain.results import output_schema, strict_output_schema
from domain.workflow import render_table


def _version() -> str:
    try:
        return version("control-plane-engine")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "0+unknown"


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

    commands.add_parser("workflow", help="print the work item status table")

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "workflow":
        print(render_table())
        return 0
    if args.command == "schema":
        schema = strict_output_schema(args.role) if args.strict else output_schema(args.role)
        print(json.dumps(schema, indent=2))
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
