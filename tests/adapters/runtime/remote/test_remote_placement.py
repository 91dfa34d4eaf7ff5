"""Where a remote run ran, as ``cpe status`` and the dashboard read it (``remote.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.describe.runs import run_where
from adapters.runtime.remote.placement import describe_node, read_placement


def test_a_remote_runs_node_is_its_address_and_the_first_8_of_its_id(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "implementor-1"
    run_dir.mkdir(parents=True)
    where = {"node_id": "abcdef0123456789", "node_address": "10.0.0.7", "hostname": "w1"}
    (run_dir / "remote.json").write_text(json.dumps(where))
    (run_dir / "runner_metadata.json").write_text(json.dumps({"agent_family": "claude_sdk"}))
    assert read_placement(tmp_path, "implementor-1") == where
    assert run_where(tmp_path, "implementor-1") == "claude-sdk@10.0.0.7/abcdef01"


def test_a_local_run_or_an_unreadable_record_has_no_node(tmp_path: Path) -> None:
    assert read_placement(tmp_path, "implementor-2") is None
    assert run_where(tmp_path, "implementor-2") == ""
    local = tmp_path / "runs" / "implementor-4"
    local.mkdir(parents=True)
    (local / "runner_metadata.json").write_text(json.dumps({"agent_family": "codex_cli"}))
    assert run_where(tmp_path, "implementor-4") == "codex-cli"
    run_dir = tmp_path / "runs" / "implementor-3"
    run_dir.mkdir(parents=True)
    (run_dir / "remote.json").write_text("[1, 2]")
    assert read_placement(tmp_path, "implementor-3") is None
    (run_dir / "remote.json").write_text("{not json")
    assert read_placement(tmp_path, "implementor-3") is None
    assert describe_node({"hostname": "w2"}) == "w2"
