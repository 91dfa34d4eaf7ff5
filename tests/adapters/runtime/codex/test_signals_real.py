"""What the REAL ``codex`` runtime reports of the model API while a run goes on: the runtime
``create_codex_runtime`` builds, driving the real codex 0.169.0 against the scripted model on
a bad day, with ``RuntimeAdapterDeps.report_signal`` recording what it is told.

codex says it retries on stdout (``Reconnecting... N/5 (why)``) and writes its account's rate
limits only in its session log; either way the engine must hear of it as ``RunSignal`` s: a
retry and the recovery after it, the account's headroom, a spent usage window and when it
resets. Each test runs once per way codex finds bubblewrap (``tests/real_clis.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.runtime.cli.cli_runtime import CliRuntime, CliRuntimeConfig
from adapters.runtime.codex.runner import create_codex_runtime
from adapters.scripted_model import Fault, Quota, ScriptedModelServer, load_scenario
from adapters.scripted_model.responses_wire import codex_overrides
from domain.errors import AgentFailure
from domain.models import PlannerStartParams, QuotaWindow, RunSignal, SessionId
from domain.ports import SessionLogging
from domain.results import PlannerResult
from tests.adapters.runtime.driving import drive, provider_deps
from tests.real_clis import bwrap_variants, codex_path, real_codex
from tests.support.git import make_repo

WAIT = 120.0  # seconds for a whole run; these take one to ten here
SESSION = SessionId("planner-1")
PLANNER = load_scenario("planner")  # one turn: a text, then the plan (no command to run)
# codex 0.169 tries a model request that gets a 5xx five times over HTTP without a word, and
# only then says "Reconnecting... N/5" and starts the next of its (turn-level) stream attempts
HTTP_ATTEMPTS = 5


@dataclass
class Reported:
    """``report_signal``: every ``(session_id, signal)`` the runtime reports, from any thread."""

    pairs: list[tuple[SessionId, RunSignal]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, session_id: SessionId, signal: RunSignal) -> None:
        with self.lock:
            self.pairs.append((session_id, signal))

    def signals(self) -> list[RunSignal]:
        """What was reported, in order; all of it must be about the one run driven."""
        with self.lock:
            pairs = list(self.pairs)
        assert {session for session, _ in pairs} <= {SESSION}, pairs
        return [signal for _, signal in pairs]

    def of_kind(self, kind: str) -> list[RunSignal]:
        return [signal for signal in self.signals() if signal.kind == kind]


@dataclass(frozen=True)
class CodexRuntime:
    """How a test builds the real codex runtime: the repository, the state directory, the PATH
    codex gets (``bwrap`` on it or hidden)."""

    repo: Path
    state: Path
    path: str

    def build(self, server: ScriptedModelServer, reported: Reported) -> CliRuntime:
        config = CliRuntimeConfig(
            repo_root=str(self.repo),
            default_branch="main",
            max_agent_duration=WAIT,
            logging=SessionLogging(logs_dir=str(self.state / "logs")),
            agent_env={"PATH": self.path},
            isolated_home=True,
            model="gpt-5-codex",
        )
        deps = replace(
            provider_deps(("1", "in-progress", "Greeting", "Add greet(name).")),
            report_signal=reported,
        )
        return create_codex_runtime(
            config,
            deps,
            cli_path=str(real_codex()),
            overrides=codex_overrides(server.base_url),
            models=("gpt-5-codex",),
            kill_grace=2,
        )


@pytest.fixture(params=bwrap_variants())
def codex(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CodexRuntime]:
    """The state directory is under the temporary directory, so each run's codex home is made
    in ``$XDG_CACHE_HOME/cpe/codex-homes`` (``codex/home.py``): here a cache of the test's own,
    outside the temporary directory as codex wants, which every run must leave empty."""
    cache = Path(tempfile.mkdtemp(prefix="cpe-codex-cache-", dir="/var/tmp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    repo = make_repo(
        tmp_path / "repo", {"specs/greeting.md": "# Greeting\nA greet(name).\n"}, with_agents=True
    )
    path = codex_path(str(request.param), os.environ["PATH"], tmp_path / "bin")
    try:
        yield CodexRuntime(repo, tmp_path / "state", path)
        homes = cache / "cpe" / "codex-homes"
        assert not homes.exists() or list(homes.iterdir()) == [], "a codex home was left behind"
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer([PLANNER]) as s:
        yield s


def plan(runtime: CliRuntime) -> object:
    """Drive one planner run to its end: its result, or the ``AgentFailure`` it raised."""
    params = PlannerStartParams(session_id=SESSION, spec_paths=("specs/greeting.md",))
    _, result = drive(runtime, params)
    return result


def turns(server: ScriptedModelServer) -> list[int]:
    """The status of every model request codex made."""
    return [r.status for r in server.requests if r.path == "/v1/responses"]


def test_codex_retrying_a_failing_model_api_is_reported_and_so_is_its_recovery(
    codex: CodexRuntime, server: ScriptedModelServer
) -> None:
    # 500s until two of codex's stream attempts have failed; the third gets the answer
    server.fail(Fault.server_error(times=2 * HTTP_ATTEMPTS))
    reported = Reported()
    result = plan(codex.build(server, reported))

    assert isinstance(result, PlannerResult), result
    assert len(result.create) == 2
    assert turns(server) == [500] * (2 * HTTP_ATTEMPTS) + [200]
    retries = reported.of_kind("retrying")
    assert [(s.account, s.cause, s.attempt, s.max_attempts) for s in retries] == [
        ("openai", "server_error", 1, 5),
        ("openai", "server_error", 2, 5),
    ], reported.signals()
    assert all("high demand" in (s.detail or "") for s in retries)
    # the model answered again after the last retry: said once, after it
    kinds = [s.kind for s in reported.signals()]
    assert kinds.count("recovered") == 1
    assert kinds.index("recovered") > max(i for i, k in enumerate(kinds) if k == "retrying")
    (recovered,) = reported.of_kind("recovered")
    assert recovered.account == "openai"
    assert not reported.of_kind("rate_limited")


def test_the_accounts_headroom_codex_logs_is_reported_as_quota(
    codex: CodexRuntime, server: ScriptedModelServer
) -> None:
    quota = Quota.used(0.42, 0.3)
    server.set_quota(quota)
    reported = Reported()
    result = plan(codex.build(server, reported))

    assert isinstance(result, PlannerResult), result
    assert set(turns(server)) == {200}
    five_hour, seven_day = quota.five_hour, quota.seven_day
    assert five_hour is not None
    assert seven_day is not None
    expected = (
        QuotaWindow(
            name="five_hour",
            utilization=0.42,
            resets_at=datetime.fromtimestamp(five_hour.epoch, UTC),
            status="allowed",
        ),
        QuotaWindow(
            name="seven_day",
            utilization=0.3,
            resets_at=datetime.fromtimestamp(seven_day.epoch, UTC),
            status="allowed",
        ),
    )
    quotas = reported.of_kind("quota")
    assert quotas, reported.signals()
    assert {(s.account, s.windows) for s in quotas} == {("openai", expected)}
    assert not reported.of_kind("rate_limited")
    assert not reported.of_kind("retrying")


def test_a_spent_usage_window_fails_the_run_under_the_agent_and_says_until_when(
    codex: CodexRuntime, server: ScriptedModelServer
) -> None:
    resets_at = datetime.now(UTC) + timedelta(hours=1)
    server.fail(Fault.usage_limit(resets_at, window="five_hour"))
    reported = Reported()
    result = plan(codex.build(server, reported))

    assert isinstance(result, AgentFailure), result
    assert result.infrastructure  # the account's limit, not the agent's work: no attempt spent
    assert result.kind == "failed"
    assert "the model API failed: You\u2019ve hit your usage limit." in result.reason
    assert turns(server) == [429]  # no retry
    limited = reported.of_kind("rate_limited")
    assert len(limited) == 1, reported.signals()
    (signal,) = limited
    assert (signal.account, signal.window) == ("openai", "five_hour")
    assert signal.until == resets_at.replace(microsecond=0)
    spent = [w for w in signal.windows if w.name == "five_hour"]
    assert [(w.utilization, w.status) for w in spent] == [(1.0, "rejected")]
    assert not reported.of_kind("retrying")
