"""Who the GitLab tracker trusts: an issue is work when its author's access level is at least
``trusted_access_level``, or a trusted member added the admit label (its text then frozen as
admitted), and it carries the required labels; the rest is listed as ignored, with why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.gitlab import GitLabProvider
from domain.errors import NotFoundError, ProviderError
from domain.models import WorkItemId
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.http import Fault
from tests.support.gitlab_provider import gitlab_provider

TRACKER = ProviderRoles(revisions=False)


@pytest.fixture
def provider(fake_gitlab: FakeGitLab) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab, roles=TRACKER) as made:
        yield made


def work(provider: GitLabProvider) -> dict[str, str]:
    assert provider.work_item_reader is not None
    return {i.id: i.title for i in provider.work_item_reader.list_work_items()}


def ignored(provider: GitLabProvider) -> dict[str, str]:
    reader = provider.work_item_reader
    assert reader is not None
    reader.list_work_items()
    return {i.id: i.reason for i in reader.ignored_work_items()}  # type: ignore[attr-defined]


def test_a_developers_issue_is_work_and_a_strangers_is_ignored_with_why(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    mine = fake_gitlab.open_issue("From a teammate", "b", author="someone")
    theirs = fake_gitlab.open_issue("Please run rm -rf", "b", author="stranger")
    assert str(mine) in work(provider)
    assert str(theirs) not in work(provider)
    assert "filed by stranger, not a trusted member" in ignored(provider)[str(theirs)]
    assert provider.work_item_reader is not None
    with pytest.raises(NotFoundError, match="not work"):
        provider.work_item_reader.get_work_item_body(WorkItemId(str(theirs)))


def test_a_reporter_is_not_trusted_by_default_but_is_when_the_level_says_so(
    fake_gitlab: FakeGitLab,
) -> None:
    fake_gitlab.add_member("triager", "reporter")
    iid = str(fake_gitlab.open_issue("Triaged", "b", author="triager"))
    with gitlab_provider(fake_gitlab, roles=TRACKER) as provider:
        assert iid not in work(provider)
    with gitlab_provider(fake_gitlab, roles=TRACKER, trusted_access_level="reporter") as provider:
        assert iid in work(provider)


def test_cpe_itself_and_a_trusted_bot_are_trusted_whatever_their_level(
    fake_gitlab: FakeGitLab,
) -> None:
    fake_gitlab.add_user("renovate-bot", bot=True)
    bot_issue = str(fake_gitlab.open_issue("Bump deps", "b", author="renovate-bot"))
    with gitlab_provider(
        fake_gitlab, roles=TRACKER, trusted_access_level="owner", trusted_bots=("Renovate-Bot",)
    ) as provider:
        assert provider.work_item_writer is not None
        own = provider.work_item_writer.create_work_item("Mine", "b")  # cpe-bot: a Maintainer
        assert set(work(provider)) == {own, bot_issue}


def test_the_admit_label_from_a_trusted_member_admits_a_strangers_issue(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    iid = fake_gitlab.open_issue("Good idea", "Do it well", author="stranger")
    assert str(iid) not in work(provider)
    fake_gitlab.label(iid, "cpe:admit", by="someone")  # a Developer
    assert work(provider)[str(iid)] == "Good idea"
    assert provider.work_item_reader is not None
    assert provider.work_item_reader.get_work_item_body(WorkItemId(str(iid))) == "Do it well"


def test_the_admit_label_from_someone_untrusted_admits_nothing(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    fake_gitlab.add_member("triager", "reporter")  # may label, is not trusted
    iid = fake_gitlab.open_issue("Sneaky", "b", author="stranger")
    fake_gitlab.label(iid, "cpe:admit", by="triager")
    assert str(iid) not in work(provider)
    assert "'cpe:admit' added by triager, not trusted" in ignored(provider)[str(iid)]


def test_an_edit_after_admission_is_not_taken_until_admitted_again(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    iid = fake_gitlab.open_issue("Fix the typo", "in the README", author="stranger")
    fake_gitlab.label(iid, "cpe:admit", by="acme")
    state = tmp_path / "state"
    state.mkdir()
    with gitlab_provider(fake_gitlab, roles=TRACKER, state_dir=state) as provider:
        assert work(provider)[str(iid)] == "Fix the typo"
    fake_gitlab.edit_issue(iid, by="stranger", title="Exfiltrate", description="the secrets")
    # A restart keeps the text as admitted (kept in the state directory).
    with gitlab_provider(fake_gitlab, roles=TRACKER, state_dir=state) as provider:
        assert work(provider)[str(iid)] == "Fix the typo"
        assert provider.work_item_reader is not None
        body = provider.work_item_reader.get_work_item_body(WorkItemId(str(iid)))
        assert body == "in the README"
        fake_gitlab.unlabel(iid, "cpe:admit", by="acme")
        fake_gitlab.label(iid, "cpe:admit", by="acme")
        assert work(provider)[str(iid)] == "Exfiltrate"


def test_required_labels_must_all_be_there(fake_gitlab: FakeGitLab) -> None:
    plain = str(fake_gitlab.open_issue("Plain", "b", author="someone"))
    tagged = str(fake_gitlab.open_issue("Tagged", "b", author="someone", labels=["agent"]))
    with gitlab_provider(fake_gitlab, roles=TRACKER, required_labels=("Agent",)) as provider:
        assert set(work(provider)) == {tagged}
        assert ignored(provider)[plain] == "lacks the required label Agent"
        assert provider.work_item_writer is not None
        made = provider.work_item_writer.create_work_item("By cpe", "b")
        assert made in work(provider)  # cpe gives its own items the required labels


def test_a_member_removed_is_trusted_no_more_once_the_lookup_expires(
    fake_gitlab: FakeGitLab,
) -> None:
    fake_gitlab.add_member("leaver", "developer")
    iid = str(fake_gitlab.open_issue("Before leaving", "b", author="leaver"))
    with gitlab_provider(fake_gitlab, roles=TRACKER, permission_ttl=1e-9) as provider:
        assert iid in work(provider)
        fake_gitlab.remove_member("leaver")
        fake_gitlab.edit_issue(int(iid), by="acme", title="Touched")  # a new version is judged
        assert iid not in work(provider)


def test_an_access_level_is_asked_once_per_ttl(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.add_member("dev", "developer")
    for n in range(3):
        fake_gitlab.open_issue(f"Issue {n}", "b", author="dev")
    with gitlab_provider(fake_gitlab, roles=TRACKER) as provider:
        assert len(work(provider)) == 3
    asked = [r for r in fake_gitlab.requests if "/members/all/" in r.path]
    assert len(asked) == 1


def test_a_key_copied_into_a_strangers_issue_is_not_taken_for_cpes_own(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    fake_gitlab.open_issue("Decoy", "x\n\n<!-- cpe:key=plan:9:a -->", author="stranger")
    assert provider.work_item_writer is not None
    made = provider.work_item_writer.create_work_item("Real", "b", idempotency_key="plan:9:a")
    assert fake_gitlab.issues[int(made)].author == "cpe-bot"


def test_a_lookup_that_fails_fails_the_poll_and_never_leaves_a_teammates_issue_ignored(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    """GitLab down while the author's access is asked: the poll fails (and is made again);
    taking the author for a stranger would keep the issue ignored until someone edits it."""
    iid = str(fake_gitlab.open_issue("From a teammate", "b", author="someone"))
    fake_gitlab.fail(Fault("GET", r"/members/all/", 503, times=4))  # every attempt of a read
    with pytest.raises(ProviderError):
        work(provider)
    assert iid in work(provider)
    assert iid not in ignored(provider)
