"""The fake Linear's connections and filters: 50 a page unless asked, at most 250, newest
first by ``createdAt`` or ``updatedAt``, cursors forward and back, and the filters the
provider sends (team key, ``updatedAt`` after an instant or a duration, project, labels, state
type), with a filter the fake does not model refused."""

from typing import Any

import pytest

from tests.fakes.linear.fake import FakeLinear
from tests.support.linear import graphql

PAGE = """
query Page($filter: IssueFilter, $first: Int, $after: String, $last: Int, $before: String,
           $orderBy: PaginationOrderBy) {
  issues(filter: $filter, first: $first, after: $after, last: $last, before: $before,
         orderBy: $orderBy) {
    nodes { identifier updatedAt }
    edges { cursor node { identifier } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
"""


def page(linear: FakeLinear, **variables: Any) -> dict[str, Any]:
    answer = graphql(linear, PAGE, variables)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["issues"]  # type: ignore[no-any-return]


def names(found: dict[str, Any]) -> list[str]:
    return [n["identifier"] for n in found["nodes"]]


def test_fifty_nodes_a_page_unless_asked_newest_first(fake_linear: FakeLinear) -> None:
    for n in range(55):
        fake_linear.open_issue(f"issue {n}")
    first = page(fake_linear)
    assert len(first["nodes"]) == 50
    assert names(first)[:2] == ["ENG-55", "ENG-54"]
    assert first["pageInfo"]["hasNextPage"] is True
    rest = page(fake_linear, after=first["pageInfo"]["endCursor"])
    assert names(rest) == ["ENG-5", "ENG-4", "ENG-3", "ENG-2", "ENG-1"]
    assert rest["pageInfo"] == {
        "hasNextPage": False,
        "hasPreviousPage": True,
        "startCursor": rest["edges"][0]["cursor"],
        "endCursor": rest["edges"][-1]["cursor"],
    }


@pytest.mark.parametrize("variables", [{"first": 251}, {"first": -1}, {"first": 2, "last": 2}])
def test_a_page_over_250_or_both_directions_is_refused(
    fake_linear: FakeLinear, variables: dict[str, int]
) -> None:
    answer = graphql(fake_linear, PAGE, variables)
    assert answer.status_code == 400
    assert answer.json()["errors"][0]["extensions"]["code"] == "INPUT_ERROR"


def test_a_cursor_the_api_did_not_give_is_refused(fake_linear: FakeLinear) -> None:
    answer = graphql(fake_linear, PAGE, {"after": "not-a-cursor"})
    assert answer.status_code == 400
    assert "cursor" in answer.json()["errors"][0]["extensions"]["userPresentableMessage"]


def test_ordered_by_updated_at_a_touched_issue_comes_first(fake_linear: FakeLinear) -> None:
    for n in range(3):
        fake_linear.open_issue(f"issue {n}")
    fake_linear.edit("ENG-1", title="touched")
    assert names(page(fake_linear, orderBy="updatedAt")) == ["ENG-1", "ENG-3", "ENG-2"]
    assert names(page(fake_linear)) == ["ENG-3", "ENG-2", "ENG-1"]


def test_pages_backward_with_last_and_before(fake_linear: FakeLinear) -> None:
    for n in range(5):
        fake_linear.open_issue(f"issue {n}")
    tail = page(fake_linear, last=2)
    assert names(tail) == ["ENG-2", "ENG-1"]
    assert tail["pageInfo"]["hasPreviousPage"] is True
    before = page(fake_linear, last=2, before=tail["pageInfo"]["startCursor"])
    assert names(before) == ["ENG-4", "ENG-3"]


def test_a_page_after_a_cursor_holds_when_issues_are_added_meanwhile(
    fake_linear: FakeLinear,
) -> None:
    for n in range(4):
        fake_linear.open_issue(f"issue {n}")
    first = page(fake_linear, first=2)
    fake_linear.open_issue("newer")
    assert names(page(fake_linear, first=2, after=first["pageInfo"]["endCursor"])) == [
        "ENG-2",
        "ENG-1",
    ]


def test_updated_at_after_the_last_seen_finds_only_what_changed(
    fake_linear: FakeLinear,
) -> None:
    for n in range(3):
        fake_linear.open_issue(f"issue {n}")
    seen = max(n["updatedAt"] for n in page(fake_linear)["nodes"])
    since = {"team": {"key": {"eq": "ENG"}}, "updatedAt": {"gt": seen}}
    assert names(page(fake_linear, filter=since)) == []
    fake_linear.move_to_state("ENG-2", "In Progress")
    assert names(page(fake_linear, filter=since)) == ["ENG-2"]


def test_a_duration_is_measured_back_from_the_fakes_now(fake_linear: FakeLinear) -> None:
    fake_linear.open_issue("old")
    fake_linear.workspace.clock += 3 * 86_400_000  # three days pass
    fake_linear.open_issue("new")
    recent = page(fake_linear, filter={"createdAt": {"gt": "-P1D"}})
    assert names(recent) == ["ENG-2"]


def test_filters_by_team_key_project_label_and_state_type(fake_linear: FakeLinear) -> None:
    fake_linear.add_team("OPS", "Operations")
    fake_linear.add_project("Widgets")
    fake_linear.open_issue("a", labels=["cpe"], project="Widgets")
    fake_linear.open_issue("b", labels=["other"])
    fake_linear.open_issue("c", team="OPS", as_user="cpe@example.com")
    fake_linear.move_to_state("ENG-2", "Done")
    eng = {"team": {"key": {"eq": "ENG"}}}
    assert names(page(fake_linear, filter=eng)) == ["ENG-2", "ENG-1"]
    in_project = {**eng, "project": {"name": {"eq": "Widgets"}}}
    assert names(page(fake_linear, filter=in_project)) == ["ENG-1"]
    no_project = {**eng, "project": {"null": True}}
    assert names(page(fake_linear, filter=no_project)) == ["ENG-2"]
    labelled = {**eng, "labels": {"some": {"name": {"eqIgnoreCase": "CPE"}}}}
    assert names(page(fake_linear, filter=labelled)) == ["ENG-1"]
    labelled_short = {"labels": {"name": {"eq": "other"}}}
    assert names(page(fake_linear, filter=labelled_short)) == ["ENG-2"]
    open_ones = {**eng, "state": {"type": {"nin": ["completed", "canceled"]}}}
    assert names(page(fake_linear, filter=open_ones)) == ["ENG-1"]
    either = {"or": [{"title": {"eq": "a"}}, {"team": {"key": {"eq": "OPS"}}}]}
    assert names(page(fake_linear, filter=either)) == ["OPS-1", "ENG-1"]


def test_a_filter_key_the_fake_does_not_model_is_refused(fake_linear: FakeLinear) -> None:
    fake_linear.open_issue("a")
    answer = graphql(fake_linear, PAGE, {"filter": {"customerCount": {"eq": 0}}})
    assert answer.status_code == 400
    error = answer.json()["errors"][0]
    assert error["extensions"]["code"] == "FAKE_NOT_IMPLEMENTED"
    assert "IssueFilter.customerCount" in error["message"]


def test_an_issue_id_filter_takes_ids_and_identifiers(fake_linear: FakeLinear) -> None:
    for n in range(3):
        fake_linear.open_issue(f"issue {n}")
    uuid = fake_linear.issue("ENG-1")["id"]
    both = {"id": {"in": [uuid, "eng-3"]}}
    assert names(page(fake_linear, filter=both)) == ["ENG-3", "ENG-1"]
    assert names(page(fake_linear, filter={"id": {"neq": "ENG-2"}})) == ["ENG-3", "ENG-1"]
