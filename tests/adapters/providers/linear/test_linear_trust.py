"""Whose Linear issues are work: the team's members who are not guests, cpe's own user and
``trusted_users``; anyone else's only once such a person adds ``admit_label`` (the issue's
history says who), and then as it was when admitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.providers.linear import LinearProvider
from domain.errors import NotFoundError, ProviderError
from domain.models import WorkItemId
from tests.fakes.linear.fake import GUEST, OUTSIDER, FakeLinear
from tests.support.linear_provider import linear_provider, with_cpe_states


@pytest.fixture
def linear(fake_linear: FakeLinear) -> FakeLinear:
    return with_cpe_states(fake_linear)


def work(provider: LinearProvider) -> list[str]:
    assert provider.work_item_reader is not None
    return [i.id for i in provider.work_item_reader.list_work_items()]


def ignored(provider: LinearProvider) -> dict[str, str]:
    reader = provider.work_item_reader
    return {i.id: i.reason for i in reader.ignored_work_items()}  # type: ignore[union-attr]


def test_a_member_s_issue_is_work_and_a_guest_s_or_an_outsider_s_is_not(
    linear: FakeLinear,
) -> None:
    mine = linear.open_issue("By a teammate")
    theirs = linear.open_issue("By a guest", as_user=GUEST)
    outside = linear.open_issue("By someone outside the team", as_user=OUTSIDER)
    why = (
        "not trusted (trusted: the members of team ENG, not its guests; or one of them adding "
        "'cpe:admit')"
    )
    with linear_provider(linear) as provider:
        assert work(provider) == [mine]
        # What cpe status says: the same for both, and not "guests are not trusted" of
        # someone who is no guest (the reason said so before).
        assert ignored(provider) == {
            theirs: f"filed by guest@example.com, {why}",
            outside: f"filed by outsider@example.com, {why}",
        }
        assert provider.work_item_reader is not None
        with pytest.raises(NotFoundError, match="not work"):
            provider.work_item_reader.get_work_item_body(WorkItemId(theirs))
    with linear_provider(linear, trust_guests=True, trusted_users=("x@example.com",)) as provider:
        assert work(provider) == [mine, theirs]
        assert ignored(provider) == {
            outside: "filed by outsider@example.com, not trusted (trusted: the members of team "
            "ENG, guests too, and trusted_users; or one of them adding 'cpe:admit')"
        }


def test_guests_and_listed_users_are_trusted_when_the_settings_say(linear: FakeLinear) -> None:
    theirs = linear.open_issue("By a guest", as_user=GUEST)
    with linear_provider(linear, trust_guests=True) as provider:
        assert work(provider) == [theirs]
    with linear_provider(linear, trusted_users=("Guest@Example.com",)) as provider:
        assert work(provider) == [theirs]


def test_someone_who_left_the_team_is_not_trusted_after_the_ttl(linear: FakeLinear) -> None:
    now = [1000.0]
    linear.add_user("Lee Leaver", "lee@example.com")
    theirs = linear.open_issue("By Lee", as_user="lee@example.com")
    with linear_provider(linear, permission_ttl=60) as provider:
        provider.trust._clock = lambda: now[0]  # the membership cache's clock
        assert work(provider) == [theirs]
        linear.leave("lee@example.com")
        linear.edit(theirs, description="new version", by="someone@example.com")
        assert work(provider) == [theirs]  # the members as read a moment ago
        now[0] += 61
        linear.edit(theirs, description="newer version", by="someone@example.com")
        assert work(provider) == []


def test_the_admit_label_added_by_a_member_admits_and_freezes_the_text(
    linear: FakeLinear, tmp_path: Path
) -> None:
    theirs = linear.open_issue("By a guest", "Do this", as_user=GUEST)
    linear.add_label(theirs, "cpe:admit", by=GUEST)
    with linear_provider(linear, state_dir=tmp_path) as provider:
        assert work(provider) == []
        assert "'cpe:admit' added by guest@example.com, not trusted" in ignored(provider)[theirs]
        linear.remove_label(theirs, "cpe:admit", by=GUEST)
        linear.add_label(theirs, "cpe:admit")  # a teammate admits it
        assert work(provider) == [theirs]
        linear.edit(theirs, title="Changed", description="Do that instead", by=GUEST)
        assert provider.work_item_reader is not None
        [item] = provider.work_item_reader.list_work_items()
        assert item.title == "By a guest"
        assert provider.work_item_reader.get_work_item_body(WorkItemId(theirs)) == "Do this"
    with linear_provider(linear, state_dir=tmp_path) as provider:  # a restart keeps the text
        assert provider.work_item_reader is not None
        assert provider.work_item_reader.get_work_item_body(WorkItemId(theirs)) == "Do this"


def test_required_labels_leave_out_issues_without_them(linear: FakeLinear) -> None:
    with_label = linear.open_issue("Labelled", labels=["agents"])
    linear.open_issue("Plain")
    with linear_provider(linear, required_labels=("agents",)) as provider:
        assert work(provider) == [with_label]
        assert provider.work_item_writer is not None
        made = provider.work_item_writer.create_work_item("Made", "b")
        assert linear.issue(made)["labels"] == ["agents"]


def test_someone_no_longer_in_the_team_is_not_trusted(linear: FakeLinear) -> None:
    linear.join(OUTSIDER)
    theirs = linear.open_issue("By the outsider", as_user=OUTSIDER)
    linear.leave(OUTSIDER)
    with linear_provider(linear) as provider:
        assert work(provider) == []
        assert theirs in ignored(provider)


def test_a_reload_takes_new_trust_settings(linear: FakeLinear) -> None:
    theirs = linear.open_issue("By a guest", as_user=GUEST)
    with linear_provider(linear) as provider:
        assert work(provider) == []
        provider.trust.configure(provider.settings.model_copy(update={"trust_guests": True}))
        assert work(provider) == [theirs]


def test_linear_failing_to_list_the_members_fails_the_poll_not_the_issue(
    linear: FakeLinear,
) -> None:
    mine = linear.open_issue("By a teammate")
    with linear_provider(linear, read_attempts=1) as provider:
        linear.fail_operation("CpeTeamMembers", 502)
        assert provider.work_item_reader is not None
        with pytest.raises(ProviderError) as caught:
            provider.work_item_reader.list_work_items()
        assert caught.value.transient
        assert work(provider) == [mine]  # judged again, not remembered as untrusted
