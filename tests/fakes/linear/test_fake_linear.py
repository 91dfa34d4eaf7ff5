"""The fake Linear's HTTP side: tokens as Linear takes them, its refusals (authentication,
parse and validation errors, bad variables), its rate limits and complexity, the request log,
and injected faults."""

from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.http import Fault
from tests.fakes.linear.fake import API_KEY, OAUTH_TOKEN, FakeLinear
from tests.support.linear import ManualClock, graphql, running_linear

VIEWER = "query Me { viewer { id email } }"


def first_error(response: httpx.Response) -> dict:  # type: ignore[type-arg]
    errors = response.json()["errors"]
    assert errors, response.text
    return errors[0]  # type: ignore[no-any-return]


def test_a_personal_api_key_is_sent_bare_and_an_oauth_token_after_bearer(
    fake_linear: FakeLinear,
) -> None:
    for authorization in (API_KEY, f"Bearer {OAUTH_TOKEN}"):
        answer = graphql(fake_linear, VIEWER, authorization=authorization)
        assert answer.status_code == 200
        assert answer.json()["data"]["viewer"]["email"] == "cpe@example.com"
    assert [r.auth for r in fake_linear.requests] == ["api_key", "oauth"]


@pytest.mark.parametrize(
    "authorization",
    [None, "", "lin_api_not_a_key", f"Bearer {API_KEY}", OAUTH_TOKEN, "Bearer nope"],
)
def test_a_missing_unknown_or_misplaced_token_is_linears_authentication_error(
    fake_linear: FakeLinear, authorization: str | None
) -> None:
    answer = graphql(fake_linear, VIEWER, authorization=authorization)
    assert answer.status_code == 400
    error = first_error(answer)
    assert error["extensions"]["code"] == "AUTHENTICATION_ERROR"
    assert error["extensions"]["type"] == "authentication error"
    assert error["extensions"]["statusCode"] == 401
    assert "data" not in answer.json()
    assert fake_linear.requests[-1].codes == ("AUTHENTICATION_ERROR",)
    assert not any(h.lower().startswith("x-ratelimit") for h in answer.headers)


def test_a_revoked_token_is_refused_from_then_on(fake_linear: FakeLinear) -> None:
    assert graphql(fake_linear, VIEWER).status_code == 200
    fake_linear.revoke(API_KEY)
    assert first_error(graphql(fake_linear, VIEWER))["extensions"]["code"] == (
        "AUTHENTICATION_ERROR"
    )


def test_the_token_is_never_recorded(fake_linear: FakeLinear) -> None:
    graphql(fake_linear, VIEWER)
    assert API_KEY not in repr(fake_linear.requests)


