"""The fake Jira's JQL search as Jira answers it: the clauses the provider sends, dates read in
the searcher's time zone at minute precision, pages by token (Cloud) or offset (Data Center),
and Jira's 400 for what it does not parse or what does not exist."""

from __future__ import annotations

import pytest

from tests.fakes.jira import FakeJira
from tests.support.jira import jira_client, running_jira


def keys(answer: dict[str, object]) -> list[str]:
    return [i["key"] for i in answer["issues"]]  # type: ignore[attr-defined,index]


def search(jira: FakeJira, jql: str, **more: object) -> dict[str, object]:
    with jira_client(jira) as api:
        answer = api.post("/search/jql", json={"jql": jql, "fields": ["key"], **more})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def refusal(jira: FakeJira, jql: str) -> list[str]:
    with jira_client(jira) as api:
        answer = api.get("/search/jql", params={"jql": jql})
    assert answer.status_code == 400
    return answer.json()["errorMessages"]  # type: ignore[no-any-return]


def test_the_clauses_the_provider_sends(fake_jira: FakeJira) -> None:
    one = fake_jira.open_issue("One", labels=["cpe-admit"])
    two = fake_jira.open_issue("Two")
    three = fake_jira.open_issue("Three", labels=["cpe-admit", "x"])
    fake_jira.transition(two, "In Progress")
    assert keys(search(fake_jira, "project = PROJ ORDER BY key ASC")) == [one, two, three]
    assert keys(search(fake_jira, "project = proj ORDER BY created DESC")) == [three, two, one]
    assert keys(search(fake_jira, "labels = cpe-admit ORDER BY key")) == [one, three]
    assert keys(search(fake_jira, f"key in ({one}, {three}) ORDER BY key DESC")) == [three, one]
    assert keys(search(fake_jira, 'status = "In Progress"')) == [two]
    assert keys(search(fake_jira, "statusCategory = new ORDER BY key")) == [one, three]
    jql = 'project = PROJ AND (labels = x OR status = "In Progress") ORDER BY key'
    assert keys(search(fake_jira, jql)) == [two, three]
    assert keys(search(fake_jira, "project = PROJ AND labels is EMPTY")) == [two]
    assert keys(search(fake_jira, "project = PROJ AND labels not in (x) ORDER BY key")) == [
        one,
        two,
    ]


def test_updated_is_read_to_the_minute_in_both_of_jiras_formats(fake_jira: FakeJira) -> None:
    early = fake_jira.open_issue("Early")  # 2026-01-01 00:00:01 UTC
    fake_jira.advance(150)
    late = fake_jira.open_issue("Late")  # 00:02:32
    assert keys(search(fake_jira, 'updated >= "2026-01-01 00:02" ORDER BY key')) == [late]
    assert keys(search(fake_jira, 'updated >= "2026/01/01 00:00" ORDER BY key')) == [early, late]
    assert keys(search(fake_jira, 'updated >= "2026-01-01" AND updated < "2026-01-01 00:01"')) == [
        early
    ]
    fake_jira.add_label(early, "again")
    assert keys(search(fake_jira, 'updated >= "2026-01-01 00:02" ORDER BY updated')) == [
        late,
        early,
    ]


def test_dates_are_read_and_written_in_the_searchers_time_zone() -> None:
    with running_jira(tokens={"test-token": "berlin"}) as jira:
        jira.add_to_group("berlin", "jira-software-users")
        jira.site.users["berlin"].time_zone = "Europe/Berlin"
        key = jira.open_issue("Work")  # 2026-01-01 00:00:01 UTC: 01:00:01 in Berlin
        assert keys(search(jira, 'updated >= "2026-01-01 01:00"')) == [key]
        assert keys(search(jira, 'updated >= "2026-01-01 01:01"')) == []
        with jira_client(jira) as api:
            issue = api.get(f"/issue/{key}", params={"fields": "updated"}).json()
        assert issue["fields"]["updated"] == "2026-01-01T01:00:01.000+0100"


