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

For people: ``cpe scripted-model serve|check`` and ``cpe run --scripted`` play a *book file*
(``book.load_book``: a list of scenarios in one JSON file; ``books/one_file.json`` is the
shipped example) with ``report_usage=False`` (answers report no tokens, so runs cost $0);
docs/scripted-model.md documents both.

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

Bad days (``faults``): the server can answer as the vendors' APIs do when things go wrong, so
that outages, overload, rate limits and subscription limits are tested with the real CLIs::

    server.fail(Fault.overloaded())  # every model request: 529 / 503
    server.fail(Fault.rate_limited(retry_after=2, times=1))  # one 429, then heals itself
    server.fail(Fault.usage_limit(resets_at, "five_hour"))  # a spent subscription window
    server.heal()  # answer from the book again
    server.refuse_connections()  # a dead address: ECONNREFUSED
    server.accept_connections()  # listening again, same port and base_url
    server.set_quota(Quota.used(five_hour=0.42, seven_day=0.3))  # headroom on good answers
    server.set_quota(None)

- ``fail(fault)``: every model request (``POST /v1/messages``, ``/v1/messages/count_tokens``,
  ``/v1/responses``; probes and unknown routes answer as usual) gets the fault's answer for its
  wire: ``ErrorAnswer`` status, headers, and the wire's own error body (Anthropic
  ``{"type": "error", "error": {"type", "message"}, "request_id"}``, OpenAI
  ``{"error": {"message", "type", "param", "code", …}}``). ``times=N``: the next N model
  requests, then the fault heals itself (``server.fault`` is None again); None: until
  ``heal()``. A new ``fail`` replaces the fault. Each faulted request is recorded with its
  usual ``kind``, the fault's ``status``, its message as ``error`` and the ``fault``.
