"""The fake GitLab's HTTP conventions, as GitLab's REST docs give them: tokens and scopes, error
bodies, the project by id or by path, pagination headers, ETags, rate limits, injected faults."""

from __future__ import annotations

import threading

import gitlab
import httpx
import pytest

from tests.fakes.gitlab import FakeGitLab, Fault, Stall
from tests.support.gitlab import ManualClock


def api(gl: FakeGitLab, token: str | None = "test-token") -> httpx.Client:
    headers = {"PRIVATE-TOKEN": token} if token else {}
    return httpx.Client(base_url=gl.api_url, headers=headers)


def client(gl: FakeGitLab, token: str = "test-token") -> gitlab.Gitlab:
    return gitlab.Gitlab(gl.base_url, private_token=token, retry_transient_errors=False)


def test_a_token_is_taken_from_the_header_a_bearer_header_or_the_parameter(
    fake_gitlab: FakeGitLab,
) -> None:
    url = f"{fake_gitlab.api_url}/user"
    by_header = httpx.get(url, headers={"PRIVATE-TOKEN": "test-token"})
    by_bearer = httpx.get(url, headers={"Authorization": "Bearer test-token"})
    by_parameter = httpx.get(url, params={"private_token": "test-token"})
    assert {r.json()["username"] for r in (by_header, by_bearer, by_parameter)} == {"cpe-bot"}
    gl = client(fake_gitlab)
    gl.auth()
    assert gl.user is not None
    assert gl.user.username == "cpe-bot"


def test_an_unknown_token_is_a_401_with_gitlabs_body(fake_gitlab: FakeGitLab) -> None:
    with api(fake_gitlab, "stolen") as http:
        answer = http.get("/projects/acme%2Fwidgets")
    assert answer.status_code == 401
    assert answer.json() == {"message": "401 Unauthorized"}
    with pytest.raises(gitlab.GitlabAuthenticationError):
        client(fake_gitlab, "stolen").auth()


def test_no_token_reads_the_public_project_but_writes_nothing(fake_gitlab: FakeGitLab) -> None:
    with api(fake_gitlab, None) as http:
        assert http.get("/projects/acme%2Fwidgets").json()["path_with_namespace"] == "acme/widgets"
        assert http.get("/user").status_code == 401
        refused = http.post("/projects/acme%2Fwidgets/issues", json={"title": "t"})
    assert (refused.status_code, refused.json()) == (401, {"message": "401 Unauthorized"})
    assert not fake_gitlab.issues


def test_a_read_api_token_reads_and_its_writes_are_refused_for_their_scope(
    fake_gitlab: FakeGitLab,
) -> None:
    with api(fake_gitlab, "reader-token") as http:
        assert http.get("/projects/4242/issues").status_code == 200
        refused = http.post("/projects/4242/issues", json={"title": "t"})
    assert refused.status_code == 403
    assert refused.json() == {
        "error": "insufficient_scope",
        "error_description": "The request requires higher privileges than provided by the "
        "access token.",
        "scope": "api",
    }
    assert not fake_gitlab.issues


def test_the_project_is_addressed_by_id_or_encoded_path_and_no_other(
    fake_gitlab: FakeGitLab,
) -> None:
    with api(fake_gitlab) as http:
        by_id = http.get("/projects/4242").json()
        by_path = http.get("/projects/acme%2Fwidgets").json()
        other = http.get("/projects/acme%2Fother/issues")
    assert by_id == by_path
    assert by_id["id"] == fake_gitlab.project_id
    assert by_id["default_branch"] == "main"
    assert by_id["permissions"]["project_access"]["access_level"] == 40
    assert (other.status_code, other.json()) == (404, {"message": "404 Project Not Found"})


def test_unknown_routes_and_methods_answer_as_grape_does(fake_gitlab: FakeGitLab) -> None:
    with api(fake_gitlab) as http:
        unknown = http.get("/projects/4242/nothing-here")
        wrong_method = http.delete("/projects/4242/issues")
    assert (unknown.status_code, unknown.json()) == (404, {"error": "404 Not Found"})
    assert (wrong_method.status_code, wrong_method.json()) == (405, {"error": "405 Not Allowed"})


