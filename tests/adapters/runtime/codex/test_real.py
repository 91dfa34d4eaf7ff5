"""The ``codex-cli`` runner driving the REAL ``codex`` 0.169.0 (``npm ci --prefix tests/tools``)
in a real git repository, offline, against the scripted model (only the model is scripted:
codex applies the patches and runs the commands itself). Whatever the end of a run, no process
of its group survives.

codex picks its tools by model: ``gpt-5-codex`` is offered ``exec_command`` (Write/Edit go
through it as ``apply_patch`` heredocs); the default model runs in code mode (one JavaScript
``exec`` tool). Both are played here.

Every test runs codex twice where bubblewrap is installed (always in CI): with ``bwrap`` on its
PATH, and with a PATH that hides it; codex's sandbox then runs on the system bubblewrap or on
the one codex bundles, and each broke in its own way (``tests/real_clis.py``). The runs get an
isolated ``CODEX_HOME`` as the demo's do, and leave none behind.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from adapters.runtime.cli.jsonl import CliOutcome
from adapters.runtime.cli.process import group_members
from adapters.runtime.cli.request import RunRequest
from adapters.runtime.codex.runner import CodexCliRun, CodexCliRunner, SandboxMode
from adapters.runtime.pricing import DEFAULT_PRICES, token_cost
from adapters.scripted_model import (
    Match,
    ScriptedModelServer,
    load_scenario,
    parse_scenario,
)
from adapters.scripted_model.responses_wire import codex_overrides
from domain.models import AgentRole
from domain.results import output_schema, validate_output
from tests.real_clis import (
    WITH_BWRAP,
    bwrap_needs_codex_helper_alias,
    bwrap_variants,
    codex_path,
    real_codex,
)
from tests.support.git import make_repo

WAIT = 90.0  # seconds; a scripted codex run takes one to three here
IMPLEMENT = load_scenario("implement")
GREETING = (
    'def greet(name: str) -> str:\n    """A greeting for name."""\n'
    '    return "Hello, " + name + "!"\n'
)


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    book = [
        load_scenario("hang", match=Match(role="implementor", prompt=r"Work Item #8\b")),
        IMPLEMENT,  # any other implementor
    ]
    with ScriptedModelServer(book) as s:
        yield s


@dataclass(frozen=True)
class Codex:
    """The real codex as a test runs it: ``bwrap`` on its PATH or hidden (``with-bwrap``,
    ``without-bwrap``), an isolated HOME, its isolated homes made in ``homes``."""

    tmp_path: Path
    bwrap: str
    homes: Path

    def env(self) -> dict[str, str]:
        """HOME; PATH with the system and node (codex is a node script); no API key: the
        scripted provider entry names none."""
        home = self.tmp_path / "home"
        home.mkdir(parents=True, exist_ok=True)
        node = shutil.which("node")
        assert node is not None, "the real codex needs node on PATH"
        path = ":".join(dict.fromkeys(["/usr/bin", "/bin", str(Path(node).parent)]))
        return {"HOME": str(home), "PATH": codex_path(self.bwrap, path, self.tmp_path)}

    def runner(
        self, server: ScriptedModelServer, sandbox: SandboxMode = "workspace-write", **kw: Any
    ) -> CodexCliRunner:
        return CodexCliRunner(
            self.tmp_path / "state",
            cli_path=str(real_codex()),
            kill_grace=2,
            models=("gpt-5-codex",),
            overrides=codex_overrides(server.base_url),
            sandbox=sandbox,
            **{"isolated_home": True, "home_roots": [self.homes], **kw},
        )

    def request(
        self, worktree: Path, prompt: str, *, role: AgentRole = "implementor", **kw: Any
    ) -> RunRequest:
        return RunRequest(
            run_id=kw.pop("run_id", "run-1"),
            worktree_path=worktree,
            prompt=prompt,
            env=kw.pop("env", None) or self.env(),
            output_schema=output_schema(role),
            wall_timeout=WAIT,
            **kw,
        )


@pytest.fixture(params=bwrap_variants())
def codex(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Codex]:
    """Each test once per way codex finds bubblewrap. The homes' directory is outside the
    temporary directory, as codex wants; each run must have removed its home by the end."""
    homes = Path(tempfile.mkdtemp(prefix="cpe-codex-homes-", dir="/var/tmp"))
    try:
        yield Codex(tmp_path, str(request.param), homes)
        assert list(homes.iterdir()) == [], "a codex home was left behind"
    finally:
        shutil.rmtree(homes, ignore_errors=True)


def finish(handle: CodexCliRun) -> CliOutcome:
    """Wait for the run; then assert that no process of its group is left."""
    outcome = handle.wait(timeout=WAIT + 30)
    pid = handle.process.pid
    assert not group_members(pid)
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    return outcome


def transcript(outcome: CliOutcome) -> list[dict[str, Any]]:
    path = outcome.artifacts.path("runner_transcript")
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines()]


def completed_items(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e.get("item", {}).get("type") == kind
    ]


@pytest.mark.spec("S003-10")
@pytest.mark.spec("S004-10")
@pytest.mark.spec("S004-11")
@pytest.mark.parametrize(
    "case",
    [
        ("gpt-5-codex", "workspace-write", "function_call:exec_command"),
        (None, "workspace-write", "custom_tool_call:exec"),  # code mode
        ("gpt-5-codex", "danger-full-access", "function_call:exec_command"),
    ],
    ids=["gpt-5-codex", "default-model-code-mode", "full-access"],
)
def test_the_real_codex_plays_an_implementor_scenario_to_completion(
    worktree: Path,
    server: ScriptedModelServer,
    codex: Codex,
    case: tuple[str | None, SandboxMode, str],
) -> None:
    model, sandbox, call = case  # call: how the scripted model sends Bash, Write and Edit
    req = codex.request(worktree, "Implement Work Item #1: add greet(name).", model=model)
    outcome = finish(codex.runner(server, sandbox).start(req, req.prompt, req.env))

    assert (outcome.termination, outcome.exit_code, outcome.reason) == ("completed", 0, None)
    # codex itself applied the scripted patches (Write, then Edit) in the worktree
    assert (worktree / "greeting.py").read_text() == GREETING
    written = IMPLEMENT.tool_inputs("Write")[1]["content"]
    assert (worktree / "test_greeting.py").read_text() == written
    # the last message is the structured output
    assert outcome.result is not None
    expected = IMPLEMENT.tool_inputs("StructuredOutput")[-1]
    assert outcome.result["structured_output"] == expected
    assert validate_output("implementor", outcome.result["structured_output"]).role == (
        "implementor"
    )
    assert outcome.result["usage"]["input_tokens"] > 0
    final_path = outcome.artifacts.path("runner_final_response")
    assert final_path is not None
    final = json.loads(final_path.read_text())
    assert final["structured_output"] == expected
    # the JSONL transcript holds codex's own items: the patches and the passing test runs
    events = transcript(outcome)
    assert events[0]["type"] == "thread.started"
    assert events[-1]["type"] == "turn.completed"
    changes = [c for item in completed_items(events, "file_change") for c in item["changes"]]
    assert sorted((Path(c["path"]).name, c["kind"]) for c in changes) == [
        ("greeting.py", "add"),
        ("greeting.py", "update"),
        ("test_greeting.py", "add"),
    ]
    assert all(item["status"] == "completed" for item in completed_items(events, "file_change"))
    runs = completed_items(events, "command_execution")
    assert len(runs) == 2
    for item in runs:
        assert "python3 -B -m unittest -v test_greeting" in item["command"]
        assert item["exit_code"] == 0
        assert item["aggregated_output"].rstrip().endswith("OK")
    meta_path = outcome.artifacts.path("runner_metadata")
    assert meta_path is not None
    meta = json.loads(meta_path.read_text())
    assert (meta["termination"], meta["exit_code"]) == ("completed", 0)
    assert meta["command"][:2] == [str(real_codex()), "exec"]

    # the model side: five turns, counted statelessly, the tools picked as codex offered them
    turns = [r for r in server.requests if r.path == "/v1/responses"]
    assert [(r.kind, r.status, r.scenario, r.turn) for r in turns] == [
        ("turn", 200, "implement", n) for n in range(5)
    ]
    assert [r.reply for r in turns] == [
        ("text", call, call),
        (call,),
        ("text", call),
        (call,),
        ("text",),
    ]
    first = turns[0].body
    assert first is not None
    if model is None:  # code mode: no top-level tools, an additional_tools input item
        assert "tools" not in first
        assert first["input"][0]["type"] == "additional_tools"
        assert "exec" in turns[0].tools  # recorded from the additional_tools item
    else:
        assert {"exec_command"} <= {t.get("name") for t in first["tools"]}
        assert "apply_patch" not in {t.get("name") for t in first["tools"]}
    # the results the model got back: the patch applied, the test run passed
    (test_run,) = turns[2].tool_results
    assert not test_run.is_error
    assert "OK" in test_run.content
    assert all(not r.is_error for r in turns[1].tool_results)
    assert len(turns[1].tool_results) == 2


@pytest.mark.spec("S003-13")
@pytest.mark.spec("S004-11")
def test_a_model_api_error_ends_the_real_codex_run_as_an_error(
    worktree: Path, server: ScriptedModelServer, codex: Codex
) -> None:
    # No scenario of the book plays a planner: the scripted model answers 400.
    req = codex.request(worktree, "Plan the specs.", role="planner")
    outcome = finish(codex.runner(server).start(req, req.prompt, req.env))

    assert outcome.termination == "error"
    assert outcome.exit_code not in (0, None)
    assert outcome.reason is not None
    assert "turn.failed" in outcome.reason
    assert "no scenario matches" in outcome.reason
    assert [e["type"] for e in transcript(outcome)][-1] == "turn.failed"
    refused = [r for r in server.requests if r.path == "/v1/responses"]
    assert refused
    assert all((r.status, r.scenario) == (400, None) for r in refused)
    meta_path = outcome.artifacts.path("runner_metadata")
    assert meta_path is not None
    assert json.loads(meta_path.read_text())["termination"] == "error"
    assert not (worktree / "greeting.py").exists()


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A model API that refuses every request: 401, as for a wrong key."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request"}}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_model_api_refusing_the_key_is_an_infrastructure_failure_on_the_real_codex(
    worktree: Path, codex: Codex
) -> None:
    """codex retries the 401 five times, then fails the turn: not the work's fault."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        runner = CodexCliRunner(
            codex.tmp_path / "state",
            cli_path=str(real_codex()),
            kill_grace=2,
            models=("gpt-5-codex",),
            overrides=codex_overrides(url),
            isolated_home=True,
            home_roots=[codex.homes],
        )
        req = codex.request(worktree, "Implement it.")
        outcome = finish(runner.start(req, req.prompt, req.env))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert outcome.termination == "error"
    assert outcome.infrastructure == "model-api"
    assert outcome.reason is not None
    assert outcome.reason.startswith("the model API failed: unexpected status 401 Unauthorized")


