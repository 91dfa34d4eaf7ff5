"""`cpe run` and SIGHUP: the configuration is read again without stopping the agents. A raised
concurrency cap starts more agents at once; a broken file is one log line and the last good
configuration stays; a setting that needs a restart is named. The real `claude` CLI, the
scripted model holding every implementor run open."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from pathlib import Path

from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for

ONE_AT_A_TIME = "[workflow.max_concurrent]\nimplementor = 1\n"


def _events(log: Path, name: str) -> list[dict[str, object]]:
    found = []
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and str(entry.get("event")).startswith(name):
                found.append(entry)
    return found


def test_sighup_reloads_the_configuration_without_stopping_the_agents(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo", extra=ONE_AT_A_TIME)
    for title in ("One", "Two", "Three"):
        add_work_item(repo, title, f"Do {title.lower()}.")
    config = repo / "supervisor.toml"
    good = config.read_text()
    home = tmp_path / "home"
    home.mkdir()
    log_path = home / "cpe.log"
    book = [load_scenario("hang", match=Match(role="implementor"))]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context(log_path.open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        assert server.wait_until(lambda s: s.hanging >= 1, timeout=180), "no run started"
        assert wait_for(lambda: bool(_events(log_path, "agent dispatch rejected")), 60)
        assert server.hanging == 1  # the cap held the others back

        # a broken file: one line, still running on the old configuration
        config.write_text(good.replace("implementor = 1", "implementor = 0"))
        cpe_run.send_signal(signal.SIGHUP)
        assert wait_for(lambda: bool(_events(log_path, "configuration reload refused")), 60)
        [refused] = _events(log_path, "configuration reload refused")
        assert "workflow.max_concurrent.implementor" in str(refused["error"])
        assert cpe_run.poll() is None

        # a raised cap: more agents start, no restart; a runtime change needs one
        raised = good.replace("implementor = 1", "implementor = 3")
        config.write_text(raised + '[runtime.roles]\nreviewer = "claude-cli"\n')
        cpe_run.send_signal(signal.SIGHUP)
        more = server.wait_until(lambda s: s.hanging >= 3, timeout=120)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    assert more, log_path.read_text()[-3000:]
    [reloaded] = _events(log_path, "configuration reloaded")  # the refusal is not one
    assert reloaded["applied"] == ["workflow.max_concurrent.implementor"]
    [restart] = _events(log_path, "configuration changes that need a restart")
    assert restart["settings"] == ["runtime.roles.reviewer"]
    assert not _events(log_path, "engine starting")[1:]  # one start: never restarted


def test_a_reload_says_so_on_a_persons_terminal(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    config = repo / "supervisor.toml"
    home = tmp_path / "home"
    home.mkdir()
    log_path = home / "cpe.log"
    with log_path.open("a") as log, ScriptedModelServer([]) as server:
        cpe_run = start_cpe(repo, home, log, server.client_env(), args=["--log-format", "human"])
        processes.append(cpe_run)
        assert wait_for(lambda: "cpe started" in log_path.read_text()), log_path.read_text()
        text = config.read_text()
        assert "retry_backoff_max = 1\n" in text
        config.write_text(text.replace("retry_backoff_max = 1\n", "retry_backoff_max = 2\n"))
        cpe_run.send_signal(signal.SIGHUP)
        said = f"configuration reloaded from {config} (applied: workflow.retry_backoff_max)"
        assert wait_for(lambda: said in log_path.read_text()), log_path.read_text()
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    # A person's terminal gets the decisions; the whole log, JSON, is in the state directory.
    whole = repo / ".cpe" / "cpe.log"
    assert f"the whole log goes to {whole}" in log_path.read_text()
    assert _events(whole, "configuration reloaded")[0]["applied"] == ["workflow.retry_backoff_max"]
    assert _events(whole, "shutdown complete"), whole.read_text()[-2000:]
