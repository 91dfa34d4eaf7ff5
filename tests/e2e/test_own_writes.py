"""What cpe writes itself reaches the engine at once, not at its next poll (issue 35, item 8): a
real ``cpe run`` on the demo's sample whose work-item and revision pollers would wait an hour
between cycles. The planner's items are dispatched, each revision's pipeline result read and each
merge seen without one of those polls, and a ``cpe work add`` typed beside the running engine is
taken at once."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.crash import Loop
from tests.e2e.running import CPE, wait_for, work_items
from tests.support.git import git_raw

pytestmark = pytest.mark.timeout(600)

HOUR = 3600  # a poll interval no step of the loop may wait for


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    loop = Loop(tmp_path)
    toml = loop.repo / "supervisor.toml"
    text = toml.read_text()
    for poller in ("work_items", "revisions"):
        text, found = re.subn(rf"{poller}_interval = [\d.]+", f"{poller}_interval = {HOUR}", text)
        assert found == 1, f"the sample sets no {poller}_interval"
    toml.write_text(text)
    git_raw(loop.repo, "commit", "-qam", "pollers an hour apart")
    try:
        yield loop
    finally:
        loop.close()


def test_the_loop_finishes_with_the_pollers_an_hour_apart(loop: Loop) -> None:
    """Planned items, revisions' pipelines, reviews and merges: each step's write, or the local
    pipeline's result, has the engine read what changed right away."""
    loop.finish()  # both items done well inside the hour, then SIGTERM: exit 0
    loop.check_invariants()


def test_an_item_added_beside_the_running_engine_is_taken_at_once(loop: Loop) -> None:
    process = loop.start()
    try:
        assert wait_for(lambda: loop.done() or process.poll() is not None, loop.finish_timeout), (
            f"the loop did not finish: {loop.state()}\n{loop.tail()}"
        )
        assert process.poll() is None, loop.tail()
        added = subprocess.run(
            [str(CPE), "work", "add", "Add a farewell", "--repo", str(loop.repo)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert added.returncode == 0, added.stderr
        assert "(the running engine has it)" in added.stdout, added.stdout
        wid = added.stdout.split("#")[1].split()[0]

        def taken() -> bool:
            return any(i.id == wid and i.status != "pending" for i in work_items(loop.repo))

        # Dispatched (in progress, then wherever its run leads) long before the next poll.
        assert wait_for(taken, 120), f"#{wid} was not taken: {loop.state()}\n{loop.tail()}"
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(120)
