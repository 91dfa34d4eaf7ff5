"""The scripted model: a loopback Anthropic Messages API that plays scenario files.

The real ``claude`` CLI (``ANTHROPIC_BASE_URL`` pointed here) runs its real tools (Write, Edit,
Bash, StructuredOutput …) in a real directory; only the model's turns are scripted. ``cpe demo``
and the end-to-end tests use it.

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
  together, then their ``*_output`` items (code mode too: its ``exec`` calls come back as
  ``custom_tool_call`` items, then ``custom_tool_call_output`` s) — so selection is stateless
  here too;
- ``system`` rule: ``instructions``; ``prompt`` rule: the first user message, skipping the texts
  codex adds (``<environment_context>``, ``<user_instructions>``, ``# AGENTS.md …``), or
  ``input`` when it is a plain string; ``role``: ``text.format.schema`` (the
  ``--output-schema``), pinned as for ``StructuredOutput``; ``{cwd}``: the
  ``<cwd>…</cwd>`` of the environment context;
- the offered tools: the top-level ``tools`` plus those of ``additional_tools`` input items
  (where codex's *code mode* puts them), ``namespace`` entries flattened into their tools
  (``responses_wire.offered_tools``); a request offering none is a side request (answered
  ``OK.``); the recorded ``tools`` are these names (``exec``, ``wait`` … in code mode);
- tool results recorded: the ``function_call_output``/``custom_tool_call_output`` items after
  the last turn (an output given as a list of parts is their texts joined; ``is_error`` when
  the output says ``success: false`` or, from code mode's ``exec``, starts ``Script failed``).

What codex 0.169.0 offers depends on the model: with ``-m gpt-5-codex`` (or ``gpt-5``) the
top-level ``exec_command``, ``write_stdin``, ``view_image`` … but no ``apply_patch``; with its
default model, code mode: no top-level ``tools``, an ``additional_tools`` item whose
``functions`` namespace holds the freeform (``custom``) tool ``exec``, which runs JavaScript
with the nested tools on a global ``tools`` object (``tools.exec_command({cmd})``,
``tools.apply_patch(patch)``), and returns its ``text(…)`` output after a ``Script completed``
or ``Script failed`` header. *Code mode* below means: ``exec`` is offered as a custom tool and
no shell function is.

Blocks become output items (a response's calls get fresh ``call_id`` s):

- ``{"text": t}`` → a ``message`` with one ``output_text`` part;
- ``StructuredOutput`` → a ``message`` whose text is the input as JSON (codex has no such tool;
  its final message is the output checked against ``--output-schema``), so put it last;
- ``Bash`` → a ``function_call`` of the shell the request offers, by preference
  ``exec_command`` (``{"cmd": c}``), ``shell_command`` (``{"command": c}``), else ``shell``
  (``{"command": ["bash", "-lc", c]}``); ``description`` is dropped. In code mode: a
  ``custom_tool_call`` ``exec`` whose input is
  ``const r = await tools.exec_command({cmd: <c as a JSON string>}); text(JSON.stringify(r));``
  (the result the model gets back is the JSON of ``output``, ``exit_code`` …);
- ``Write`` → a patch with ``*** Begin Patch`` / ``*** Add File: <path>`` / ``+`` lines
  / ``*** End Patch`` (every line gets a newline); ``Edit`` → ``*** Update File: <path>`` and
  one ``@@`` hunk, ``-`` the lines of ``old_string``, ``+`` those of ``new_string``: it is
  line-wise, so ``old_string`` must be whole lines of the file (``replace_all`` is ignored).
  Paths under ``{cwd}`` are made relative to it (codex wants relative paths). The patch goes
  out as, in this order: a ``function_call`` ``apply_patch`` with ``{"input": patch}`` when
  the request offers ``apply_patch`` as a ``function``; a ``custom_tool_call`` ``apply_patch``
  (``input``: the patch) when it offers it otherwise; in code mode a ``custom_tool_call``
  ``exec`` with ``const r = await tools.apply_patch(<patch as a JSON string>); text(r);``;
  else (no ``apply_patch`` tool, as codex offers a custom provider with ``-m gpt-5-codex``)
  the command ``apply_patch <<'PATCH'`` / the patch / ``PATCH`` through the shell function as
  for ``Bash`` (the delimiter gets a ``_N`` suffix if a patch line equals it): codex
  intercepts that heredoc and applies the patch itself (a ``file_change`` item, no process);
- any other tool → a ``function_call`` of that name with the input as its JSON ``arguments``
  (a codex-only scenario can script ``update_plan``, ``exec_command`` … directly);
- ``{"hang": true}`` → as on the Anthropic side; a streamed response is left without
  ``response.completed``.

``response.completed`` carries ``usage`` (``input_tokens``, ``output_tokens``,
``total_tokens``, their ``*_details``, plus ``cache_write_input_tokens`` and
``reasoning_output_tokens`` as codex reports them). A request no scenario matches, or a block
it cannot map (an ``Edit`` without ``old_string``), gets a 400 OpenAI error body
(``{"error": {"type": "invalid_request_error", "message": …}}``). ``reply`` records
``"text"``, ``"function_call:<name>"``, ``"custom_tool_call:apply_patch"``,
``"custom_tool_call:exec"``, ``"hang"``.
"""

from __future__ import annotations

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
from adapters.scripted_model.server import RecordedRequest, ScriptedModelServer
from adapters.scripted_model.wire import ToolResult

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
