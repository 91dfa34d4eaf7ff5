"""The scripted model's book for ``cpe demo``: which scenario plays which agent run.

The scenarios (``scenarios/*.json``, shipped as package data) hold only the turns; the match
rules live here, next to the order they depend on. The server plays the *first* scenario whose
rule holds, so the order matters wherever two rules can both hold.

A rule tells the runs apart by what ``adapters.runtime.prompt.context`` puts in the prompt:

- the role (the ``StructuredOutput`` schema pins it);
- the heading the implementor and reviewer prompts start with, ``## Work Item #<id> — <title>``:
  matched on the *title* the planner scenario gives each item (``ITEM_ONE_TITLE``,
  ``ITEM_TWO_TITLE``), not on the id, so the book does not depend on how a provider numbers
  work items;
- ``### Prior Reviews``: present only once a review was posted on the item's revision (both in
  the implementor's prompt, for its second round, and in the reviewer's, for its second review);
- for the planner, ``### WorkItem #`` under ``## Existing Work Items``: present only when some
  work item exists, i.e. on any planner run after the first.

The order, first match wins:

1. ``plan_nothing_new``: planner, existing work items listed → an empty plan. Before 2, which
   matches every planner run; only reached if the specs are planned again.
2. ``plan``: planner → two items, ``greet`` and ``greet-all`` (blocked by ``greet``).
3. ``implement_greet_fix``: implementor, item one, with ``### Prior Reviews`` → restore the
   revision's files, Edit them to address the review, run the tests, completed. Before 4,
   which matches every implementor run of item one.
4. ``implement_greet``: implementor, item one → Write greet (no stripping, no blank-name check)
   and its test, run the tests, completed. Also what a rerun after a failed pipeline
   (``### CI Status: FAILURE`` without reviews) plays: the same files again.
5. ``implement_greet_all``: implementor, item two → Read greet.py, Edit greet_all in, Write its
   test, run the tests, completed. Its title rule cannot match item one, so its place after 3
   and 4 is only for reading order.
6. ``review_greet_approve``: reviewer, item one, with ``### Prior Reviews`` → approve. Before 7,
   which matches every review of item one.
7. ``review_greet_changes``: reviewer, item one → needs-changes, inline comments on
   ``greetings/greet.py`` (line 5) and ``tests/test_greet.py`` (whole file).
8. ``review_greet_all_approve``: reviewer, item two → approve, whatever round.

Every file path is ``{cwd}/…``: the implementor's worktree, or the repository root for the
planner and the reviewer.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from adapters.scripted_model import Match, Scenario, parse_scenario
from domain.errors import ConfigError

__all__ = ["BOOK_RULES", "ITEM_ONE_TITLE", "ITEM_TWO_TITLE", "demo_book", "load_demo_scenario"]

ITEM_ONE_TITLE = "Greet a person by name"
ITEM_TWO_TITLE = "Greet several people at once"

_PRIOR_REVIEWS = r"^### Prior Reviews$"


def _literal(text: str) -> str:
    """``text`` as a pattern matching itself (spaces left readable in error messages)."""
    return re.escape(text).replace("\\ ", " ")


def _item(title: str) -> str:
    """The first line of an implementor or reviewer prompt for the work item titled ``title``."""
    return rf"(?m)^## Work Item #[\w-]+ — {_literal(title)}$"


def _item_reviewed(title: str) -> str:
    """That first line, and a ``### Prior Reviews`` section after it."""
    return rf"(?ms)^## Work Item #[\w-]+ — {_literal(title)}$.*{_PRIOR_REVIEWS}"


BOOK_RULES: tuple[tuple[str, Match], ...] = (
    ("plan_nothing_new", Match(role="planner", prompt=r"(?m)^### WorkItem #")),
    ("plan", Match(role="planner")),
    ("implement_greet_fix", Match(role="implementor", prompt=_item_reviewed(ITEM_ONE_TITLE))),
    ("implement_greet", Match(role="implementor", prompt=_item(ITEM_ONE_TITLE))),
    ("implement_greet_all", Match(role="implementor", prompt=_item(ITEM_TWO_TITLE))),
    ("review_greet_approve", Match(role="reviewer", prompt=_item_reviewed(ITEM_ONE_TITLE))),
    ("review_greet_changes", Match(role="reviewer", prompt=_item(ITEM_ONE_TITLE))),
    ("review_greet_all_approve", Match(role="reviewer", prompt=_item(ITEM_TWO_TITLE))),
)
"""``(scenario file stem, match rule)`` in book order (see the module docstring)."""


def demo_book() -> list[Scenario]:
    """The demo's scenarios in book order, each with its match rule."""
    return [load_demo_scenario(name, match) for name, match in BOOK_RULES]


def load_demo_scenario(name: str, match: Match | None = None) -> Scenario:
    """``scenarios/<name>.json`` (named ``name``), under ``match`` when one is given.

    Raises ``ConfigError`` (naming the file) when it is missing or malformed.
    """
    source = f"adapters/demo/scenarios/{name}.json"
    resource = resources.files(__package__).joinpath("scenarios", f"{name}.json")
    try:
        data = json.loads(resource.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read demo scenario: {exc}", key_path=source) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc}", key_path=source) from exc
    if isinstance(data, dict):
        data.setdefault("name", name)
        if match is not None:
            data["match"] = match.model_dump()
    return parse_scenario(data, source=source)
