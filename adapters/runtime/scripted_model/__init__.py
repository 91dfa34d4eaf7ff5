"""The scripted model: a loopback Anthropic Messages API that plays scenario files.

The real ``claude`` CLI (``ANTHROPIC_BASE_URL`` pointed here) runs its real tools (Write, Edit,
Bash, StructuredOutput …) in a real directory; only the model's turns are scripted. ``cpe demo``
and the end-to-end tests use it.

Starting it::

    from adapters.runtime.scripted_model import ScriptedModelServer, load_scenario, Match

    book = [
        load_scenario("planner"),  # matches the planner's StructuredOutput schema
        load_scenario("blocked", match=Match(role="implementor", prompt=r"Work Item #2\\b")),
        load_scenario("implement"),
        load_scenario("review"),
    ]
    with ScriptedModelServer(book) as server:  # 127.0.0.1, a free port, served in a thread
        env = {**agent_env, **server.client_env(), "HOME": throwaway_home}
        ...  # run the CLI; then assert on server.requests / server.wait_until(...)

Scenario files (JSON; shipped ones in ``scenarios/``, loaded by name)::

    {
      "name": "implement",               // optional: defaults to the file's stem
      "description": "what it plays",    // optional
      "match": {"role": "implementor", "system": "regex", "prompt": "regex"},   // all optional
      "turns": [                         // one list of blocks per assistant turn
        [{"text": "I'll add the module."},
         {"tool": "Write", "input": {"file_path": "{cwd}/a.py", "content": "x = 1\\n"}}],
        [{"tool": "Bash", "input": {"command": "python3 -m unittest", "description": "Test"}}],
        [{"tool": "StructuredOutput", "input": {"outcome": "completed", "summary": "done"}}]
      ],
      "after_last": "end",               // or "repeat": replay the last turn forever
      "final_text": "Done."              // the end_turn text sent after the last turn
    }

Blocks: ``{"text": ...}``; ``{"tool": <any tool name>, "input": {...}}`` (a ``tool_use``; the
turn then stops with ``tool_use``, otherwise ``end_turn``); ``{"hang": true}``, last in its
turn: the blocks before it are streamed, then the response is held open with nothing more sent
(nothing at all, not even headers, when it is alone) until the client disconnects or the server
closes — for timeout and cancel tests.

Turn selection is stateless: the turn played is the number of assistant messages already in
the request, so retries, several CLIs at once and concurrent sessions need no server state.
Past the last turn the model answers ``final_text`` (``end_turn``), or repeats the last turn
with ``"after_last": "repeat"`` (``invalid_output`` uses that to exhaust the CLI's retries).

Matching: the server holds a *book* (a list of scenarios) and plays the first whose ``match``
holds; every rule given must hold, an empty match takes anything. ``role`` is the role pinned
by the request's ``StructuredOutput`` schema (``properties.role.const``, as
``domain.results.output_schema`` writes it). ``system`` and ``prompt`` are ``re.search``
patterns over the system prompt (the agent definition's body lands there) and over the first
user message without the CLI's ``<system-reminder>`` blocks (the task prompt). A conversation
no scenario matches gets a 400 ``invalid_request_error`` naming the scenarios tried, and is
recorded with ``error`` set; the CLI ends with an API error result.

Templates: every string in ``text`` and in tool inputs may use ``{cwd}`` — the working directory
the CLI reports ("Primary working directory: …" in its environment text) — and the named
groups of the ``system``/``prompt`` patterns (``"prompt": "Work Item #(?P<item>\\\\d+)"`` gives
``{item}``). ``{{name}}`` is a literal ``{name}``; other braces are left alone, so code and JSON
need no escaping. An unknown placeholder is an error when the file is loaded.

Other requests: ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}`` (a size
estimate); a Messages request without tools is a side request (titles, probes) answered with a
short text; non-streaming requests get the same turn as one JSON message; GET and HEAD (the CLI
probes ``HEAD /api/hello`` unless nonessential traffic is disabled) answer 200. Every request is
recorded (``server.requests``: method, path, kind, status, model, tools, the conversation read
from it, the tool results it carries, the scenario and turn played, what was replied).

The OpenAI Responses side (``codex exec``): the same server and book also answer
``POST /v1/responses`` (wire in ``responses_wire``, items in ``responses_items``), streamed
(``"stream": true``: SSE, see ``responses_wire``) or as one ``response`` object. Point codex
at it with ``responses_wire.codex_overrides(server.base_url)`` (``-c`` values: a ``scripted``
entry in ``model_providers`` with ``base_url`` ``…/v1`` and ``wire_api = "responses"``).
Reading the request:

- turn: the number of runs of consecutive model-made ``input`` items (assistant ``message``,
  ``function_call``, ``custom_tool_call``, ``reasoning``) — codex records a response's items
  together, then their ``*_output`` items — so selection is stateless here too;
- ``system`` rule: ``instructions``; ``prompt`` rule: the first user message, skipping the texts
  codex adds (``<environment_context>``, ``<user_instructions>``, ``# AGENTS.md …``), or
  ``input`` when it is a plain string; ``role``: ``text.format.schema`` (the
  ``--output-schema``), pinned as for ``StructuredOutput``; ``{cwd}``: the
  ``<cwd>…</cwd>`` of the environment context;
- a request without ``tools`` is a side request (answered ``OK.``); tool results recorded are
  the ``function_call_output``/``custom_tool_call_output`` items after the last turn.

Blocks become output items (a response's calls get fresh ``call_id`` s):

- ``{"text": t}`` → a ``message`` with one ``output_text`` part;
- ``StructuredOutput`` → a ``message`` whose text is the input as JSON (codex has no such tool;
  its final message is the output checked against ``--output-schema``), so put it last;
- ``Bash`` → a ``function_call`` of the shell the request offers, by preference
  ``exec_command`` (``{"cmd": c}``), ``shell_command`` (``{"command": c}``), else ``shell``
  (``{"command": ["bash", "-lc", c]}``); ``description`` is dropped;
- ``Write`` → ``apply_patch`` with ``*** Begin Patch`` / ``*** Add File: <path>`` / ``+`` lines
  / ``*** End Patch`` (every line gets a newline); ``Edit`` → ``*** Update File: <path>`` and
  one ``@@`` hunk, ``-`` the lines of ``old_string``, ``+`` those of ``new_string``: it is
  line-wise, so ``old_string`` must be whole lines of the file (``replace_all`` is ignored).
  Paths under ``{cwd}`` are made relative to it (codex wants relative paths). The call is a
  ``custom_tool_call`` (``input``: the patch) unless the request offers ``apply_patch`` as a
  ``function`` tool, then a ``function_call`` with ``{"input": patch}``;
- any other tool → a ``function_call`` of that name with the input as its JSON ``arguments``
  (a codex-only scenario can script ``update_plan``, ``exec_command`` … directly);
- ``{"hang": true}`` → as on the Anthropic side; a streamed response is left without
  ``response.completed``.

``response.completed`` carries ``usage`` (``input_tokens``, ``output_tokens``,
``total_tokens``, their ``*_details``, plus ``cache_write_input_tokens`` and
``reasoning_output_tokens`` as codex reports them). A request no scenario matches, or a block
it cannot map (an ``Edit`` without ``old_string``), gets a 400 OpenAI error body
(``{"error": {"type": "invalid_request_error", "message": …}}``). ``reply`` records
``"text"``, ``"function_call:<name>"``, ``"custom_tool_call:apply_patch"``, ``"hang"``.
"""

from __future__ import annotations

from adapters.runtime.scripted_model.scenario import (
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
from adapters.runtime.scripted_model.server import RecordedRequest, ScriptedModelServer
from adapters.runtime.scripted_model.wire import ToolResult

__all__ = [
    "ScriptedModelServer",
    "RecordedRequest",
    "ToolResult",
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
