"""The fake Jira's credentials, site resources, rate limits, faults and request log, as Jira
Cloud and Data Center answer them."""

from __future__ import annotations

import base64

import httpx

from tests.fakes.http import Fault
from tests.fakes.jira import FakeJira
from tests.support.jira import ManualClock, check_against_openapi, jira_client, running_jira


def test_cloud_takes_basic_email_and_api_token(fake_jira: FakeJira) -> None:
    with jira_client(fake_jira) as api:
        me = api.get("/myself")
    assert me.status_code == 200
    assert me.json()["accountId"] == fake_jira.account_id("cpe-bot")
    assert me.json()["emailAddress"] == "cpe-bot@example.com"
    assert "name" not in me.json()  # Cloud names people by account id only


def test_cloud_refuses_a_bearer_api_token_a_wrong_email_and_no_credentials(
    fake_jira: FakeJira,
) -> None:
    wrong = base64.b64encode(b"someone@example.com:test-token").decode()
    for headers in ({"Authorization": "Bearer test-token"}, {"Authorization": f"Basic {wrong}"}):
        answer = httpx.get(f"{fake_jira.rest_url}/myself", headers=headers)
        assert answer.status_code == 401
        assert answer.text == "Client must be authenticated to access this resource."
        assert answer.headers["X-Seraph-LoginReason"] == "AUTHENTICATED_FAILED"
    with jira_client(fake_jira, token=None) as anonymous:
        answer = anonymous.get("/myself")
        assert answer.status_code == 401
        assert "X-Seraph-LoginReason" not in answer.headers
        assert anonymous.get("/serverInfo").json()["deploymentType"] == "Cloud"
    assert [r.user for r in fake_jira.requests] == [None, None, None, None]
    assert [r.scheme for r in fake_jira.requests][:2] == ["bearer", "basic"]


def test_data_center_takes_a_bearer_personal_access_token(data_center: FakeJira) -> None:
    with jira_client(data_center, "pat-token") as api:
        me = api.get("/myself").json()
        assert (me["name"], me["key"]) == ("cpe-bot", "JIRAUSER10100")
        assert "accountId" not in me
        assert api.get("/serverInfo").json()["deploymentType"] == "Server"
    basic = base64.b64encode(b"cpe-bot:pat-token").decode()
    answer = httpx.get(
        f"{data_center.rest_url}/myself", headers={"Authorization": f"Basic {basic}"}
    )
    assert answer.status_code == 401


def test_each_deployment_serves_its_own_api_only(
    fake_jira: FakeJira, data_center: FakeJira
) -> None:
    cloud_v2 = httpx.get(f"{fake_jira.base_url}/rest/api/2/myself", headers=fake_jira.auth_header())
    dc_v3 = httpx.get(
        f"{data_center.base_url}/rest/api/3/myself", headers=data_center.auth_header("pat-token")
    )
    assert (cloud_v2.status_code, dc_v3.status_code) == (404, 404)
    assert cloud_v2.json()["errorMessages"]


def test_the_project_its_statuses_and_link_types(fake_jira: FakeJira) -> None:
    with jira_client(fake_jira) as api:
        project = api.get("/project/PROJ").json()
        statuses = api.get("/project/PROJ/statuses").json()
        links = api.get("/issueLinkType").json()["issueLinkTypes"]
        missing = api.get("/project/NOPE")
    assert project["key"] == "PROJ"
    assert "Task" in [t["name"] for t in project["issueTypes"]]
    task = next(s for s in statuses if s["name"] == "Task")
    assert [(s["name"], s["statusCategory"]["key"]) for s in task["statuses"]] == [
        ("To Do", "new"),
        ("In Progress", "indeterminate"),
        ("In Review", "indeterminate"),
        ("Done", "done"),
    ]
    blocks = next(t for t in links if t["name"] == "Blocks")
    assert (blocks["inward"], blocks["outward"]) == ("is blocked by", "blocks")
    assert missing.status_code == 404
    assert missing.json() == {
        "errorMessages": ["No project could be found with key 'NOPE'."],
        "errors": {},
    }


def test_someone_who_may_not_browse_the_project_finds_no_project() -> None:
    with running_jira(tokens={"test-token": "cpe-bot", "out-token": "outsider"}) as jira:
        jira.remove_from_group("outsider", "jira-software-users")
        with jira_client(jira, "out-token") as api:
            assert api.get("/project/PROJ").status_code == 404
            assert api.get("/myself").status_code == 200


def test_past_the_budget_cloud_answers_429_with_its_rate_limit_headers() -> None:
    clock = ManualClock()
    with running_jira(now=clock) as jira:
        jira.rate_limit(10)
        with jira_client(jira) as api:
            answers = [api.get("/myself") for _ in range(11)]
            assert [a.status_code for a in answers] == [200] * 10 + [429]
            assert answers[8].headers["X-RateLimit-NearLimit"] == "true"
            refused = answers[10]
            assert refused.headers["Retry-After"] == "60"
            assert refused.headers["RateLimit-Reason"] == "jira-burst-based"
            assert refused.headers["X-RateLimit-Remaining"] == "0"
            assert refused.headers["X-RateLimit-Limit"] == "10"
            assert refused.headers["X-RateLimit-Reset"].endswith("Z")
            assert refused.json()["errorMessages"] == ["Rate limit exceeded."]
            clock.now += 60
            assert api.get("/myself").status_code == 200
        assert [r.counted for r in jira.requests][9:] == [True, False, True]


