"""``[provider.jira]`` as ``JiraSettings`` checks it (pure: no Jira needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from adapters.providers.jira.settings import JiraSettings

CLOUD = "https://acme.atlassian.net"


def test_loading_the_settings_imports_no_http_client_nor_the_provider() -> None:
    code = (
        "import sys\n"
        "from adapters.providers.jira import JiraSettings\n"
        "JiraSettings(base_url='https://jira.example.org', project='PROJ')\n"
        "names = ('httpx', 'adapters.providers.jira.provider')\n"
        "print(sorted(m for m in names if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_deployment_is_cloud_by_the_atlassian_host_else_data_center() -> None:
    cloud = JiraSettings(base_url=CLOUD + "/", project="PROJ", email="bot@acme.dev")
    assert cloud.base_url == CLOUD
    assert cloud.is_cloud
    assert cloud.api_version == "3"
    assert cloud.token_env == "JIRA_API_TOKEN"
    dc = JiraSettings(base_url="https://jira.acme.dev/jira", project="PROJ")
    assert not dc.is_cloud
    assert dc.api_version == "2"
    forced = JiraSettings(
        base_url="http://127.0.0.1:8080", project="P", deployment="cloud", email="a@b"
    )
    assert forced.is_cloud


def test_the_default_jql_is_the_project_oldest_first_and_a_given_one_is_sent_as_written() -> None:
    assert JiraSettings(base_url="https://j.example", project="ABC").search_jql == (
        "project = ABC ORDER BY created ASC"
    )
    given = JiraSettings(base_url="https://j.example", project="ABC", jql=" labels = cpe ")
    assert given.search_jql == "labels = cpe"
    with pytest.raises(ValidationError, match="jql is empty"):
        JiraSettings(base_url="https://j.example", project="ABC", jql="  ")


def test_cloud_needs_the_token_s_e_mail() -> None:
    with pytest.raises(ValidationError, match="email is required on Jira Cloud"):
        JiraSettings(base_url=CLOUD, project="PROJ")
    with pytest.raises(ValidationError, match="not an e-mail address"):
        JiraSettings(base_url=CLOUD, project="PROJ", email="bot")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("acme.atlassian.net", "not a Jira site's URL"),
        ("ftp://acme.atlassian.net", "not a Jira site's URL"),
        ("https://acme.atlassian.net/rest/api/3", "names the API"),
        ("https://jira.acme.dev/?x=1", "no query"),
    ],
)
def test_a_base_url_that_is_no_site_is_refused(url: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        JiraSettings(base_url=url, project="PROJ", email="a@b")


@pytest.mark.parametrize("key", ["proj", "1AB", "PR-1", ""])
def test_a_project_that_is_no_key_is_refused(key: str) -> None:
    with pytest.raises(ValidationError, match="project"):
        JiraSettings(base_url="https://j.example", project=key)


def test_labels_are_single_words_and_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError, match="one word"):
        JiraSettings(base_url="https://j.example", project="P", admit_label="cpe admit")
    with pytest.raises(ValidationError, match="required_labels"):
        JiraSettings(base_url="https://j.example", project="P", required_labels=("a b",))
    with pytest.raises(ValidationError, match="team"):
        JiraSettings(base_url="https://j.example", project="P", team="x")  # type: ignore[call-arg]
    assert JiraSettings(base_url="https://j.example", project="P", admit_label="").admit_label == ""


def test_a_status_mapping_names_each_jira_status_once() -> None:
    settings = JiraSettings(
        base_url="https://j.example", project="P", statuses={"in-review": " Peer Review "}
    )
    assert settings.status_name("in-review") == "Peer Review"
    assert settings.status_name("pending") is None
    with pytest.raises(ValidationError, match="same Jira status"):
        JiraSettings(
            base_url="https://j.example",
            project="P",
            statuses={"in-review": "Review", "approved": "review"},
        )
    with pytest.raises(ValidationError, match="statuses"):
        JiraSettings(base_url="https://j.example", project="P", statuses={"doing": "X"})  # type: ignore[dict-item]


def test_a_trusted_permission_is_a_permission_key_or_none() -> None:
    assert (
        JiraSettings(base_url="https://j.example", project="P").trusted_permission == "EDIT_ISSUES"
    )
    assert (
        JiraSettings(
            base_url="https://j.example", project="P", trusted_permission=None
        ).trusted_permission
        is None
    )
    assert (
        JiraSettings(
            base_url="https://j.example", project="P", trusted_permission=" "
        ).trusted_permission
        is None
    )
    with pytest.raises(ValidationError, match="not a Jira project permission key"):
        JiraSettings(base_url="https://j.example", project="P", trusted_permission="edit issues")
