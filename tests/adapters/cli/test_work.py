"""``cpe work list`` and ``cpe work show`` from the command line, on a repository whose engine
has worked (the fixture of ``test_status``: real tracker, real journal), and the one-line
errors of the work commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.journal import Journal
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.adapters.cli.test_status import IMPLEMENTOR, PLANNER, REVIEWER, Worked, make_worked


@pytest.fixture
def worked(tmp_path: Path) -> Worked:
    return make_worked(tmp_path)


def test_work_list_shows_status_attempts_revision_and_cost(worked: Worked) -> None:
    result = cpe("work", "list", cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    header, greeting, farewell = result.stdout.splitlines()
    assert header.split() == ["item", "status", "attempts", "revision", "cost", "title"]
    assert greeting.split() == [
        f"#{worked.greeting}",
        "in-review",
        "1/3",
        worked.revision,
        "open",
        "success",
        "$0.0123",
        "Greeting",
    ]
    assert farewell.split()[:3] == [f"#{worked.farewell}", "pending", "0/3"]
    assert farewell.endswith(f"Farewell  (blocked by #{worked.greeting})")


def test_work_list_with_status_shows_only_those_items(worked: Worked) -> None:
    result = cpe("work", "list", "--status", "pending", cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == [f"#{worked.farewell}"]
    assert cpe("work", "list", "--status", "done", cwd=worked.repo).stdout == (
        "(no work items done)\n"
    )


def test_work_list_with_an_unknown_status_is_a_one_line_usage_error(worked: Worked) -> None:
    line = one_line_error(cpe("work", "list", "--status", "finished", cwd=worked.repo), 2)
    assert "'finished' is not a status; expected one of pending" in line


def test_work_show_tells_an_items_whole_story(worked: Worked) -> None:
    result = cpe("work", "show", worked.greeting, cwd=worked.repo)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"#{worked.greeting} Greeting\n  status    in-review\n")
    assert "attempts  1 of 3" in out
    assert f"revision  {worked.revision} open, pipeline success" in out
    assert "branch cpe/1-greeting" in out
    assert "\nbody\n  Add greet(name).\n" in out
    runs = out.split("\nagent runs\n")[1].split("\n\n")[0]
    assert IMPLEMENTOR in runs
    assert REVIEWER in runs
    assert PLANNER not in runs  # a planner run is not the item's
    assert "total cost $0.0123" in runs


def test_work_show_names_the_last_failure(worked: Worked) -> None:
    from datetime import timedelta  # noqa: PLC0415

    from domain.events import AgentFailed  # noqa: PLC0415
    from tests.adapters.cli.test_status import T0, journal  # noqa: PLC0415

    journal(
        worked.state_dir,
        [
            AgentFailed(
                session_id=REVIEWER,
                role="reviewer",
                kind="timed-out",
                reason="exceeded max_agent_duration (1800s)",
                at=T0 + timedelta(seconds=60),
            )
        ],
    )
    out = cpe("work", "show", worked.greeting, cwd=worked.repo).stdout
    assert f"last failure  {REVIEWER} timed-out: exceeded max_agent_duration (1800s)" in out


def test_work_show_says_why_cpe_changed_an_items_status(worked: Worked) -> None:
    """A transition whose reason the state cannot show (a budget spent) keeps it: in the
    status history, as in the log."""
    from datetime import timedelta  # noqa: PLC0415

    from domain.events import StatusTransitioned  # noqa: PLC0415
    from tests.adapters.cli.test_status import T0, journal  # noqa: PLC0415

    why = "budget: its runs cost $25.40 of [budget] per_item_usd $25"
    event = StatusTransitioned(
        work_item_id=worked.farewell, to="blocked", reason=why, at=T0 + timedelta(seconds=90)
    )
    journal(worked.state_dir, [event])
    out = cpe("work", "show", worked.farewell, cwd=worked.repo).stdout
    history = out.split("\nstatus history (oldest first)\n")[1].split("\n\n")[0]
    assert history.splitlines()[-1].endswith(f"→ blocked  (cpe: {why})")


def test_a_strangers_escape_sequences_reach_no_terminal(worked: Worked) -> None:
    """Trial of issue 39: an item titled with an OSC title sequence, a screen clear and a
    carriage return, its body with an OSC 52 clipboard write: ``cpe work list``, ``cpe work
    show`` and ``cpe status`` printed them raw (the terminal's title became "PWNED"). Now its
    text is shown, its control characters are not."""
    from adapters.providers.local import LocalPipeline, LocalProvider  # noqa: PLC0415

    title = "Evil \x1b]0;PWNED\x07 \x1b[2J\x1b[31mred\x1b[0m tab\there\rCR \x9b2J"
    body = "body \x1b]52;c;aGVsbG8=\x07 clip\nline2 \x07bell"
    with LocalProvider(worked.repo, worked.state_dir, "main", LocalPipeline(["true"], 60)) as p:
        evil = p.work_item_writer.create_work_item(title, body)
    outputs = {
        "work list": cpe("work", "list", cwd=worked.repo),
        "work show": cpe("work", "show", evil, cwd=worked.repo),
        "status": cpe("status", cwd=worked.repo),
    }
    for name, result in outputs.items():
        assert result.returncode == 0, (name, result.stderr)
        controls = {c for c in result.stdout if (ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160}
        assert not controls, (name, controls)
        assert "Evil ]0;PWNED [2J[31mred[0m tab hereCR 2J" in result.stdout, name
    assert "\nbody\n  body ]52;c;aGVsbG8= clip\n  line2 bell\n" in outputs["work show"].stdout


def test_work_show_of_an_unknown_item_is_a_one_line_error(worked: Worked) -> None:
    line = one_line_error(cpe("work", "show", "42", cwd=worked.repo), 1)
    assert "unknown work item '42'; expected one cpe work list shows (#1, #2)" in line


def journaled(worked: Worked) -> list[object]:
    journal = Journal(worked.state_dir / "journal.sqlite3")
    try:
        return [entry.event for entry in journal.entries()]
    finally:
        journal.close()


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("work", "retry", "42"), 1, "unknown work item '42'"),
        (("work", "cancel", "2"), 1, "#2 has no active agent run (it is pending)"),
        (("work", "retry", "1"), 1, "#1 is in-review; a retry takes an item that is blocked"),
        (("work", "set-status", "1", "gone"), 2, "'gone' is not a status"),
        (("work", "set-status", "1", "pending"), 1, "has a run in flight"),
    ],
)
def test_a_request_the_state_refuses_is_one_line_and_changes_nothing(
    worked: Worked, args: tuple[str, ...], code: int, says: str
) -> None:
    before = journaled(worked)
    line = one_line_error(cpe(*args, cwd=worked.repo), code)
    assert says in line
    assert journaled(worked) == before


def test_a_bad_dashboard_listen_address_is_a_one_line_configuration_error(tmp_path: Path) -> None:
    from tests.support.git import make_repo  # noqa: PLC0415

    repo = make_repo(
        tmp_path / "repo", {"supervisor.toml": '[dashboard]\nlisten = "8765"\n', "README.md": "x\n"}
    )
    line = one_line_error(cpe("run", cwd=repo), 78)
    assert "dashboard.listen" in line
    assert "expected HOST:PORT" in line


def test_a_dashboard_token_variable_that_is_not_set_is_a_one_line_configuration_error(
    tmp_path: Path,
) -> None:
    from tests.support.git import make_repo  # noqa: PLC0415

    toml = '[dashboard]\ntoken_env = "CPE_NO_SUCH_TOKEN"\n[provider.local]\npipeline_command = []\n'
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": toml, "README.md": "x\n"})
    line = one_line_error(cpe("run", cwd=repo), 78)
    assert "dashboard.token_env: the environment variable CPE_NO_SUCH_TOKEN is not set" in line


def test_demo_serve_with_a_bad_listen_address_is_a_one_line_usage_error() -> None:
    line = one_line_error(cpe("demo", "--serve", "--listen", "nowhere"), 2)
    assert "--listen: 'nowhere' is not HOST:PORT" in line