def test_a_document_that_does_not_parse_is_refused_as_linear_does(
    fake_linear: FakeLinear,
) -> None:
    answer = graphql(fake_linear, "query { viewer { id ")
    assert answer.status_code == 400
    error = first_error(answer)
    assert error["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"
    assert error["extensions"]["type"] == "graphql error"


def test_a_field_the_served_schema_lacks_fails_validation_and_runs_nothing(
    fake_linear: FakeLinear,
) -> None:
    # `cycle` is Linear's, but not served: a document using it is refused, not half-answered.
    answer = graphql(
        fake_linear,
        'mutation { issueCreate(input: {teamId: "x", title: "t"}) { success } '
        "viewer { cycle { id } } }",
    )
    assert answer.status_code == 400
    codes = {e["extensions"]["code"] for e in answer.json()["errors"]}
    assert codes == {"GRAPHQL_VALIDATION_FAILED"}
    assert set(fake_linear.requests[-1].codes) == codes
    assert "Cannot query field 'viewer' on type 'Mutation'" in answer.text
    assert fake_linear.identifiers() == []


def test_a_variable_of_the_wrong_type_is_bad_user_input(fake_linear: FakeLinear) -> None:
    answer = graphql(
        fake_linear, "query Q($n: Int) { issues(first: $n) { nodes { id } } }", {"n": "ten"}
    )
    assert answer.status_code == 400
    assert first_error(answer)["extensions"]["code"] == "BAD_USER_INPUT"


def test_every_answer_carries_linears_rate_limit_headers(fake_linear: FakeLinear) -> None:
    answer = graphql(fake_linear, "{ issues(first: 10) { nodes { id title } } }")
    headers = answer.headers
    assert headers["X-RateLimit-Requests-Limit"] == "5000"
    assert headers["X-RateLimit-Requests-Remaining"] == "4999"
    assert headers["X-RateLimit-Complexity-Limit"] == "250000"
    # 1 (the connection) + 10 x (1 (the issue) + 0.2 (two properties)) = 13 points.
    assert headers["X-Complexity"] == "13"
    assert headers["X-RateLimit-Complexity-Remaining"] == str(250000 - 13)
    assert int(headers["X-RateLimit-Requests-Reset"]) > 1_000_000_000_000  # epoch ms


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def linear_on_clock(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> Iterator[FakeLinear]:
    with running_linear(monkeypatch, now=clock) as linear:
        yield linear


def test_an_empty_request_bucket_is_ratelimited_until_it_refills(
    linear_on_clock: FakeLinear, clock: ManualClock
) -> None:
    linear_on_clock.rate_limit(requests=2)
    assert graphql(linear_on_clock, VIEWER).status_code == 200
    assert graphql(linear_on_clock, VIEWER).status_code == 200
    refused = graphql(linear_on_clock, VIEWER)
    assert refused.status_code == 400
    error = first_error(refused)
    assert error["extensions"]["code"] == "RATELIMITED"
    assert error["extensions"]["statusCode"] == 429
    assert refused.headers["X-RateLimit-Requests-Remaining"] == "0"
    assert refused.headers["Retry-After"] == "1800"  # 2 an hour: one every half hour
    reset_ms = int(refused.headers["X-RateLimit-Requests-Reset"])
    assert reset_ms == (clock.now + 3600) * 1000  # the bucket full again
    clock.now += 1800  # half an hour: the bucket of 2 an hour has one request again
    assert graphql(linear_on_clock, VIEWER).status_code == 200
    assert graphql(linear_on_clock, VIEWER).status_code == 400


def test_complexity_points_are_a_budget_of_their_own(
    linear_on_clock: FakeLinear, clock: ManualClock
) -> None:
    linear_on_clock.rate_limit(complexity=100)
    query = "{ issues(first: 50) { nodes { id } } }"  # 1 + 50 x 1.1 = 56 points
    assert graphql(linear_on_clock, query).headers["X-Complexity"] == "56"
    refused = graphql(linear_on_clock, query)
    assert first_error(refused)["extensions"]["code"] == "RATELIMITED"
    assert refused.headers["X-RateLimit-Complexity-Remaining"] == "44"
    assert refused.headers["Retry-After"] == "432"  # 12 points short at 100 an hour
    clock.now += 3600
    assert graphql(linear_on_clock, query).status_code == 200


def test_a_query_over_the_per_query_complexity_limit_is_refused_before_it_runs(
    fake_linear: FakeLinear,
) -> None:
    issue = fake_linear.open_issue("one")
    answer = graphql(
        fake_linear,
        'mutation M($id: String!) { issueUpdate(id: $id, input: {title: "renamed"}) '
        "{ issue { labels(first: 250) { nodes { id team { issues(first: 250) "
        "{ nodes { id } } } } } } } }",
        {"id": issue},
    )
    assert answer.status_code == 400
    assert first_error(answer)["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert int(answer.headers["X-Complexity"]) > 10_000
    assert fake_linear.issue(issue)["title"] == "one"


def test_ratelimit_next_answers_ratelimited_whatever_the_buckets(
    fake_linear: FakeLinear,
) -> None:
    fake_linear.ratelimit_next(2, seconds=5)
    for _ in range(2):
        answer = graphql(fake_linear, VIEWER)
        assert first_error(answer)["extensions"]["code"] == "RATELIMITED"
        assert answer.headers["X-RateLimit-Requests-Remaining"] == "0"
        assert answer.headers["Retry-After"] == "5"
    assert graphql(fake_linear, VIEWER).status_code == 200


def test_a_ratelimited_mutation_does_nothing(fake_linear: FakeLinear) -> None:
    fake_linear.ratelimit_operation("^issueCreate$")
    create = (
        'mutation M($t: String!) { issueCreate(input: {teamId: $t, title: "x"}) '
        "{ success issue { identifier } } }"
    )
    refused = graphql(fake_linear, create, {"t": fake_linear.team_id})
    assert first_error(refused)["extensions"]["code"] == "RATELIMITED"
    assert refused.headers["Retry-After"] == "1"
    assert fake_linear.identifiers() == []
    again = graphql(fake_linear, create, {"t": fake_linear.team_id})
    assert again.json()["data"]["issueCreate"]["issue"]["identifier"] == "ENG-1"


def test_the_log_names_each_operation_its_fields_and_variables(fake_linear: FakeLinear) -> None:
    graphql(fake_linear, VIEWER)
    graphql(fake_linear, "query Q($id: String!) { issue(id: $id) { id } }", {"id": "ENG-1"})
    me, lookup = fake_linear.requests
    assert (me.operation_name, me.operation, me.fields, me.user) == (
        "Me",
        "query",
        ("viewer",),
        "cpe@example.com",
    )
    assert (lookup.fields, lookup.variables, lookup.status, lookup.codes) == (
        ("issue",),
        {"id": "ENG-1"},
        400,
        ("INPUT_ERROR",),
    )
    assert me.codes == ()
    assert fake_linear.operations() == ["Me", "Q"]


def test_a_fault_on_one_operation_leaves_the_others_alone(fake_linear: FakeLinear) -> None:
    fake_linear.fail_operation("issueCreate", 502, apply_first=True)
    assert graphql(fake_linear, VIEWER).status_code == 200
    answer = graphql(
        fake_linear,
        'mutation M($t: String!) { issueCreate(input: {teamId: $t, title: "x"}) { success } }',
        {"t": fake_linear.team_id},
    )
    assert answer.status_code == 502
    assert fake_linear.identifiers() == ["ENG-1"]  # done, its answer lost
    lost = fake_linear.requests[-1]
    assert (lost.operation_name, lost.fields, lost.status) == ("M", ("issueCreate",), 502)


def test_a_dropped_connection_sends_nothing(fake_linear: FakeLinear) -> None:
    fake_linear.fail_operation("Me", drop=True)
    with pytest.raises(httpx.TransportError):
        graphql(fake_linear, VIEWER)
    assert graphql(fake_linear, VIEWER).status_code == 200


def test_a_server_error_on_the_endpoint_is_sent_as_it_comes(fake_linear: FakeLinear) -> None:
    fake_linear.fail(Fault("POST", r"^/graphql$", 503, message="upstream"))
    answer = graphql(fake_linear, VIEWER)
    assert answer.status_code == 503
    assert graphql(fake_linear, VIEWER).status_code == 200
