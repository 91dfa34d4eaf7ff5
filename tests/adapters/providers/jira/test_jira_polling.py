"""Polling: an idle poll is one search, a change made by a person is seen on the next poll,
searches are paged as each deployment pages them, and a full sync now and then drops what no
search for changes reports (a deleted issue, one the JQL no longer selects)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from adapters.providers.jira.issue_index import jql_time, split_jql
from tests.fakes.jira import BOT, TEAMMATE, FakeJira
from tests.support.jira_provider import jira_provider


def searches(jira: FakeJira) -> list[str]:
    return [r.jql or "" for r in jira.requests if r.jql is not None]


def test_an_idle_poll_is_one_request(jira: FakeJira) -> None:
    for n in range(3):
        jira.open_issue(f"Issue {n}", "Text", by=BOT)
    with jira_provider(jira) as provider:
        reader = provider.work_item_reader
        assert len(reader.list_work_items()) == 3
        jira.clear_requests()
        before = provider.stats.requests
        assert len(reader.list_work_items()) == 3
        assert provider.stats.requests - before == 1
        assert len(jira.requests) == 1
        [jql] = searches(jira)
        assert jql.startswith('(project = PROJ) AND updated >= "')
        assert jql.endswith(" ORDER BY updated ASC")


def test_a_poll_after_a_person_s_change_is_one_request_and_sees_it(jira: FakeJira) -> None:
    key = jira.open_issue("Change me", "Text", by=BOT)
    with jira_provider(jira) as provider:
        reader = provider.work_item_reader
        [item] = reader.list_work_items()
        assert item.status == "pending"
        jira.advance(3600)  # an hour later: far past the minute of overlap
        jira.transition(key, "In Progress", by="alice")
        jira.add_label(key, "urgent", by="alice")
        jira.clear_requests()
        [item] = reader.list_work_items()
        assert (item.status, item.labels) == ("in-progress", ("urgent",))
        assert len(jira.requests) == 1


def test_the_bound_is_the_newest_update_less_a_minute_in_the_user_s_time_zone() -> None:
    moment = datetime(2026, 11, 29, 12, 30, 59, tzinfo=UTC)
    assert jql_time(moment, None) == "2026-11-29 12:30"
    assert jql_time(moment, ZoneInfo("Australia/Sydney")) == "2026-11-29 23:30"
    assert split_jql("labels = cpe order by created DESC") == (
        "labels = cpe",
        " order by created DESC",
    )
    assert split_jql("ORDER BY key") == ("", " ORDER BY key")
    assert split_jql('summary ~ "order by x" ORDER BY key') == (
        'summary ~ "order by x"',
        " ORDER BY key",
    )
    assert split_jql("summary ~ 'it\\'s order by' and x = 1") == (
        "summary ~ 'it\\'s order by' and x = 1",
        "",
    )


def test_a_new_issue_by_a_person_in_the_same_minute_is_not_missed(jira: FakeJira) -> None:
    jira.open_issue("First", by=BOT)
    with jira_provider(jira) as provider:
        reader = provider.work_item_reader
        assert [i.title for i in reader.list_work_items()] == ["First"]
        jira.open_issue("Second", by="alice")
        assert [i.title for i in reader.list_work_items()] == ["First", "Second"]


def test_searches_are_paged_as_each_deployment_pages_them(jira: FakeJira) -> None:
    keys = [jira.open_issue(f"Issue {n}", by=BOT) for n in range(5)]
    with jira_provider(jira, page_size=2) as provider:
        jira.clear_requests()
        items = provider.work_item_reader.list_work_items()
    assert [i.id for i in items] == keys
    pages = [r for r in jira.requests if r.jql is not None]
    assert len(pages) == 3
    if jira.deployment == "cloud":
        assert {r.path for r in pages} == {"/rest/api/3/search/jql"}
        assert "nextPageToken" not in pages[0].body
        assert all(isinstance(r.body.get("nextPageToken"), str) for r in pages[1:])
    else:
        assert {r.path for r in pages} == {"/rest/api/2/search"}
        assert [r.body["startAt"] for r in pages] == [0, 2, 4]


def test_a_full_sync_drops_deleted_issues_and_keeps_done_ones(jira: FakeJira) -> None:
    gone = jira.open_issue("Deleted later", by=BOT)
    done = jira.open_issue("Done later", by=BOT)
    kept = jira.open_issue("Kept", by=BOT)
    with jira_provider(jira, full_resync_cycles=2) as provider:
        reader = provider.work_item_reader
        assert len(reader.list_work_items()) == 3  # a full sync
        jira.delete_issue(gone)
        jira.transition(done, "Done", by="alice")
        assert {i.id: i.status for i in reader.list_work_items()} == {
            gone: "pending",  # no search for changes reports a deletion
            done: "done",
            kept: "pending",
        }
        assert {i.id: i.status for i in reader.list_work_items()} == {
            done: "done",
            kept: "pending",
        }
        full = searches(jira)[-1]
        assert full == "(project = PROJ) AND statusCategory != Done ORDER BY created ASC"


def test_an_issue_the_jql_no_longer_selects_drops_out_at_the_full_sync(jira: FakeJira) -> None:
    key = jira.open_issue("Tagged", by=BOT, labels=["cpe"])
    with jira_provider(jira, jql="labels = cpe", full_resync_cycles=2) as provider:
        reader = provider.work_item_reader
        assert [i.id for i in reader.list_work_items()] == [key]
        jira.remove_label(key, "cpe", by="alice")
        reader.list_work_items()
        assert reader.list_work_items() == []


def test_a_create_the_jql_leaves_out_is_still_found_by_its_key(jira: FakeJira) -> None:
    with jira_provider(jira, jql="project = PROJ AND labels = agent") as provider:
        writer = provider.work_item_writer
        made = writer.create_work_item("Unlabelled", "b", idempotency_key="plan:9:a")
        assert writer.create_work_item("Unlabelled", "b", idempotency_key="plan:9:a") == made
        assert provider.work_item_reader.list_work_items() == []  # not selected: not work
    assert jira.issue_keys() == [made]
    assert "project = PROJ AND created >= -7d ORDER BY created DESC" in searches(jira)


def test_a_create_a_jql_of_one_s_own_selects_is_listed_and_closed_as_done(jira: FakeJira) -> None:
    with jira_provider(
        jira, jql="project = PROJ AND labels = agent", required_labels=("agent",)
    ) as provider:
        made = provider.work_item_writer.create_work_item("Labelled", "b")
        provider.work_item_writer.close_work_item(made)
        [item] = provider.work_item_reader.list_work_items()
        assert (item.id, item.status, item.labels) == (made, "done", ("agent",))


def test_an_issue_search_shows_late_is_seen_once_it_shows_it(jira: FakeJira) -> None:
    first = jira.open_issue("Seen", by=BOT)
    with jira_provider(jira) as provider:
        reader = provider.work_item_reader
        assert [i.id for i in reader.list_work_items()] == [first]
        jira.lag_search()  # Jira's search is eventually consistent
        jira.advance(30)
        late = jira.open_issue("Indexed late", by=TEAMMATE)
        assert [i.id for i in reader.list_work_items()] == [first]
        jira.advance(30)
        jira.catch_up()
        assert [i.id for i in reader.list_work_items()] == [first, late]


def test_the_bound_is_written_in_the_time_zone_jira_reads_it_in(jira: FakeJira) -> None:
    # West of UTC: a bound written in UTC would be hours ahead, and miss every change.
    jira.site.user(BOT).time_zone = "America/Los_Angeles"
    key = jira.open_issue("Far west", by=BOT)
    with jira_provider(jira) as provider:
        reader = provider.work_item_reader
        assert [i.status for i in reader.list_work_items()] == ["pending"]
        seen = jira.site.issues[key].updated  # the newest update the provider has seen
        jira.advance(600)
        jira.transition(key, "In Progress", by=TEAMMATE)
        assert [i.status for i in reader.list_work_items()] == ["in-progress"]
    bound = searches(jira)[-1]
    newest = datetime.fromtimestamp(seen - 60, UTC)
    expected = newest.astimezone(ZoneInfo("America/Los_Angeles")).strftime("%Y-%m-%d %H:%M")
    assert f'updated >= "{expected}"' in bound