def test_relative_dates_count_back_from_now(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work")
    fake_jira.advance(3600)
    assert keys(search(fake_jira, "updated >= -2h")) == [key]
    assert keys(search(fake_jira, 'updated >= "-30m"')) == []


@pytest.mark.parametrize(
    ("jql", "message"),
    [
        ("order by key", "Unbounded JQL queries are not allowed here."),
        ("project = PROJ AND", "Expecting a field name but got 'EOF'"),
        ("labels = foo bar", "Expecting either 'OR' or 'AND' but got 'bar'"),
        ("assignee = currentUser()", "The fake Jira does not search by 'assignee'"),
        ("flavour = sweet", "Field 'flavour' does not exist or you do not have permission"),
        ("labels = currentUser()", "knows no JQL function 'currentUser()'"),
        ("project = OTHER", "The value 'OTHER' does not exist for the field 'project'."),
        ('status = "Nope"', "The value 'Nope' does not exist for the field 'status'."),
        ("key = PROJ-99", "An issue with key 'PROJ-99' does not exist for field 'key'."),
        ("key in (nonsense)", "The issue key 'nonsense' for field 'key' is invalid."),
        ('updated >= "29/11/2026"', "Date value '29/11/2026' for field 'updated' is invalid."),
        ("labels >= x", "The operator '>=' is not supported by the 'labels' field."),
        ("project = PROJ ORDER BY priority", "The fake Jira does not search by 'priority'"),
        ("labels = a+b", "The character '+' is a reserved JQL character."),
    ],
)
def test_what_jira_does_not_parse_is_a_400_naming_it(
    fake_jira: FakeJira, jql: str, message: str
) -> None:
    (found,) = refusal(fake_jira, jql)
    assert message in found


def test_pages_are_chained_by_token_and_cut_to_jiras_limits(fake_jira: FakeJira) -> None:
    made = [fake_jira.open_issue(f"Issue {n}") for n in range(120)]
    jql = "project = PROJ ORDER BY key ASC"
    with jira_client(fake_jira) as api:
        first = api.post("/search/jql", json={"jql": jql, "fields": ["summary"], "maxResults": 500})
        page = first.json()
        second = api.post(
            "/search/jql",
            json={"jql": jql, "fields": ["summary"], "nextPageToken": page["nextPageToken"]},
        ).json()
        ids_only = api.get("/search/jql", params={"jql": jql, "maxResults": 500}).json()
        other_query = api.post(
            "/search/jql", json={"jql": "project = PROJ", "nextPageToken": page["nextPageToken"]}
        )
        offset = api.post("/search/jql", json={"jql": jql, "startAt": 50})
    assert (len(page["issues"]), page["isLast"]) == (100, False)
    assert keys(second) == made[100:]
    assert second["isLast"] is True
    assert "nextPageToken" not in second
    assert len(ids_only["issues"]) == 120
    assert set(ids_only["issues"][0]) == {"expand", "id", "self", "key"}  # fields default to id
    assert other_query.status_code == 400
    assert offset.status_code == 400


def test_cloud_no_longer_serves_the_offset_search(fake_jira: FakeJira) -> None:
    with jira_client(fake_jira) as api:
        gone = api.get("/search", params={"jql": "project = PROJ"})
    assert gone.status_code == 410
    assert "/rest/api/3/search/jql" in gone.json()["errorMessages"][0]


def test_data_center_searches_by_offset_with_a_total(data_center: FakeJira) -> None:
    made = [data_center.open_issue(f"Issue {n}") for n in range(5)]
    with jira_client(data_center, "pat-token") as api:
        page = api.get(
            "/search", params={"jql": "project = PROJ ORDER BY key", "startAt": 2, "maxResults": 2}
        ).json()
        unbounded = api.post("/search", json={"jql": "", "maxResults": 5000}).json()
        missing = api.get("/search/jql", params={"jql": "project = PROJ"})
    assert (page["startAt"], page["maxResults"], page["total"]) == (2, 2, 5)
    assert keys(page) == made[2:4]
    assert "status" in page["issues"][0]["fields"]  # *navigable by default
    assert (unbounded["total"], unbounded["maxResults"]) == (5, 1000)
    assert missing.status_code == 404


def test_a_project_the_searcher_may_not_browse_does_not_exist_for_them() -> None:
    with running_jira(tokens={"test-token": "cpe-bot", "out": "outsider"}) as jira:
        jira.open_issue("Hidden")
        jira.remove_from_group("outsider", "jira-software-users")
        with jira_client(jira, "out") as api:
            named = api.get("/search/jql", params={"jql": "project = PROJ"})
            unnamed = api.get("/search/jql", params={"jql": "labels is EMPTY"})
        assert named.json()["errorMessages"] == [
            "The value 'PROJ' does not exist for the field 'project'."
        ]
        assert unnamed.json()["issues"] == []


def test_a_lagging_search_misses_the_latest_changes_unless_reconciled(
    fake_jira: FakeJira,
) -> None:
    old = fake_jira.open_issue("Old", labels=["a"])
    fake_jira.lag_search()
    new = fake_jira.open_issue("New", labels=["a"])
    fake_jira.add_label(old, "b")
    assert keys(search(fake_jira, "labels = a ORDER BY key")) == [old]
    assert keys(search(fake_jira, "labels = b")) == []
    new_id = fake_jira.issue(new)["id"]
    old_id = fake_jira.issue(old)["id"]
    reconciled = search(fake_jira, "labels = b", reconcileIssues=[int(old_id)])
    assert keys(reconciled) == [old]
    assert keys(search(fake_jira, "labels = a ORDER BY key", reconcileIssues=[int(new_id)])) == [
        old,
        new,
    ]
    with jira_client(fake_jira) as api:
        listed = api.get("/search/jql", params={"jql": "labels = b", "reconcileIssues": old_id})
        too_many = api.post(
            "/search/jql", json={"jql": "labels = a", "reconcileIssues": list(range(51))}
        )
    assert [i["id"] for i in listed.json()["issues"]] == [old_id]
    assert too_many.status_code == 400
    fake_jira.catch_up()
    assert keys(search(fake_jira, "labels = a ORDER BY key")) == [old, new]