- The faults (Anthropic | OpenAI): ``overloaded()`` 529 ``overloaded_error`` | 503
  ``service_unavailable_error``/``server_is_overloaded``; ``server_error(status=500)`` (any
  5xx) ``api_error`` | ``server_error``; ``unauthorized()`` 401 ``authentication_error`` | 401
  ``invalid_api_key``; ``rate_limited(retry_after=2)`` 429 ``rate_limit_error`` | 429
  ``rate_limit_exceeded``, both with ``retry-after`` (and ``anthropic-ratelimit-requests-*`` |
  ``x-ratelimit-*-requests``); ``usage_limit(resets_at, window="five_hour"|"seven_day",
  quota=None, plan_type="plus")`` 429 ``rate_limit_error`` with the unified headers saying
  ``rejected`` (``-representative-claim: <window>``, ``-reset``, per window ``-5h-``/``-7d-``
  ``status``/``utilization``/``reset``) and ``retry-after`` the seconds left | 429
  ``usage_limit_reached`` with ``plan_type``, ``resets_at``, ``resets_in_seconds`` and the
  ``x-codex-*`` headers of a ChatGPT plan (``quota`` adds the other window's reading);
  ``out_of_credits()`` 400 ``invalid_request_error`` "credit balance is too low" | 429
  ``insufficient_quota``. Seconds-left values are counted when the answer is sent.
- ``refuse_connections()`` closes the listening socket (connecting is refused, as at a dead
  address) and hangs up every open connection, idle keep-alive ones and held responses too;
  ``accept_connections()`` listens on the same port again (``base_url`` unchanged) and serves
  if the server was started. ``close()`` works in either state; ``listening`` tells which.
- ``set_quota(Quota(five_hour=Window(used, resets_at), seven_day=…, warn_at=0.75))`` (or
  ``Quota.used(0.42, 0.3)``: windows resetting 5 h / 7 d from now) puts the headroom on every
  200 of a model route: Anthropic ``anthropic-ratelimit-unified-status`` (``allowed``, or
  ``allowed_warning`` once a window's ``used`` reaches ``warn_at``, which that window then
  reports as ``-surpassed-threshold``), ``-reset`` and ``-representative-claim`` of the window
  nearest its limit, per window ``-5h-``/``-7d-`` ``status``, ``utilization`` (0..1) and
  ``reset`` (epoch s); codex ``x-codex-primary-*`` (five-hour) / ``x-codex-secondary-*``
  (weekly): ``used-percent``, ``window-minutes``, ``reset-at``, ``reset-after-seconds``.

What the real CLIs make of them (observed: claude 2.1.332 ``-p --output-format stream-json
--verbose``, codex 0.169.0 ``exec --json``; ``tests/adapters/scripted_model/test_faults.py``
runs both on ``usage_limit``):

- claude retries 529, 5xx, 401, 429 and a refused connection (``CLAUDE_CODE_MAX_RETRIES``,
  default 10), one ``{"type": "system", "subtype": "api_retry", "attempt": N,
  "error_status": 529|500|401|429|null, "error": "overloaded"|"server_error"|
  "authentication_failed"|"rate_limit"|"unknown"}`` line each, honouring ``retry-after``
  (a large one, such as a spent window's: no retry at all); then it ends, exit 1, with a
  ``<synthetic>`` assistant message and a ``result`` with ``is_error: true``,
  ``api_error_status`` and ``api_error_type``. A connection refused shows as
  ``error_status: null``, ``"error": "unknown"``, result ``API Error: Connection refused…``;
  a port that listens again before the retries are spent completes the run.
- claude on a subscription (``CLAUDE_CODE_OAUTH_TOKEN`` instead of ``ANTHROPIC_API_KEY``)
  runs against this server offline (only ``POST /v1/messages``, sent with
  ``Authorization: Bearer``). It prints ``{"type": "rate_limit_event", "rate_limit_info":
  {"status", "resetsAt", "rateLimitType", "utilization", "isUsingOverage",
  "surpassedThreshold", "unifiedWindows": {"five_hour": {"utilization", "resetsAt",
  "status"}, "seven_day": …}}}`` after a turn whose unified headers changed (its own
  thresholds may turn an ``allowed`` into ``allowed_warning``). On ``usage_limit`` it makes one
  request, no retry: a ``rate_limit_event`` with ``status: "rejected"``, then the assistant
  message and result ``You've hit your 5-hour limit · resets 7:36am (UTC)`` (``weekly limit ·
  resets Dec 2, 7:36am``), ``api_error: "usage_limit_reached"``, ``api_error_status: 429``,
  exit 1. What makes a 429 a usage limit is ``anthropic-ratelimit-unified-representative-claim``;
  with an API key the same answer is a plain ``API Error: Request rejected (429) · …``.
- codex retries a 5xx inside each of its 5 reconnects (30 requests for a 500) and prints
  ``{"type": "error", "message": "Reconnecting... N/5 (…)"}`` per reconnect, then
  ``{"type": "turn.failed", "error": {"message": …}}``, exit 1: 500 "We're currently
  experiencing high demand…", a 503 without ``server_is_overloaded`` or 401 ``unexpected
  status …``, 429 ``exceeded retry limit, last status: 429 Too Many Requests`` (``retry-after``
  unread). ``overloaded`` (``server_is_overloaded``) fails the turn after 5 requests with
  "Selected model is at capacity. Please try a different model."; ``usage_limit`` at once
  (one request) with "You've hit your usage limit. Upgrade to Pro …, or try again at 7:43
  AM."; ``out_of_credits`` with "Quota exceeded. Check your plan and billing details.".
  A refused port is never given up on: "Reconnecting... waiting for network (Connection
  failed: error sending request)" at growing intervals until the port listens again.
- codex reports the ``x-codex-*`` headroom only in its session log (``CODEX_HOME/sessions/…/
  rollout-*.jsonl``): ``token_count`` events carry ``rate_limits`` (``primary``/``secondary``:
  ``used_percent``, ``window_minutes``, ``resets_at``); ``exec --json`` prints none.
"""

from __future__ import annotations

from adapters.scripted_model.faults import ErrorAnswer, Fault, Quota, Window
from adapters.scripted_model.handler import RecordedRequest
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
