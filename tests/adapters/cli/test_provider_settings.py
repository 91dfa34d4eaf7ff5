"""``[provider]``: one system for both roles (``kind``), or the work items and the revisions
kept apart (``[provider.work_items]``, ``[provider.revisions]``); the valid pairs, and each
refusal in one line when the file loads."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from adapters.cli.settings import load_config, parse_config
from domain.errors import ConfigError

GITHUB = '[provider.github]\nrepository = "acme/widgets"\n'
GITLAB = '[provider.gitlab]\nproject = "acme/widgets"\n'
LINEAR = '[provider.linear]\nteam = "ENG"\n'
JIRA = '[provider.jira]\nbase_url = "https://acme.atlassian.net"\nproject = "PROJ"\n'
JIRA_CLOUD = JIRA + 'email = "bot@acme.example"\n'
SECTIONS = {"local": "", "github": GITHUB, "gitlab": GITLAB, "linear": LINEAR, "jira": JIRA_CLOUD}
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


def apart(tracker: str, forge: str) -> str:
    text = f'[provider.work_items]\nkind = "{tracker}"\n[provider.revisions]\nkind = "{forge}"\n'
    return text + "".join(dict.fromkeys(SECTIONS[k] for k in (tracker, forge)))


def refusal(text: str, tmp_path: Path) -> str:
    path = tmp_path / "supervisor.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


@pytest.mark.parametrize(("tracker", "forge"), VALID)
def test_every_valid_pair_loads_with_its_kinds(tracker: str, forge: str) -> None:
    section = parse_config(tomllib.loads(apart(tracker, forge))).provider
    assert (section.work_items_kind, section.revisions_kind) == (tracker, forge)
    assert section.apart == (tracker != forge)
    assert section.systems == tuple(dict.fromkeys((tracker, forge)))


def test_the_single_kind_means_both_roles() -> None:
    section = parse_config(tomllib.loads(f'[provider]\nkind = "github"\n{GITHUB}')).provider
    assert (section.work_items_kind, section.revisions_kind) == ("github", "github")
    assert section.describe() == "work items and revisions: github acme/widgets"


def test_no_provider_section_is_local_for_both() -> None:
    section = parse_config({}).provider
    assert (section.work_items_kind, section.revisions_kind) == ("local", "local")
    assert section.describe() == "work items and revisions: local"


def test_one_role_section_alone_leaves_the_other_role_local() -> None:
    section = parse_config(tomllib.loads(f'[provider.revisions]\nkind = "github"\n{GITHUB}'))
    assert (section.provider.work_items_kind, section.provider.revisions_kind) == (
        "local",
        "github",
    )


def test_describe_names_both_systems_apart() -> None:
    section = parse_config(tomllib.loads(apart("gitlab", "github"))).provider
    assert section.describe() == "work items: gitlab acme/widgets · revisions: github acme/widgets"


def test_both_forms_are_accepted_when_they_agree() -> None:
    text = f'[provider]\nkind = "github"\n[provider.revisions]\nkind = "github"\n{GITHUB}'
    section = parse_config(tomllib.loads(text)).provider
    assert (section.work_items_kind, section.revisions_kind) == ("github", "github")


def test_both_forms_disagreeing_are_refused_in_one_line(tmp_path: Path) -> None:
    text = f'[provider]\nkind = "local"\n[provider.revisions]\nkind = "github"\n{GITHUB}'
    assert refusal(text, tmp_path) == (
        'provider.kind = "local" and provider.revisions.kind = "github" disagree: [provider] '
        "kind names one system for both; give it alone, or [provider.work_items] and "
        "[provider.revisions] alone"
    )


@pytest.mark.parametrize("tracker", ["github", "gitlab"])
def test_a_local_forge_for_a_forges_own_tracker_is_refused_naming_the_pair(
    tmp_path: Path, tracker: str
) -> None:
    assert refusal(apart(tracker, "local"), tmp_path) == (
        'provider.revisions.kind = "local": the local forge keeps revisions of the local '
        f"tracker's, Linear's or Jira's items; with work items on {tracker} choose github or "
        "gitlab for revisions"
    )


@pytest.mark.parametrize(("kind", "name"), [("linear", "Linear"), ("jira", "Jira")])
def test_linear_or_jira_alone_is_refused_as_it_keeps_work_items_only(
    tmp_path: Path, kind: str, name: str
) -> None:
    assert refusal(f'[provider]\nkind = "{kind}"\n{SECTIONS[kind]}', tmp_path) == (
        f'provider.kind = "{kind}": {name} keeps work items only; choose github, gitlab or '
        f'local for revisions ([provider.work_items] kind = "{kind}" and [provider.revisions] '
        "kind = one of them)"
    )


@pytest.mark.parametrize("tracker", ["local", "github", "jira"])
def test_linear_as_the_forge_is_refused_whatever_the_tracker(tmp_path: Path, tracker: str) -> None:
    message = refusal(apart(tracker, "linear"), tmp_path)
    assert message.startswith(
        'provider.revisions.kind = "linear": Linear keeps work items only; choose github, '
        "gitlab or local for revisions"
    )


def test_describe_names_linear_and_jira_by_team_and_project() -> None:
    linear = parse_config(tomllib.loads(apart("linear", "github"))).provider
    assert linear.describe() == "work items: linear team ENG · revisions: github acme/widgets"
    jira = parse_config(tomllib.loads(apart("jira", "local"))).provider
    assert (
        jira.describe() == "work items: jira PROJ at https://acme.atlassian.net · revisions: local"
    )
    text = apart("linear", "local").replace('team = "ENG"', 'team = "eng"\nproject = "Web"')
    assert parse_config(tomllib.loads(text)).provider.describe() == (
        "work items: linear team ENG project Web · revisions: local"
    )


def test_jira_cloud_without_an_email_is_refused_when_the_file_loads(tmp_path: Path) -> None:
    text = apart("jira", "local").replace('email = "bot@acme.example"\n', "")
    message = refusal(text, tmp_path)
    assert message.startswith("provider.jira: ")
    assert "email is required on Jira Cloud" in message


def test_jira_data_center_needs_no_email() -> None:
    text = apart("jira", "local").replace('email = "bot@acme.example"\n', "")
    text = text.replace("https://acme.atlassian.net", "https://jira.acme.example")
    jira = parse_config(tomllib.loads(text)).provider.jira
    assert jira is not None
    assert (jira.is_cloud, jira.email) == (False, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[provider]\nkind = "github"\n',
            'provider.github: missing, and provider.kind = "github" needs it; expected a '
            "[provider.github] section with its repository (and token_env)",
        ),
        (
            '[provider.work_items]\nkind = "gitlab"\n[provider.revisions]\nkind = "github"\n'
            + GITHUB,
            'provider.gitlab: missing, and provider.work_items.kind = "gitlab" needs it; '
            "expected a [provider.gitlab] section with its project (and token_env)",
        ),
        (
            '[provider.work_items]\nkind = "linear"\n',
            'provider.linear: missing, and provider.work_items.kind = "linear" needs it; '
            "expected a [provider.linear] section with its team (and token_env)",
        ),
        (
            '[provider.work_items]\nkind = "jira"\n[provider.revisions]\nkind = "local"\n',
            'provider.jira: missing, and provider.work_items.kind = "jira" needs it; expected '
            "a [provider.jira] section with its base_url, project and, on Cloud, email (and "
            "token_env)",
        ),
    ],
)
def test_a_system_named_without_its_section_is_refused_in_one_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert refusal(text, tmp_path) == expected


def test_an_unknown_kind_names_the_known_ones(tmp_path: Path) -> None:
    message = refusal('[provider.revisions]\nkind = "bitbucket"\n', tmp_path)
    assert message.startswith(
        "provider.revisions.kind: expected 'local', 'github', 'gitlab', 'linear' or 'jira'"
    )


def test_a_role_section_needs_its_kind(tmp_path: Path) -> None:
    assert refusal("[provider.work_items]\n", tmp_path) == "provider.work_items.kind: missing"


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ('[provider.linear]\nteam = "ENG"\nteem = "x"\n', "provider.linear.teem: unknown key"),
        (JIRA_CLOUD + 'projekt = "P"\n', "provider.jira.projekt: unknown key"),
        ('[provider.linear]\ntoken_env = "X"\n', "provider.linear.team: missing"),
    ],
)
def test_a_bad_linear_or_jira_section_names_its_key(tmp_path: Path, section: str, key: str) -> None:
    kind = "linear" if "linear" in section else "jira"
    text = f'[provider.work_items]\nkind = "{kind}"\n[provider.revisions]\nkind = "local"\n'
    assert key in refusal(text + section, tmp_path)


def test_a_bad_gitlab_section_names_its_key(tmp_path: Path) -> None:
    message = refusal('[provider]\nkind = "gitlab"\n[provider.gitlab]\nprojekt = "a/b"\n', tmp_path)
    assert "provider.gitlab.projekt: unknown key" in message
    assert "provider.gitlab.project: missing" in message
