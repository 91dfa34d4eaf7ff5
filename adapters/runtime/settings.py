"""The runtimes' settings: one model per runtime kind, a union discriminated on ``kind``.

``RuntimeSettings``: ``ClaudeSdkRuntime`` (claude-sdk) and ``ClaudeCliRuntime`` (claude-cli) in
adapters/runtime/claude/settings.py, ``CodexCliRuntime`` (codex-cli) in
adapters/runtime/codex/settings.py, each beside its runtime. Each says what cannot work before
anything starts (``check()``), which CLI it runs (``cli()``, for the version check) and builds
its runtime adapter (``build()``) with a ``RuntimeContext`` (adapters/runtime/common.py),
importing that runtime only then: a configuration of one vendor's runtimes imports nothing of
another's. In ``supervisor.toml`` ``[runtime.roles]`` names a kind per role and
``[runtime.claude_cli]``, ``[runtime.codex_cli]`` hold those kinds' settings without a ``kind``
key (``kind`` is each model's default; claude-sdk has no section). A new agent CLI is one more
variant here.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from adapters.runtime.claude.settings import ClaudeCliRuntime, ClaudeSdkRuntime
from adapters.runtime.codex.settings import CodexCliRuntime

RuntimeKind = Literal["claude-sdk", "claude-cli", "codex-cli"]
RUNTIME_KINDS: tuple[RuntimeKind, ...] = get_args(RuntimeKind)

RuntimeSettings = Annotated[
    ClaudeSdkRuntime | ClaudeCliRuntime | CodexCliRuntime, Field(discriminator="kind")
]