def test_lists_are_paged_with_gitlabs_headers_and_links(fake_gitlab: FakeGitLab) -> None:
    for n in range(25):
        fake_gitlab.open_issue(f"issue {n}")
    with api(fake_gitlab) as http:
        first = http.get("/projects/4242/issues")
        second = http.get("/projects/4242/issues", params={"per_page": 10, "page": 2})
        capped = http.get("/projects/4242/issues", params={"per_page": 1000})
    assert len(first.json()) == 20  # GitLab's default per_page
    assert first.headers["X-Page"] == "1"
    assert first.headers["X-Next-Page"] == "2"
    assert first.headers["X-Prev-Page"] == ""
    assert (first.headers["X-Total"], first.headers["X-Total-Pages"]) == ("25", "2")
    assert second.headers["X-Prev-Page"] == "1"
    assert second.headers["X-Next-Page"] == "3"
    links = second.headers["Link"]
    for rel in ("prev", "next", "first", "last"):
        assert f'rel="{rel}"' in links
    assert capped.headers["X-Per-Page"] == "100"  # at most 100
    issues = client(fake_gitlab).projects.get(4242, lazy=True).issues
    assert len(issues.list(get_all=True, per_page=7)) == 25  # python-gitlab follows the links


def test_a_matching_etag_answers_304_and_costs_rate_limit_all_the_same(
    fake_gitlab: FakeGitLab,
) -> None:
    fake_gitlab.open_issue("one")
    with api(fake_gitlab) as http:
        first = http.get("/projects/4242/issues")
        tag = first.headers["ETag"]
        again = http.get("/projects/4242/issues", headers={"If-None-Match": tag})
        fake_gitlab.open_issue("two")
        changed = http.get("/projects/4242/issues", headers={"If-None-Match": tag})
    assert tag.startswith('W/"')
    assert (again.status_code, again.content) == (304, b"")
    observed = int(first.headers["RateLimit-Observed"])
    assert int(again.headers["RateLimit-Observed"]) == observed + 1
    assert changed.status_code == 200
    assert len(changed.json()) == 2
    assert [r.counted for r in fake_gitlab.requests] == [True, True, True]


def test_every_answer_carries_the_rate_limit_and_a_spent_budget_is_a_429(
    fake_gitlab: FakeGitLab, clock: ManualClock
) -> None:
    fake_gitlab.rate_limit(3)
    with api(fake_gitlab) as http:
        answers = [http.get("/user") for _ in range(4)]
        clock.now += 60  # the window resets
        after = http.get("/user")
    ok, refused = answers[2], answers[3]
    for name in ("Limit", "Observed", "Remaining", "Reset", "ResetTime"):
        assert f"RateLimit-{name}" in ok.headers
    assert (ok.headers["RateLimit-Limit"], ok.headers["RateLimit-Remaining"]) == ("3", "0")
    assert refused.status_code == 429
    assert refused.text == "Retry later\n"
    assert int(refused.headers["Retry-After"]) == 60
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert after.status_code == 200
    assert after.headers["RateLimit-Observed"] == "1"


def test_a_fault_fails_its_route_a_given_number_of_times(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.fail(Fault("GET", r"/issues$", 502, times=1, message="502 Bad Gateway"))
    with api(fake_gitlab) as http:
        failed = http.get("/projects/4242/issues")
        served = http.get("/projects/4242/issues")
    assert (failed.status_code, failed.json()) == (502, {"message": "502 Bad Gateway"})
    assert served.status_code == 200


def test_a_write_can_be_applied_and_its_connection_dropped(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.fail(Fault("POST", r"/issues$", 0, apply_first=True, drop=True))
    with api(fake_gitlab) as http, pytest.raises(httpx.RemoteProtocolError):
        http.post("/projects/4242/issues", json={"title": "lost answer"})
    assert [i.title for i in fake_gitlab.issues.values()] == ["lost answer"]


def test_a_stalled_answer_is_held_until_the_fake_lets_it_go(fake_gitlab: FakeGitLab) -> None:
    stall = fake_gitlab.stall(Stall("GET", "/user$", seconds=600))
    answers: list[int] = []
    with api(fake_gitlab) as http:
        held = threading.Thread(target=lambda: answers.append(http.get("/user").status_code))
        held.start()
        assert stall.holding.wait(30)
        with api(fake_gitlab) as other:
            assert other.get("/projects/4242").status_code == 200  # others go on meanwhile
        assert not answers
        fake_gitlab.http.released.set()
        held.join(timeout=30)
    assert answers == [200]


def test_requests_are_recorded_with_their_route_and_token(fake_gitlab: FakeGitLab) -> None:
    client(fake_gitlab).projects.get("acme/widgets").issues.list(get_all=True)
    routes = [(r.method, r.route, r.token) for r in fake_gitlab.requests]
    assert routes == [
        ("GET", "projects/get", "test-token"),
        ("GET", "issues/list", "test-token"),
    ]
