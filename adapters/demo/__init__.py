"""The content of ``cpe demo``: a sample repository and the scripted model's book for it.

``create_sample_repo(path)`` makes a small git repository (a ``greetings`` package, a stdlib
``unittest`` suite, a spec of two features where the second needs the first, the agent
definitions, a ``supervisor.toml`` for the demo). ``demo_book()`` is the ordered list of
scenarios the scripted model plays for it: plan → implement #1 → needs-changes → implement #1
again → approve → merge → implement #2 → approve → merge. ``adapters.demo.book`` documents the
rule order.
"""

from __future__ import annotations

from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE, demo_book
from adapters.demo.sample import (
    DEFAULT_BRANCH,
    PIPELINE_COMMAND,
    SPEC_PATH,
    SUPERVISOR_TOML,
    create_sample_repo,
)

__all__ = [
    "create_sample_repo",
    "demo_book",
    "DEFAULT_BRANCH",
    "PIPELINE_COMMAND",
    "SPEC_PATH",
    "SUPERVISOR_TOML",
    "ITEM_ONE_TITLE",
    "ITEM_TWO_TITLE",
]
