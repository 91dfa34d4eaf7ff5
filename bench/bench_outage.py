"""How fast a model outage stops holding agent slots: N work items, implemented at once by the
real ``claude`` CLI, whose model API refuses connections from the start (the scripted model,
not listening); a real ``cpe run`` with the default ``[breaker]`` (``outage_after`` 15 s).

The CLI retries by itself (about ten tries over three minutes); cpe reads each retry as the
run goes on. Reported, per run: seconds from the first dispatch to the breaker's pause (the
``dispatch paused`` log line), to the last retrying run's end (its slot free), the retries
cpe saw meanwhile, and the attempts spent (must be 0).

Run: ``python bench/bench_outage.py [--items 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.journal import Journal  # noqa: E402
from adapters.scripted_model import ScriptedModelServer, load_scenario  # noqa: E402
from domain.events import AgentFailed, AgentRequested, AgentSignalled  # noqa: E402
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for  # noqa: E402


def _logged(log: Path, event: str) -> datetime | None:
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if entry.get("event") == event:
                return datetime.fromisoformat(entry["timestamp"])
    return None


def bench(items: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cpe-bench-outage-") as tmp:
        base = Path(tmp)
        concurrency = f"[workflow.max_concurrent]\nimplementor = {items}\n"
        repo = make_cpe_repo(base / "repo", extra=concurrency)
        for n in range(items):
            add_work_item(repo, f"Item {n + 1}", f"Add module m{n + 1}.py.")
        home = base / "home"
        home.mkdir()
        log_path = home / "cpe.log"
        with contextlib.ExitStack() as stack:
            server = stack.enter_context(ScriptedModelServer([load_scenario("implement")]))
            server.refuse_connections()
            log = stack.enter_context(log_path.open("a"))
            cpe_run = start_cpe(repo, home, log, server.client_env())
            try:
                if not wait_for(lambda: _logged(log_path, "dispatch paused") is not None, 300):
                    raise SystemExit(f"no pause: {log_path.read_text()[-2000:]}")
            finally:
                cpe_run.send_signal(signal.SIGTERM)
                cpe_run.wait(120)
        paused = _logged(log_path, "dispatch paused")
        assert paused is not None
        journal = Journal(repo / ".cpe" / "journal.sqlite3")
        try:
            events = [(entry.at, entry.event) for entry in journal.entries()]
            attempts = sum(journal.replay().attempts.values())
        finally:
            journal.close()
    dispatched = min(e.at for _, e in events if isinstance(e, AgentRequested) and e.at)
    ended = [e.at for _, e in events if isinstance(e, AgentFailed) and e.at is not None]
    retries = sum(1 for _, e in events if isinstance(e, AgentSignalled))
    return {
        "items": items,
        "to_pause_s": (paused - dispatched).total_seconds(),
        "to_slots_free_s": (max(ended) - dispatched).total_seconds() if ended else -1,
        "retries_seen": retries,
        "attempts_spent": attempts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(bench(args.items)))


if __name__ == "__main__":
    main()
