"""The GitLab provider under failure: reads are retried (5xx, a dropped connection, 429)
honouring Retry-After; a wait longer than ``max_retry_wait`` is not slept but handed up; writes
are sent once, and an issue GitLab made before failing with a 502 (or before cpe was killed) is
found again by its key instead of being made twice (a kill at each crashpoint:
test_gitlab_crashes.py). The token is never in a message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.providers import ProviderRoles, markers
from adapters.providers.gitlab import GitLabProvider
from domain.errors import ConfigError, NotFoundError, ProviderError
from domain.models import WorkItemId
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.http import Fault
from tests.support.gitlab import TOKEN_ENV
from tests.support.gitlab_provider import Sleeps, gitlab_provider, settings_for

TRACKER = ProviderRoles(revisions=False)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def provider(fake_gitlab: FakeGitLab, sleeps: Sleeps) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab, sleeps, roles=TRACKER) as made:
        yield made


def titles(provider: GitLabProvider) -> list[str]:
    assert provider.work_item_reader is not None
    return [i.title for i in provider.work_item_reader.list_work_items()]


def posts(fake_gitlab: FakeGitLab, path_end: str) -> int:
    return sum(1 for r in fake_gitlab.requests if r.method == "POST" and r.path.endswith(path_end))


# ------------------------------------------------------------------ reads are retried


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_read_that_fails_with_5xx_is_retried(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, sleeps: Sleeps, status: int
) -> None:
    fake_gitlab.open_issue("Survives")
    fake_gitlab.fail(Fault("GET", r"/issues$", status, times=2))
    assert titles(provider) == ["Survives"]
    assert len(sleeps.waits) == 2


def test_a_read_whose_connection_drops_is_retried(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, sleeps: Sleeps
) -> None:
    fake_gitlab.open_issue("Survives")
    fake_gitlab.fail(Fault("GET", r"/issues$", 502, drop=True))
    assert titles(provider) == ["Survives"]
    assert len(sleeps.waits) == 1


def test_a_429_read_waits_as_long_as_retry_after_says(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, sleeps: Sleeps
) -> None:
    fake_gitlab.open_issue("Patient")
    fake_gitlab.fail(Fault("GET", r"/issues$", 429, retry_after=7, message="Retry later"))
    assert titles(provider) == ["Patient"]
    assert sleeps.waits == [7.0]
    assert provider.stats.rate_limited == 1


def test_a_429_asking_longer_than_max_retry_wait_is_handed_up_not_slept(
    fake_gitlab: FakeGitLab, sleeps: Sleeps
) -> None:
    with gitlab_provider(fake_gitlab, sleeps, roles=TRACKER, max_retry_wait=30) as provider:
        fake_gitlab.fail(Fault("GET", r"/issues$", 429, retry_after=3600, message="Retry later"))
        with pytest.raises(ProviderError) as raised:
            titles(provider)
    assert raised.value.transient
    assert raised.value.status == 429
    assert raised.value.retry_after == pytest.approx(3600)
    assert sleeps.waits == []


def test_a_read_that_keeps_failing_raises_a_transient_error_after_the_attempts(
    fake_gitlab: FakeGitLab, sleeps: Sleeps
) -> None:
    with gitlab_provider(fake_gitlab, sleeps, roles=TRACKER, read_attempts=3) as provider:
        fake_gitlab.fail(Fault("GET", r"/issues$", 503, times=10))
        with pytest.raises(ProviderError) as raised:
            titles(provider)
    assert raised.value.transient
    assert raised.value.status == 503
    assert len(sleeps.waits) == 2


def test_a_missing_issue_is_not_found_and_not_retried(
    provider: GitLabProvider, sleeps: Sleeps
) -> None:
    assert provider.work_item_reader is not None
    with pytest.raises(NotFoundError):
        provider.work_item_reader.get_work_item_body(WorkItemId("77"))
    assert sleeps.waits == []


# ------------------------------------------------------------------ credentials


def test_a_missing_token_variable_is_a_configuration_error_naming_it(
    fake_gitlab: FakeGitLab,
) -> None:
    with pytest.raises(ConfigError, match=f"environment variable {TOKEN_ENV} is not set"):
        GitLabProvider(settings_for(fake_gitlab), environ={})


def test_a_refused_token_stops_the_start_naming_its_variable_and_never_quoting_it(
    fake_gitlab: FakeGitLab,
) -> None:
    secret = "glpat-not-a-token-the-fake-knows"
    with pytest.raises(ConfigError) as raised:
        GitLabProvider(settings_for(fake_gitlab), environ={TOKEN_ENV: secret})
    assert raised.value.key_path == "provider.gitlab.token_env"
    assert str(raised.value).startswith(
        f"provider.gitlab.token_env: GitLab at {fake_gitlab.base_url} refused the token in "
        f"{TOKEN_ENV} (401 Unauthorized); expected a valid personal, project or group access "
        "token"
    )
    assert secret not in str(raised.value)


def test_a_project_gitlab_does_not_show_stops_the_start_naming_it(
    fake_gitlab: FakeGitLab,
) -> None:
    settings = settings_for(fake_gitlab, project="acme/no-such-project")
    with pytest.raises(ConfigError) as raised:
        GitLabProvider(settings, environ={TOKEN_ENV: "test-token"})
    assert raised.value.key_path == "provider.gitlab.project"
    assert (
        f"GitLab at {fake_gitlab.base_url} shows no project acme/no-such-project: it does not "
        "exist, or the token's user may not see it"
    ) in str(raised.value)


def test_a_gitlab_failing_at_start_is_a_transient_error_naming_the_instance(
    fake_gitlab: FakeGitLab, sleeps: Sleeps
) -> None:
    fake_gitlab.fail(Fault("GET", r"/projects/[^/]+$", 503, times=100))
    with pytest.raises(ProviderError) as raised:
        GitLabProvider(settings_for(fake_gitlab), environ={TOKEN_ENV: "test-token"}, sleep=sleeps)
    assert (raised.value.transient, raised.value.status) == (True, 503)
    assert str(raised.value).startswith(
        f"GitLab at {fake_gitlab.base_url}: get project {fake_gitlab.project_path}:"
    )
    assert str(raised.value).count("(status 503)") == 1
    assert sleeps.waits  # read again before giving up


def test_the_token_goes_to_the_instance_only_as_private_token(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    titles(provider)
    assert fake_gitlab.requests
    assert all(r.query.find("private_token") < 0 for r in fake_gitlab.requests)
    assert {r.token for r in fake_gitlab.requests} == {"test-token"}


# ------------------------------------------------------------------ writes are sent once


def test_a_write_that_fails_is_not_retried(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, sleeps: Sleeps
) -> None:
    fake_gitlab.fail(Fault("POST", r"/issues$", 502))
    assert provider.work_item_writer is not None
    with pytest.raises(ProviderError) as raised:
        provider.work_item_writer.create_work_item("Once", "b")
    assert raised.value.transient
    assert posts(fake_gitlab, "/issues") == 1
    assert fake_gitlab.issues == {}


def test_an_issue_made_before_a_502_is_found_not_made_again(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    fake_gitlab.fail(Fault("POST", r"/issues$", 502, apply_first=True))
    writer = provider.work_item_writer
    assert writer is not None
    made = writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
    again = writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
    assert made == again
    assert [i.title for i in fake_gitlab.issues.values()] == ["Once"]
    assert posts(fake_gitlab, "/issues") == 1


def test_a_key_unseen_after_a_failed_create_raises_the_failure(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    fake_gitlab.fail(Fault("POST", r"/issues$", 502))
    writer = provider.work_item_writer
    assert writer is not None
    with pytest.raises(ProviderError):
        writer.create_work_item("Once", "b", idempotency_key="plan:1:b")
    assert writer.create_work_item("Once", "b", idempotency_key="plan:1:b")
    assert len(fake_gitlab.issues) == 1


def test_an_issue_found_again_by_its_key_gets_the_labels_it_lacked(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    """Made before a crash, before cpe labelled it: the retried create finds and finishes it."""
    writer = provider.work_item_writer
    assert writer is not None
    key = "plan:1:second"
    iid = fake_gitlab.open_issue("Second", markers.issue_body("b", [], key), author="cpe-bot")
    again = writer.create_work_item("Second", "b", ("feature",), idempotency_key=key)
    assert again == str(iid)
    assert sorted(fake_gitlab.issues[iid].labels) == ["feature", "status::pending"]
    fake_gitlab.clear_requests()
    writer.create_work_item("Second", "b", ("feature",), idempotency_key=key)
    assert [r.method for r in fake_gitlab.requests if r.method != "GET"] == []


def test_nothing_is_sent_to_a_host_other_than_the_instance(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    """python-gitlab puts the token on the request itself, which a redirect would carry to
    another host: the session refuses every URL outside ``base_url`` before connecting."""
    elsewhere = fake_gitlab.base_url.replace("127.0.0.1", "localhost") + "/api/v4/user"
    before = len(fake_gitlab.requests)
    with (
        pytest.raises(ProviderError, match="cpe sends nothing to localhost") as raised,
        provider.api.translated("read elsewhere"),
    ):
        provider.api.gl.http_get(elsewhere)
    assert not raised.value.transient
    assert len(fake_gitlab.requests) == before  # the fake, on the same port, saw nothing
