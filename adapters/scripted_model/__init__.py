"""The scripted model: a loopback model API that plays scenario files.

The real ``claude`` CLI (``ANTHROPIC_BASE_URL`` pointed here) and ``codex exec``
(``responses_wire.codex_overrides``) run their real tools (Write, Edit, Bash, StructuredOutput
…) in a real directory; only the model's turns are scripted. ``cpe demo`` and the end-to-end
tests use it.

Starting it::

    from adapters.scripted_model import ScriptedModelServer, load_scenario, Match

    book = [
        load_scenario("planner"),  # matches the planner's StructuredOutput schema
        load_scenario("blocked", match=Match(role="implementor", prompt=r"Work Item #2\\b")),
        load_scenario("implement"),
        load_scenario("review"),
    ]
    with ScriptedModelServer(book) as server:  # 127.0.0.1, a free port, served in a thread
        env = {**agent_env, **server.client_env(), "HOME": throwaway_home}
        ...  # run the CLI; then assert on server.requests / server.wait_until(...)

The wire, both sides of it (scenario files, turn selection, matching, templates, what is
recorded, the OpenAI Responses mapping, the faults and what the real CLIs make of them), is
described in docs/scripted-model-wire.md; book files and the commands for people in
docs/scripted-model.md.
"""

from __future__ import annotations

from adapters.scripted_model.faults import ErrorAnswer, Fault
from adapters.scripted_model.handler import RecordedRequest
from adapters.scripted_model.quota import Quota, Window
from adapters.scripted_model.scenario import (
    Conversation,
    HangBlock,
    Match,
    Scenario,
    ScriptError,
    TextBlock,
    ToolBlock,
    load_scenario,
    parse_scenario,
    shipped_scenarios,
)
from adapters.scripted_model.server import ScriptedModelServer
from adapters.scripted_model.wire import ToolResult

__all__ = [
    "ScriptedModelServer",
    "RecordedRequest",
    "ToolResult",
    "Fault",
    "ErrorAnswer",
    "Quota",
    "Window",
    "Scenario",
    "Match",
    "TextBlock",
    "ToolBlock",
    "HangBlock",
    "Conversation",
    "ScriptError",
    "load_scenario",
    "parse_scenario",
    "shipped_scenarios",
]
