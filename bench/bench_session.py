"""Session start latency: from ``start_agent`` to the first output chunk, on each runtime — the
Claude SDK adapter and ``claude -p`` (the real bundled ``claude`` CLI), and ``codex exec`` (the
real codex from ``tests/tools`` or PATH) — with the scripted model on loopback.

Two roles: a planner (no worktree: context, agent definition, CLI start, first model turn) and
an implementor (the same plus a worktree and its removal). Also the whole run, to the result.

Run: ``python bench/bench_session.py [RUNS]`` (default 10 of each).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.logs import configure_logging  # noqa: E402
from adapters.runtime.claude.cli_runner import create_claude_cli_runtime  # noqa: E402
from adapters.runtime.claude.sdk import ClaudeAdapterConfig, create_claude_adapter  # noqa: E402
from adapters.runtime.cli.cli_runtime import CliRuntimeConfig  # noqa: E402
from adapters.runtime.codex.runner import create_codex_runtime  # noqa: E402
from adapters.scripted_model import ScriptedModelServer, load_scenario  # noqa: E402
from adapters.scripted_model.responses_wire import codex_overrides  # noqa: E402
from bench.engine_rig import scratch  # noqa: E402
from domain.models import EngineState, ImplementorStartParams, PlannerStartParams  # noqa: E402
from domain.ports import RuntimeAdapterDeps, SessionLogging  # noqa: E402
from tests.fakes.provider import fake_provider  # noqa: E402


def _repo(base: Path) -> Path:
    repo = base / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("config", "user.email", "b@example.com")
    run("config", "user.name", "bench")
    shutil.copytree(ROOT / ".claude", repo / ".claude")
    (repo / "specs").mkdir()
    (repo / "specs" / "a.md").write_text("# A\n")
    run("add", "-A")
    run("commit", "-q", "-m", "init")
    return repo


def main(runs: int) -> None:
    configure_logging("error", "json", sys.stderr)
    with (
        scratch() as tmp,  # not under /tmp: codex with bubblewrap (see engine_rig.scratch)
        ScriptedModelServer([load_scenario("planner"), load_scenario("implement")]) as server,
    ):
        base = Path(tmp)
        repo = _repo(base)
        tracker, provider = fake_provider()
        tracker.add_item("1", "in-progress", title="Greeting")
        state = EngineState.model_validate({"work_items": {"1": tracker.work_items["1"]}})
        deps = RuntimeAdapterDeps(
            work_item_reader=provider.work_item_reader,
            revision_reader=provider.revision_reader,
            get_state=lambda: state,
            get_review_history=provider.revision_reader.get_review_history,
        )
        config = ClaudeAdapterConfig(
            repo_root=str(repo),
            default_branch="main",
            max_agent_duration=300,
            logging=SessionLogging(logs_dir=str(base / "runs")),
            agent_env=server.client_env(),
            isolated_home=True,
        )
        cli_config = CliRuntimeConfig(
            **config.model_dump(
                include={
                    "repo_root",
                    "default_branch",
                    "max_agent_duration",
                    "logging",
                    "agent_env",
                    "isolated_home",
                }
            )
        )
        adapters: dict[str, Any] = {
            "claude-sdk": create_claude_adapter(config, deps),
            "claude-cli": create_claude_cli_runtime(cli_config, deps),
        }
        codex = _codex()
        if codex is None:
            print("codex-cli: skipped, no codex (npm ci --prefix tests/tools)", file=sys.stderr)
        else:
            adapters["codex-cli"] = create_codex_runtime(
                cli_config, deps, cli_path=codex, overrides=codex_overrides(server.base_url)
            )

        async def one(adapter: Any, params: Any) -> tuple[float, float]:
            began = time.perf_counter()
            handle = await adapter.start_agent(params)
            first = None
            async for _ in handle.output:
                first = first or time.perf_counter()
            await handle.result
            return (first or time.perf_counter()) - began, time.perf_counter() - began

        print(
            f"{'runtime':<11} {'role':<12} {'runs':>4} {'first chunk p50':>16} {'p90':>7} "
            f"{'whole run p50':>14}"
        )
        for kind, adapter in adapters.items():
            results: dict[str, list[tuple[float, float]]] = {"planner": [], "implementor": []}
            for i in range(runs):
                planner = PlannerStartParams(session_id=f"{kind}-p{i}", spec_paths=("specs/a.md",))
                implementor = ImplementorStartParams(
                    session_id=f"{kind}-i{i}", work_item_id="1", branch_name="cpe/1-x"
                )
                results["planner"].append(anyio.run(one, adapter, planner))
                results["implementor"].append(anyio.run(one, adapter, implementor))
            for role, samples in results.items():
                firsts = sorted(s[0] for s in samples)
                wholes = sorted(s[1] for s in samples)
                p90 = firsts[max(0, int(len(firsts) * 0.9) - 1)]
                print(
                    f"{kind:<11} {role:<12} {len(samples):>4} "
                    f"{statistics.median(firsts) * 1000:>13.0f} ms "
                    f"{p90 * 1000:>4.0f} ms {statistics.median(wholes) * 1000:>11.0f} ms"
                )


def _codex() -> str | None:
    local = ROOT / "tests" / "tools" / "node_modules" / ".bin" / "codex"
    return str(local) if local.is_file() else shutil.which("codex")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
