"""``[provider.gitlab]`` as ``GitLabSettings`` checks it, the status labels it names, and the
GitLab answers the provider translates (pure parts: no GitLab needed)."""

from __future__ import annotations

import socket
import subprocess
import sys
from email.utils import formatdate

import pytest
import requests
from gitlab.exceptions import GitlabCreateError, GitlabGetError, GitlabHttpError
from pydantic import ValidationError

from adapters.providers.gitlab.errors import translate
from adapters.providers.gitlab.labels import StatusLabels
from adapters.providers.gitlab.settings import GitLabSettings
from adapters.providers.gitlab.transport import rate_limit_wait
from domain.errors import ConflictError, NotFoundError, ProviderError

STATUS_MAP = {
    "pending": "workflow::todo",
    "in-progress": "workflow::doing",
    "in-review": "workflow::review",
    "needs-refinement": "workflow::rework",
    "approved": "workflow::approved",
    "blocked": "workflow::blocked",
}


def test_loading_the_settings_does_not_import_python_gitlab() -> None:
    code = (
        "import sys\n"
        "from adapters.providers.gitlab import GitLabSettings\n"
        "GitLabSettings(project='acme/widgets')\n"
        "print('gitlab' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_defaults_are_gitlab_com_the_token_variable_and_scoped_status_labels() -> None:
    settings = GitLabSettings(project="acme/tools/widgets")
    assert settings.base_url == "https://gitlab.com"
    assert settings.token_env == "GITLAB_TOKEN"
    assert settings.status_label("in-review") == "status::in-review"
    assert settings.trusted_level == 30  # developer
    assert settings.blockers == "auto"


@pytest.mark.parametrize("project", ["widgets", "/acme/widgets", "acme/", "acme widgets/x"])
def test_a_project_that_is_no_full_path_is_refused(project: str) -> None:
    with pytest.raises(ValidationError, match="project"):
        GitLabSettings(project=project)


def test_a_self_managed_instance_is_its_base_url_without_the_api_path() -> None:
    settings = GitLabSettings(project="a/b", base_url="https://git.example.org/gitlab/")
    assert settings.base_url == "https://git.example.org/gitlab"
    with pytest.raises(ValidationError, match="without /api/v4"):
        GitLabSettings(project="a/b", base_url="https://git.example.org/api/v4")
    with pytest.raises(ValidationError, match="expected https://host"):
        GitLabSettings(project="a/b", base_url="git.example.org")


def test_an_unknown_key_or_access_level_is_refused() -> None:
    with pytest.raises(ValidationError, match="repository"):
        GitLabSettings(project="a/b", repository="a/b")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="trusted_access_level"):
        GitLabSettings(project="a/b", trusted_access_level="guest")  # type: ignore[arg-type]


def test_a_status_label_mapping_must_name_every_status_but_done_once() -> None:
    settings = GitLabSettings(project="a/b", status_labels=STATUS_MAP)
    assert settings.status_label("blocked") == "workflow::blocked"
    partial = {k: v for k, v in STATUS_MAP.items() if k != "approved"}
    with pytest.raises(ValidationError, match="no label for approved"):
        GitLabSettings(project="a/b", status_labels=partial)
    with pytest.raises(ValidationError, match="done is a closed issue"):
        GitLabSettings(project="a/b", status_labels={**STATUS_MAP, "done": "workflow::done"})
    with pytest.raises(ValidationError, match="same label"):
        GitLabSettings(project="a/b", status_labels={**STATUS_MAP, "blocked": "Workflow::Todo"})
    with pytest.raises(ValidationError, match="status_labels"):
        GitLabSettings(project="a/b", status_labels={**STATUS_MAP, "todo": "x"})  # type: ignore[dict-item]


def test_a_status_is_read_from_its_scoped_label_and_done_from_a_closed_issue() -> None:
    labels = StatusLabels(GitLabSettings(project="a/b"))
    assert labels.status_of(["bug", "Status::In-Review "], closed=False) == "in-review"
    assert labels.status_of(["bug"], closed=False) == "pending"
    assert labels.status_of(["status::blocked"], closed=True) == "done"
    # Any label of the scope is the engine's: replaced when the status changes.
    assert labels.others(["bug", "status::typo", "status::approved"]) == ["bug"]


def test_with_a_mapping_only_the_mapped_labels_are_statuses() -> None:
    labels = StatusLabels(GitLabSettings(project="a/b", status_labels=STATUS_MAP))
    assert labels.status_of(["workflow::review"], closed=False) == "in-review"
    assert labels.others(["status::pending", "workflow::doing", "bug"]) == [
        "status::pending",
        "bug",
    ]


NOW = 1_800_000_000.0


def test_a_429_waits_as_retry_after_says_in_seconds_or_as_a_date() -> None:
    assert rate_limit_wait({"retry-after": "17"}, NOW, 1.0) == 17.0
    date = formatdate(NOW + 30, usegmt=True)
    assert rate_limit_wait({"retry-after": date}, NOW, 1.0) == 30.0


def test_without_retry_after_a_429_waits_for_the_rate_limit_reset() -> None:
    assert rate_limit_wait({"ratelimit-reset": str(int(NOW) + 40)}, NOW, 1.0) == 41.0
    reset_time = formatdate(NOW + 10, usegmt=True)
    assert rate_limit_wait({"ratelimit-resettime": reset_time}, NOW, 1.0) == 11.0
    assert rate_limit_wait({}, NOW, 2.5) == 2.5


def _http_error(kind: type[Exception], status: int, message: object) -> Exception:
    return kind(error_message=message, response_code=status, response_body=b"")  # type: ignore[call-arg]


def test_gitlab_refusals_become_domain_errors_in_gitlabs_words() -> None:
    missing = translate(_http_error(GitlabGetError, 404, "404 Project Not Found"), "get project")
    assert isinstance(missing, NotFoundError)
    assert str(missing) == "get project: Project Not Found (status 404)"
    conflict = translate(_http_error(GitlabCreateError, 409, "Label already exists"), "create")
    assert isinstance(conflict, ConflictError)
    invalid = translate(
        _http_error(GitlabCreateError, 400, {"title": ["can't be blank"]}), "create issue"
    )
    assert str(invalid) == "create issue: title: can't be blank (status 400)"
    assert not invalid.transient


def test_a_429_is_transient_with_the_wait_the_transport_judged_and_a_5xx_transient() -> None:
    limited = translate(_http_error(GitlabHttpError, 429, "Retry later"), "list", retry_after=9)
    assert limited.transient
    assert limited.retry_after == 9
    assert translate(_http_error(GitlabHttpError, 502, "Bad Gateway"), "list").transient
    forbidden = translate(_http_error(GitlabHttpError, 403, "403 Forbidden"), "list")
    assert isinstance(forbidden, ProviderError)
    assert not forbidden.transient


def test_no_translated_message_holds_the_token() -> None:
    token = "glpat-very-secret"
    failed = translate(
        _http_error(GitlabHttpError, 401, f"token {token} revoked"), "list", secrets=[token]
    )
    assert token not in str(failed)
    assert "***" in str(failed)


def test_an_unreachable_gitlab_is_named_by_its_address_never_its_path() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    with pytest.raises(requests.ConnectionError) as refused:
        requests.get(f"http://127.0.0.1:{port}/api/v4/projects/1?private_token=t0k3n", timeout=5)
    error = translate(refused.value, "list issues")
    assert (
        str(error)
        == f"list issues: cannot reach GitLab at http://127.0.0.1:{port}: ConnectionError"
    )
    assert error.transient
