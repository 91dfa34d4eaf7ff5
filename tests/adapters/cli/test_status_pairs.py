"""``cpe status`` and ``cpe work`` with the work items and the revisions kept apart: they name
both systems, read the work items from the local tracker (whatever the forge) or the remote
tracker's last view in the journal, and the revisions from the local forge (whatever the
tracker) or the remote forge's last view; no token is needed to look."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from adapters.providers import ProviderRoles
from adapters.providers.local.provider import DATABASE_NAME, LocalProvider
from domain.events import RevisionChanged, WorkItemChanged
from domain.models import Revision, RevisionId, WorkItem, WorkItemId
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.adapters.cli.test_status import journal, line_with, sections
from tests.adapters.providers.edits import EDITS
from tests.support.git import make_patch, make_repo

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
GITHUB = '[provider.github]\nrepository = "acme/widgets"\n'
GITLAB = '[provider.gitlab]\nproject = "acme/tools"\nbase_url = "https://gitlab.example.com"\n'
LOCAL_AND_GITHUB = (
    '[provider.work_items]\nkind = "local"\n[provider.revisions]\nkind = "github"\n'
    "[provider.local]\npipeline_command = []\n" + GITHUB
)
GITLAB_AND_GITHUB = (
    '[provider.work_items]\nkind = "gitlab"\n[provider.revisions]\nkind = "github"\n'
    + GITHUB
    + GITLAB
)


def test_on_a_local_tracker_with_a_github_forge_work_add_list_and_status_use_the_tracker(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": LOCAL_AND_GITHUB})
    added = cpe("work", "add", "Add a greeting", "--body", "greet(name)", cwd=repo)
    assert (added.returncode, added.stdout) == (0, "created work item #1\n"), added.stderr
    # The forge's last view, as the engine journals it: a pull request for item 1.
    revision = Revision(
        id=RevisionId("12"),
        title="Add a greeting",
        work_item_id=WorkItemId("1"),
        branch="cpe/1-add-a-greeting",
        head_sha="a" * 40,
    )
    journal(repo / ".cpe", [RevisionChanged(revision=revision, at=T0)])

    shown = cpe("status", cwd=repo)  # no token in the environment
    assert shown.returncode == 0, shown.stderr
    assert "work items: local · revisions: github acme/widgets" in shown.stdout.splitlines()
    found = sections(shown.stdout)
    assert line_with(found["work items"], "Add a greeting").split()[:2] == ["#1", "pending"]
    assert "(GitHub acme/widgets: as the engine last saw it)" in found
    assert line_with(found["revisions"], "work item #1").split()[:2] == ["12", "open"]

    listed = cpe("work", "list", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    assert line_with(listed.stdout.splitlines(), "Add a greeting").startswith("#1 ")
    body = cpe("work", "show", "1", cwd=repo)
    assert body.returncode == 0, body.stderr
    assert "greet(name)" in body.stdout.splitlines()[body.stdout.splitlines().index("body") + 1]


def test_on_a_gitlab_tracker_work_add_says_where_to_open_an_issue(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": GITLAB_AND_GITHUB})
    line = one_line_error(cpe("work", "add", "Add a greeting", cwd=repo))
    assert "work add: provider.work_items.kind is 'gitlab'; expected 'local'" in line
    assert "kept on GitLab: open an issue in acme/tools there instead" in line


def test_on_a_gitlab_tracker_status_and_show_give_the_engines_view_and_the_issue_page(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": GITLAB_AND_GITHUB})
    item = WorkItem(id=WorkItemId("7"), title="From a GitLab issue", status="pending")
    journal(repo / ".cpe", [WorkItemChanged(work_item=item, at=T0)])
    shown = cpe("status", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "work items: gitlab acme/tools · revisions: github acme/widgets" in lines
    found = sections(shown.stdout)
    assert "(GitLab acme/tools: as the engine last saw it)" in found
    assert line_with(found["work items"], "From a GitLab").startswith("#7")
    body = cpe("work", "show", "7", cwd=repo)
    assert body.returncode == 0, body.stderr
    assert "(on GitLab: https://gitlab.example.com/acme/tools/-/issues/7)" in body.stdout


JIRA_AND_LOCAL = (
    '[provider.work_items]\nkind = "jira"\n[provider.revisions]\nkind = "local"\n'
    "[provider.local]\npipeline_command = []\n"
    '[provider.jira]\nbase_url = "https://acme.atlassian.net"\nproject = "PROJ"\n'
    'email = "bot@acme.example"\n'
)
LINEAR_AND_GITHUB = (
    '[provider.work_items]\nkind = "linear"\n[provider.revisions]\nkind = "github"\n'
    + GITHUB
    + '[provider.linear]\nteam = "ENG"\n'
)


def test_on_a_jira_tracker_with_the_local_forge_status_and_show_give_the_engines_view(
    tmp_path: Path,
) -> None:
    """No token, no request to Jira: the items as the engine journaled them, where the item's
    page is, and the local forge's revisions as they are (not the journal's)."""
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": JIRA_AND_LOCAL})
    assert cpe("status", cwd=repo).returncode == 0
    assert not (repo / ".cpe" / DATABASE_NAME).exists()  # nothing made to look
    item = WorkItem(id=WorkItemId("PROJ-12"), title="From a Jira issue", status="in-review")
    seen = Revision(
        id=RevisionId("9"),
        title="As the engine saw it",
        work_item_id=WorkItemId("PROJ-12"),
        branch="cpe/PROJ-12-old",
        head_sha="a" * 40,
    )
    journal(
        repo / ".cpe",
        [WorkItemChanged(work_item=item, at=T0), RevisionChanged(revision=seen, at=T0)],
    )
    patch = make_patch(repo, tmp_path / "patch", EDITS["modified"])
    with LocalProvider(repo, repo / ".cpe", roles=ProviderRoles(work_items=False)) as forge:
        assert forge.revision_writer is not None
        made = forge.revision_writer.create_from_patch(
            WorkItemId("PROJ-12"), "cpe/PROJ-12-from-a-jira-issue", "From a Jira issue", "", patch
        )
    shown = cpe("status", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert (
        "work items: jira PROJ at https://acme.atlassian.net · revisions: local"
        in shown.stdout.splitlines()
    )
    found = sections(shown.stdout)
    assert "(Jira PROJ at https://acme.atlassian.net: as the engine last saw it)" in found
    # A key is written as it is, without the '#' of a number.
    assert line_with(found["work items"], "From a Jira issue").split()[:2] == [
        "PROJ-12",
        "in-review",
    ]
    assert line_with(found["revisions"], "work item PROJ-12").split()[:2] == [made.id, "open"]
    assert "As the engine saw it" not in shown.stdout
    body = cpe("work", "show", "PROJ-12", cwd=repo)
    assert body.returncode == 0, body.stderr
    assert "(on Jira: https://acme.atlassian.net/browse/PROJ-12)" in body.stdout
    assert f"revision  {made.id} open" in body.stdout
    assert "branch cpe/PROJ-12-from-a-jira-issue" in body.stdout
    # The forge's database holds no local work item: there is no local tracker here.
    with sqlite3.connect(repo / ".cpe" / DATABASE_NAME) as conn:
        assert conn.execute("SELECT COUNT(*) FROM work_items").fetchone() == (0,)


def test_on_a_linear_tracker_work_add_says_where_to_open_an_issue(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": LINEAR_AND_GITHUB})
    line = one_line_error(cpe("work", "add", "Add a greeting", cwd=repo))
    assert "work add: provider.work_items.kind is 'linear'; expected 'local'" in line
    assert "kept on Linear: open an issue in team ENG there instead" in line
    item = WorkItem(id=WorkItemId("ENG-3"), title="From a Linear issue", status="pending")
    journal(repo / ".cpe", [WorkItemChanged(work_item=item, at=T0)])
    body = cpe("work", "show", "ENG-3", cwd=repo)
    assert body.returncode == 0, body.stderr
    assert "(on Linear: ENG-3)" in body.stdout


def test_keys_of_any_length_keep_the_columns_of_status_and_work_list(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": JIRA_AND_LOCAL})
    items = [
        WorkItem(id=WorkItemId("PROJ-9"), title="Short key", status="pending"),
        WorkItem(id=WorkItemId("PROJ-1234"), title="Long key", status="in-progress"),
    ]
    journal(repo / ".cpe", [WorkItemChanged(work_item=item, at=T0) for item in items])
    shown = cpe("status", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    found = sections(shown.stdout)["work items"]
    short, long = line_with(found, "Short key"), line_with(found, "Long key")
    assert short.index("pending") == long.index("in-progress")
    assert short.index("Short key") == long.index("Long key")
    listed = cpe("work", "list", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert [row.split()[0] for row in rows] == ["PROJ-9", "PROJ-1234"]
    for row in rows:
        status = row.split()[1]
        assert row.index(status) == header.index("status"), listed.stdout
        assert row.index("0/3") == header.index("attempts"), listed.stdout