@pytest.mark.spec("S003-13")
@pytest.mark.spec("S004-11")
def test_a_hanging_model_gets_the_real_codex_killed_idle(
    worktree: Path, server: ScriptedModelServer, codex: Codex
) -> None:
    req = codex.request(worktree, "Implement Work Item #8.", idle_timeout=3.0)
    outcome = finish(codex.runner(server).start(req, req.prompt, req.env))

    assert outcome.termination == "killed_idle"
    assert outcome.result is None
    meta_path = outcome.artifacts.path("runner_metadata")
    assert meta_path is not None
    meta = json.loads(meta_path.read_text())
    assert meta["termination"] == "killed_idle"
    assert meta["extra"]["cancelled_at"]
    held = [r for r in server.requests if r.path == "/v1/responses"]
    assert held
    assert all((r.scenario, r.reply) == ("hang", ("hang",)) for r in held)
    # codex is gone, so the held response is let go
    assert server.wait_until(lambda s: s.hanging == 0, WAIT)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the worktree and outside /tmp (which codex's workspace-write
    sandbox leaves writable)."""
    directory = Path(tempfile.mkdtemp(prefix="cpe-sandbox-", dir="/var/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.spec("S004-04")
@pytest.mark.parametrize(
    ("read_only", "inside_written"), [(False, True), (True, False)], ids=["write", "read-only"]
)
def test_the_codex_sandbox_confines_the_agents_writes(
    worktree: Path, outside: Path, codex: Codex, read_only: bool, inside_written: bool
) -> None:
    """What cpe relies on instead of tool lists and the Bash guard: an implementor's codex
    (workspace-write) can write in its worktree and nowhere else; a planner's or reviewer's
    (read-only) cannot write at all."""
    target = outside / "escaped.txt"
    command = f"touch {{cwd}}/inside.txt; echo inside=$?; touch {target}; echo outside=$?"
    scenario = parse_scenario(
        {
            "name": "sandbox",
            "turns": [
                [{"tool": "Bash", "input": {"command": command}}],
                [
                    {
                        "tool": "StructuredOutput",
                        "input": {"role": "implementor", "outcome": "blocked", "summary": "x"},
                    }
                ],
            ],
        }
    )
    req = codex.request(worktree, "try the sandbox", model="gpt-5-codex", read_only=read_only)
    with ScriptedModelServer([scenario]) as server:
        outcome = finish(codex.runner(server).start(req))
    assert outcome.termination == "completed", outcome.reason
    (ran,) = completed_items(transcript(outcome), "command_execution")
    assert "outside=1" in ran["aggregated_output"]
    assert not target.exists()
    assert (worktree / "inside.txt").exists() is inside_written
    meta_path = outcome.artifacts.path("runner_metadata")
    assert meta_path is not None
    sandbox = json.loads(meta_path.read_text())["effective_policy"]["sandbox"]
    assert sandbox == ("read-only" if read_only else "workspace-write")


@pytest.mark.spec("S004-11")
def test_with_its_home_under_the_temporary_directory_codex_runs_commands_or_the_run_says_why(
    tmp_path: Path, worktree: Path, codex: Codex
) -> None:
    """Why isolated homes stay out of the temporary directory (``codex/home.py``): there codex
    makes no helper aliases. Its bundled bubblewrap does without them; a system one older than
    0.9.0 (Debian 12's) does not, and then no command runs: the run ends as an error that says
    so and why, not as the "completed" the model reports."""
    home = tmp_path / "home" / ".codex"
    home.mkdir(parents=True)
    env = {**codex.env(), "CODEX_HOME": str(home), "TMPDIR": str(tmp_path)}
    scenario = parse_scenario(
        {
            "name": "one-command",
            "turns": [
                [{"tool": "Bash", "input": {"command": "echo ran=yes"}}],
                [
                    {
                        "tool": "StructuredOutput",
                        "input": IMPLEMENT.tool_inputs("StructuredOutput")[-1],
                    }
                ],
            ],
        }
    )
    req = codex.request(worktree, "run a command", model="gpt-5-codex", env=env)
    with ScriptedModelServer([scenario]) as server:
        outcome = finish(codex.runner(server, isolated_home=False).start(req))

    if codex.bwrap == WITH_BWRAP and bwrap_needs_codex_helper_alias():
        assert (outcome.termination, outcome.exit_code, outcome.infrastructure) == (
            "error",
            0,
            "sandbox",
        )
        assert outcome.reason is not None
        assert "could not run commands: 1 command failed before starting" in outcome.reason
        assert "bwrap: execvp codex-linux-sandbox: No such file or directory" in outcome.reason
        assert "Refusing to create helper binaries under temporary dir" in outcome.reason
        # stdout shows the command now and then (timing), and never as having run
        for item in completed_items(transcript(outcome), "command_execution"):
            assert "bwrap: execvp codex-linux-sandbox" in item["aggregated_output"]
    else:
        assert (outcome.termination, outcome.infrastructure) == ("completed", None)
        (ran,) = completed_items(transcript(outcome), "command_execution")
        assert "ran=yes" in ran["aggregated_output"]


def test_a_real_codex_run_past_its_budget_is_stopped_by_cpe_from_its_live_token_usage(
    worktree: Path, server: ScriptedModelServer, codex: Codex
) -> None:
    """codex has no budget of its own: cpe prices the token usage codex logs after each model
    response and stops the run once it reaches ``[budget] per_run_usd``: killed_policy, saying
    budget, with the tokens spent so far recorded (the turn never completed)."""
    price = DEFAULT_PRICES["gpt-5-codex"]
    # each scripted response costs about 1.6 cents here (some 10k input tokens at $1.25/M):
    # the second one crosses the budget
    req = codex.request(
        worktree,
        "Implement Work Item #1: add greet(name).",
        model="gpt-5-codex",
        counted_budget_usd=0.025,
        token_price=price,
    )
    handle = codex.runner(server).start(req, req.prompt, req.env)
    outcome = finish(handle)

    assert outcome.termination == "killed_policy", outcome.reason
    assert outcome.reason is not None
    assert outcome.reason.startswith("budget: the run reached [budget] per_run_usd ($0.025;")
    assert handle.live_cost >= 0.025
    turns = [r for r in server.requests if r.path == "/v1/responses"]
    assert 2 <= len(turns) < 5  # the scenario takes five; stopped at most one response late
    assert outcome.result is not None
    usage = outcome.result["usage"]
    assert usage["input_tokens"] > 0
    # the tokens spent up to the stop, the response that crossed the budget and any after it
    recorded = token_cost("gpt-5-codex", usage, DEFAULT_PRICES)
    assert recorded is not None
    assert recorded >= handle.live_cost
    meta_path = outcome.artifacts.path("runner_metadata")
    assert meta_path is not None
    assert json.loads(meta_path.read_text())["termination"] == "killed_policy"


def test_without_a_budget_a_real_codex_run_is_not_metered(
    worktree: Path, server: ScriptedModelServer, codex: Codex
) -> None:
    req = codex.request(worktree, "Implement Work Item #1: add greet(name).", model="gpt-5-codex")
    handle = codex.runner(server).start(req, req.prompt, req.env)
    outcome = finish(handle)
    assert outcome.termination == "completed"
    assert handle.meter is None
    assert handle.live_cost == 0.0


@pytest.mark.parametrize(
    ("scenario", "limit", "reason"),
    [
        ("wander", {"unchanged_limit": 3}, "3 tool calls in a row changed nothing in the worktree"),
        ("loop", {"repeat_limit": 3}, "the same command call 3 times in a row"),
    ],
    ids=["unchanged-worktree", "repeated-command"],
)
def test_a_real_codex_run_making_no_progress_is_stopped_by_cpe(
    worktree: Path, codex: Codex, scenario: str, limit: dict[str, int], reason: str
) -> None:
    """The no-progress breakers on codex: different commands none of which changes the worktree
    (``wander``), or the same command again and again (``loop``); at the limit cpe stops the run
    (killed_policy), saying so."""
    with ScriptedModelServer([load_scenario(scenario)]) as model:
        req = codex.request(worktree, "Implement Work Item #1.", model="gpt-5-codex", **limit)
        outcome = finish(codex.runner(model).start(req, req.prompt, req.env))
        turns = [r for r in model.requests if r.path == "/v1/responses"]
    assert outcome.termination == "killed_policy", outcome.reason
    assert outcome.reason == f"no progress: {reason}"
    # the stop lands within a few more calls on a loaded machine; without it the scenario
    # goes on until the duration limit (hundreds of calls)
    assert len(turns) < 30
