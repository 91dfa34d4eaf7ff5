"""``cpe init --tracker T --forge F``: a ``supervisor.toml`` that loads and names the pair for
every valid pair, the repository or project guessed from ``origin`` where it can be, what is
left to set printed; an invalid pair refused in one line with nothing written; ``cpe init``
without the flags as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.cli.init import init
from adapters.cli.settings import load_config
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.adapters.cli.test_commands import snapshot
from tests.support.git import git, make_repo

VALID = [
    ("local", "local"),
    ("local", "github"),
    ("local", "gitlab"),
    ("github", "github"),
    ("github", "gitlab"),
    ("gitlab", "github"),
    ("gitlab", "gitlab"),
    ("linear", "github"),
    ("linear", "gitlab"),
    ("linear", "local"),
    ("jira", "github"),
    ("jira", "gitlab"),
    ("jira", "local"),
]
TOKEN_ENV = {
    "github": "GITHUB_TOKEN",
    "gitlab": "GITLAB_TOKEN",
    "linear": "LINEAR_API_KEY",
    "jira": "JIRA_API_TOKEN",
}
ROOT = Path(__file__).resolve().parents[3]


def repo_with_origin(tmp_path: Path, origin: str | None) -> Path:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    if origin is not None:
        git(repo, "remote", "add", "origin", origin)
    return repo


@pytest.mark.parametrize(("tracker", "forge"), VALID)
def test_every_valid_pair_writes_a_file_that_loads_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tracker: str, forge: str
) -> None:
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, tracker, forge) == 0  # type: ignore[arg-type]
    config = load_config(repo / "supervisor.toml")
    assert (config.provider.work_items_kind, config.provider.revisions_kind) == (tracker, forge)
    out = capsys.readouterr().out
    for kind in {tracker, forge} - {"local"}:
        assert f"export {TOKEN_ENV[kind]}=..." in out
        assert f"set [provider.{kind}]" in out  # no origin: nothing guessed
    if {tracker, forge} == {"local"}:
        assert "left to set" not in out
    assert (repo / ".claude" / "agents" / "implementor.md").exists()


def test_the_local_pair_writes_the_shipped_provider_section(tmp_path: Path) -> None:
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, "local", "local") == 0
    written = load_config(repo / "supervisor.toml")
    assert written.provider.kind == "local"  # said, where the shipped file leaves it out
    unsaid = written.provider.model_copy(update={"kind": None})
    assert written.model_copy(update={"provider": unsaid}) == load_config(ROOT / "supervisor.toml")


@pytest.mark.parametrize(
    ("origin", "pair", "expected"),
    [
        (
            "git@github.com:acme/widgets.git",
            ("local", "github"),
            {"github": ("acme/widgets", None)},
        ),
        (
            "https://gitlab.com/acme/sub/widgets.git",
            ("gitlab", "gitlab"),
            {"gitlab": ("acme/sub/widgets", "https://gitlab.com")},
        ),
        (
            "ssh://git@gitlab.example.com:2222/acme/widgets.git",
            ("local", "gitlab"),
            {"gitlab": ("acme/widgets", "https://gitlab.example.com")},
        ),
        (
            "https://github.example.com/acme/widgets",
            ("local", "github"),
            {"github": ("acme/widgets", "https://github.example.com/api/v3/")},
        ),
    ],
)
def test_the_forges_repository_or_project_is_guessed_from_origin(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    origin: str,
    pair: tuple[str, str],
    expected: dict[str, tuple[str, str | None]],
) -> None:
    tracker, forge = pair
    repo = repo_with_origin(tmp_path, origin)
    assert init(repo, tracker, forge) == 0  # type: ignore[arg-type]
    provider = load_config(repo / "supervisor.toml").provider
    for kind, (where, base_url) in expected.items():
        assert provider.where(kind) == where  # type: ignore[arg-type]
        section = getattr(provider, kind)
        if kind == "gitlab" or base_url is not None:
            assert section.base_url == base_url
    out = capsys.readouterr().out
    assert f"guessed from origin: [provider.{forge}]" in out
    assert f"set [provider.{forge}]" not in out


def test_a_tracker_on_another_system_than_origin_is_not_guessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = repo_with_origin(tmp_path, "git@github.com:acme/widgets.git")
    assert init(repo, "gitlab", "github") == 0
    provider = load_config(repo / "supervisor.toml").provider
    assert provider.where("github") == "acme/widgets"
    assert provider.where("gitlab") == "GROUP/NAME"
    out = capsys.readouterr().out
    assert "set [provider.gitlab] project in supervisor.toml (now GROUP/NAME)" in out
    assert "open an issue in GROUP/NAME" in out  # cpe work add is for a local tracker


def test_a_forge_alone_keeps_the_work_items_local(tmp_path: Path) -> None:
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, None, "gitlab") == 0
    provider = load_config(repo / "supervisor.toml").provider
    assert (provider.work_items_kind, provider.revisions_kind) == ("local", "gitlab")


@pytest.mark.parametrize(
    ("tracker", "forge", "expected"),
    [
        (
            "github",
            "local",
            "--forge local: the local forge keeps revisions of the local tracker's, Linear's or "
            "Jira's items; with work items on github choose github or gitlab for --forge",
        ),
        (
            "gitlab",
            "local",
            "--forge local: the local forge keeps revisions of the local tracker's, Linear's or "
            "Jira's items; with work items on gitlab choose github or gitlab for --forge",
        ),
        (
            "linear",
            "linear",
            "--forge linear: Linear keeps work items only; choose github, gitlab or local for "
            "--forge",
        ),
        (
            "local",
            "jira",
            "--forge jira: Jira keeps work items only; choose github, gitlab or local for --forge",
        ),
    ],
)
def test_an_invalid_pair_is_refused_in_one_line_and_writes_nothing(
    tmp_path: Path, tracker: str, forge: str, expected: str
) -> None:
    repo = repo_with_origin(tmp_path, None)
    before = snapshot(repo)
    line = one_line_error(cpe("init", "--tracker", tracker, "--forge", forge, cwd=repo), 2)
    assert line == f"cpe: init: {expected}"
    assert snapshot(repo) == before


@pytest.mark.parametrize("tracker", ["linear", "jira"])
def test_linear_or_jira_alone_keeps_the_revisions_local(tmp_path: Path, tracker: str) -> None:
    repo = repo_with_origin(tmp_path, "git@github.com:acme/widgets.git")
    assert init(repo, tracker) == 0  # type: ignore[arg-type]
    provider = load_config(repo / "supervisor.toml").provider
    assert (provider.work_items_kind, provider.revisions_kind) == (tracker, "local")


def test_linear_is_written_with_its_team_to_set_and_what_its_key_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = repo_with_origin(tmp_path, "git@github.com:acme/widgets.git")
    assert init(repo, "linear", "github") == 0
    provider = load_config(repo / "supervisor.toml").provider
    assert provider.linear is not None
    assert (provider.linear.team, provider.linear.token_env) == ("ENG", "LINEAR_API_KEY")
    assert (provider.linear.project, provider.linear.label) == (None, None)
    assert provider.where("github") == "acme/widgets"  # the forge, from origin
    out = capsys.readouterr().out
    assert (
        "set [provider.linear] team in supervisor.toml (now ENG): the key of the Linear team"
        in (out)
    )
    assert (
        "export LINEAR_API_KEY=...   a personal API key (Linear: Settings, Security & access) or "
        "an OAuth access token, of a member of the team (not a guest) who can create and edit "
        "its issues"
    ) in out
    assert "open an issue on Linear (team ENG)" in out
    assert (
        "the team's workflow needs a state for each of cpe's statuses (a default team lacks "
        "Needs Refinement, Approved and Blocked): add them, or name states of yours in "
        "[provider.linear.states], a different one each (docs/linear.md)"
    ) in out
    text = (repo / "supervisor.toml").read_text()
    assert '# project = "NAME"' in text  # the options, said and left out
    assert '# label = "cpe"' in text
    # The states' mapping, said and left out; uncommented, it loads as the provider's.
    mapped = text.replace("# [provider.linear.states]", "[provider.linear.states]")
    for status in ("needs-refinement", "approved", "blocked"):
        mapped = mapped.replace(f"# {status} = ", f"{status} = ")
    (repo / "supervisor.toml").write_text(mapped)
    states = load_config(repo / "supervisor.toml").provider.linear
    assert states is not None
    assert dict(states.states or {}) == {
        "needs-refinement": "Needs Refinement",
        "approved": "Approved",
        "blocked": "Blocked",
    }


def test_jira_is_written_with_its_site_project_and_email_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, "jira", "local") == 0
    jira = load_config(repo / "supervisor.toml").provider.jira
    assert jira is not None
    assert (jira.base_url, jira.project, jira.email, jira.token_env, jira.is_cloud) == (
        "https://your-site.atlassian.net",
        "PROJ",
        "you@example.com",
        "JIRA_API_TOKEN",
        True,
    )
    out = capsys.readouterr().out
    assert (
        "set [provider.jira] base_url, project and email in supervisor.toml (now "
        "https://your-site.atlassian.net, PROJ, you@example.com): "
    ) in out
    assert (
        "export JIRA_API_TOKEN=...   Jira Cloud: an API token (id.atlassian.com, Security, API "
        "tokens) of the account whose email is set, with the Browse projects, Create issues, Edit "
        "issues, Transition issues, Link issues and Add comments permissions in the project; "
        "Jira Data Center: a personal access token of an account with those permissions"
    ) in out
    assert "open an issue on Jira (PROJ at https://your-site.atlassian.net)" in out
    assert "add In Review, Needs Refinement, Approved and Blocked, or name statuses" in out
    text = (repo / "supervisor.toml").read_text()
    mapped = text.replace("# [provider.jira.statuses]", "[provider.jira.statuses]")
    for status in ("in-review", "needs-refinement", "approved", "blocked"):
        mapped = mapped.replace(f"# {status} = ", f"{status} = ")
    (repo / "supervisor.toml").write_text(mapped)
    statuses = load_config(repo / "supervisor.toml").provider.jira
    assert statuses is not None
    assert sorted(statuses.statuses or {}) == [
        "approved",
        "blocked",
        "in-review",
        "needs-refinement",
    ]
    assert "pipeline_command: your test command" in out  # the local forge's pipeline


def test_an_existing_supervisor_toml_is_kept_and_the_warning_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": "[provider.local]\n"})
    result = cpe("init", "--tracker", "local", "--forge", "github", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert (repo / "supervisor.toml").read_text() == "[provider.local]\n"
    assert "supervisor.toml exists and is kept as it is" in result.stderr


@pytest.mark.parametrize(
    ("forge", "public", "elsewhere"),
    [
        ("gitlab", "https://gitlab.com", "a self-managed instance: its URL"),
        ("github", "https://api.github.com/", "GitHub Enterprise: https://HOST/api/v3/"),
    ],
)
def test_an_instance_not_guessed_is_written_with_where_another_one_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], forge: str, public: str, elsewhere: str
) -> None:
    """An origin cpe cannot read (a path, a mirror): the file names the public instance and
    says where a self-managed (Enterprise) one goes, and what is left to set says so too."""
    repo = repo_with_origin(tmp_path, "/srv/mirrors/widgets.git")
    assert init(repo, "local", forge) == 0  # type: ignore[arg-type]
    text = (repo / "supervisor.toml").read_text()
    assert f'base_url = "{public}" # {elsewhere}' in " ".join(text.split())
    section = getattr(load_config(repo / "supervisor.toml").provider, forge)
    assert section.base_url == public
    out = capsys.readouterr().out
    assert f"and base_url when not on {public}:" in out


@pytest.mark.parametrize(("tracker", "forge"), VALID)
def test_the_next_steps_say_to_push_when_the_default_branch_is_on_the_forge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tracker: str, forge: str
) -> None:
    """With a remote forge agents start from, and specs are read at, the default branch there:
    committing is not enough, and the next steps say so."""
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, tracker, forge) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    if forge == "local":
        assert 'git add supervisor.toml .claude .gitignore && git commit -m "cpe"   (' in out
        assert "git push" not in out
        assert "(or write specs under specs/)" in out
    else:
        name = {"github": "GitHub", "gitlab": "GitLab"}[forge]
        assert (
            'git add supervisor.toml .claude .gitignore && git commit -m "cpe" && git push\n'
            f"     (agents start from, and specs are read at, the default branch on {name})"
        ) in out
        assert "(or write specs under specs/, pushed)" in out


@pytest.mark.parametrize(
    ("tracker", "forge", "line"),
    [
        (
            "jira",
            "local",
            "cpe: configuration error: provider.jira.base_url: "
            "'https://your-site.atlassian.net' is the placeholder cpe init wrote; expected your "
            "Jira site's URL (https://SITE.atlassian.net), or your Data Center's",
        ),
        (
            "linear",
            "github",
            "cpe: configuration error: provider.github.repository: 'OWNER/NAME' is the "
            "placeholder cpe init wrote; expected the repository, owner/name",
        ),
        (
            "local",
            "gitlab",
            "cpe: configuration error: provider.gitlab.project: 'GROUP/NAME' is the placeholder "
            "cpe init wrote; expected the project's path, group/name",
        ),
    ],
)
def test_a_placeholder_left_as_init_wrote_it_stops_cpe_run_before_anything_is_asked(
    tmp_path: Path, tracker: str, forge: str, line: str
) -> None:
    """The file loads (cpe status works) but cannot run: cpe run says which value to set, in
    one line, before a token is read or a site asked (a made-up site would read as an outage)."""
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, tracker, forge) == 0  # type: ignore[arg-type]
    assert cpe("status", cwd=repo).returncode == 0
    tokens = {
        "JIRA_API_TOKEN": "t",
        "LINEAR_API_KEY": "t",
        "GITHUB_TOKEN": "t",
        "GITLAB_TOKEN": "t",
    }
    assert one_line_error(cpe("run", cwd=repo, env=tokens)) == line


def test_jiras_email_placeholder_is_refused_once_the_site_is_set(tmp_path: Path) -> None:
    repo = repo_with_origin(tmp_path, None)
    assert init(repo, "jira", "local") == 0
    path = repo / "supervisor.toml"
    path.write_text(
        path.read_text().replace("https://your-site.atlassian.net", "https://acme.atlassian.net")
    )
    line = one_line_error(cpe("run", cwd=repo, env={"JIRA_API_TOKEN": "t"}))
    assert line == (
        "cpe: configuration error: provider.jira.email: 'you@example.com' is the placeholder "
        "cpe init wrote; expected the e-mail of the account the API token belongs to"
    )
    # On Data Center the line goes: the token is a personal access token, sent alone.
    path.write_text(
        path.read_text().replace("https://acme.atlassian.net", "https://jira.acme.example")
    )
    line = one_line_error(cpe("run", cwd=repo, env={"JIRA_API_TOKEN": "t"}))
    assert line.endswith(
        "is the placeholder cpe init wrote; expected no email on Data Center (its personal "
        "access token goes alone)"
    )