def test_data_center_rate_limit_headers_are_its_token_bucket() -> None:
    with running_jira(deployment="data_center", tokens={"pat": "cpe-bot"}) as jira:
        jira.rate_limit(2)
        with jira_client(jira, "pat") as api:
            first = api.get("/myself")
            api.get("/myself")
            refused = api.get("/myself")
    assert first.headers["X-RateLimit-Limit"] == "2"
    assert first.headers["X-RateLimit-Remaining"] == "1"
    assert first.headers["X-RateLimit-Interval-Seconds"] == "60"
    assert first.headers["X-RateLimit-FillRate"] == "2"
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert "RateLimit-Reason" not in refused.headers


def test_an_injected_fault_can_apply_the_write_then_fail(fake_jira: FakeJira) -> None:
    key = fake_jira.open_issue("Work")
    fake_jira.fail(Fault("POST", r"/comment$", 502, apply_first=True))
    fake_jira.fail(Fault("GET", r"/myself$", 429, retry_after=7, message="jira-per-issue-on-write"))
    doc = {"type": "doc", "version": 1, "content": []}
    with jira_client(fake_jira) as api:
        lost = api.post(f"/issue/{key}/comment", json={"body": doc})
        throttled = api.get("/myself")
        again = api.get("/myself")
    assert lost.status_code == 502
    assert len(fake_jira.issue(key)["comments"]) == 1  # applied, then the answer was lost
    assert throttled.status_code == 429
    assert throttled.headers["Retry-After"] == "7"
    assert throttled.headers["RateLimit-Reason"] == "jira-per-issue-on-write"
    assert again.status_code == 200  # the fault is spent


def test_the_request_log_names_who_called_how_and_the_jql(fake_jira: FakeJira) -> None:
    with jira_client(fake_jira) as api:
        api.post("/search/jql", json={"jql": "project = PROJ", "fields": ["summary"]})
        api.get("/search/jql", params={"jql": "project = PROJ ORDER BY key"})
    first, second = fake_jira.requests
    assert (first.user, first.scheme, first.api, first.route) == (
        "cpe-bot",
        "basic",
        "3",
        "searchAndReconsileIssuesUsingJqlPost",
    )
    assert (first.jql, second.jql) == ("project = PROJ", "project = PROJ ORDER BY key")
    assert not first.write


def test_every_answer_of_a_session_fits_the_openapi_subset(fake_jira: FakeJira) -> None:
    first = fake_jira.open_issue("First", "Some *text*", labels=["cpe-admit"])
    second = fake_jira.open_issue("Second")
    fake_jira.link(first, second)
    fake_jira.comment(first, "A comment")
    with jira_client(fake_jira) as api:
        for path in ("/myself", "/serverInfo", "/project/PROJ", "/issueLinkType", "/label"):
            assert api.get(path).status_code == 200
        assert api.get(f"/issue/{first}", params={"expand": "changelog"}).status_code == 200
        assert api.get(f"/issue/{second}/transitions").status_code == 200
        assert api.get(f"/issue/{first}/changelog").status_code == 200
        assert api.get(f"/issue/{first}/comment").status_code == 200
        body = {"jql": "project = PROJ", "fields": ["*all"], "expand": "changelog"}
        assert api.post("/search/jql", json=body).status_code == 200
    assert check_against_openapi(fake_jira) == 10


def test_every_answer_of_a_data_center_session_fits_the_openapi_subset(
    data_center: FakeJira,
) -> None:
    first = data_center.open_issue("First", "h2. Wiki text", labels=["cpe-admit"])
    second = data_center.open_issue("Second")
    data_center.link(first, second)
    data_center.comment(first, "A {{comment}}")
    with jira_client(data_center, "pat-token") as api:
        for path in ("/myself", "/serverInfo", "/project/PROJ/statuses", "/issueLinkType"):
            assert api.get(path).status_code == 200
        assert api.get("/user", params={"username": "alice", "expand": "groups"}).status_code == 200
        assert api.get(f"/issue/{first}", params={"expand": "changelog"}).status_code == 200
        body = {"jql": "project = PROJ", "startAt": 0, "maxResults": 10, "fields": ["*all"]}
        assert api.post("/search", json=body).status_code == 200
        made = api.post(
            "/issue",
            json={
                "fields": {
                    "project": {"key": "PROJ"},
                    "summary": "Third",
                    "issuetype": {"name": "Task"},
                    "description": "*bold*",
                }
            },
        )
        assert made.status_code == 201
        link = {"type": {"name": "Blocks"}, "inwardIssue": {"key": second}}
        link["outwardIssue"] = {"key": made.json()["key"]}
        assert api.post("/issueLink", json=link).status_code == 201
    assert check_against_openapi(data_center) == 9
