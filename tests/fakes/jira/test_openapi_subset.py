"""The committed OpenAPI subset the fake Jira is checked against: extracted from Atlassian's
file (its sha256 recorded), whole (every reference it holds resolves inside it), and its
checker refusing what the description refuses."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.jira import extract_openapi
from tests.fakes.jira.extract_openapi import SERVED, strip
from tests.fakes.jira.openapi import SUBSET, SubsetError, subset

# The vendor file's sha256 (/work/shared/vendor/README.md: jira-platform-openapi.json).
VENDOR_SHA256 = "5021849ab54916b9005a44bb9931c061bd8f3c907d2bfdb00104b4bb4eb78093"


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def test_the_subset_names_its_source_and_every_served_operation() -> None:
    data = json.loads(SUBSET.read_text())
    assert data["source"]["sha256"] == VENDOR_SHA256
    assert data["source"]["file"] == "jira-platform-openapi.json"
    assert sorted(data["operations"]) == sorted(f"{m} /rest/api/3{p}" for m, p in SERVED)


def test_every_reference_in_the_subset_resolves_inside_it() -> None:
    data = json.loads(SUBSET.read_text())
    schemas = data["components"]["schemas"]
    for target in _refs(data):
        assert target.startswith("#/components/schemas/"), target
        assert target.rsplit("/", 1)[1] in schemas, f"{target} is not in the subset"


def test_stripping_keeps_a_property_named_description() -> None:
    schema = {"description": "prose", "properties": {"description": {"type": "string"}}}
    assert strip(schema) == {"properties": {"description": {"type": "string"}}}


def test_an_answer_missing_a_required_field_is_refused() -> None:
    link = {"id": "1", "type": {"name": "Blocks"}}  # neither end
    with pytest.raises(SubsetError, match="is not valid under any of the given schemas"):
        subset().check_answer(
            "GET", "/rest/api/3/issue/PROJ-1", 200, {"id": "1", "fields": {"issuelinks": [link]}}
        )
    with pytest.raises(SubsetError, match="'name' is a required property"):
        subset().check_answer("GET", "/rest/api/3/project/PROJ/statuses", 200, [{"id": "1"}])


def test_an_answer_with_a_key_the_schema_does_not_have_is_refused() -> None:
    with pytest.raises(SubsetError, match="Additional properties"):
        subset().check_answer("GET", "/rest/api/3/myself", 200, {"accountId": "a", "login": "x"})


def test_an_unknown_query_parameter_and_an_unknown_route_are_refused() -> None:
    with pytest.raises(SubsetError, match="takes no query parameter 'startAt'"):
        subset().check_request("GET", "/rest/api/3/search/jql", "jql=x&startAt=5")
    with pytest.raises(SubsetError, match="none of the subset's operations"):
        subset().check_request("DELETE", "/rest/api/3/issue/PROJ-1")


def test_a_data_center_path_is_checked_against_its_v3_twin() -> None:
    op = subset().check_request("GET", "/rest/api/2/search", "jql=project%3DPROJ&startAt=0")
    assert op.spec["operationId"] == "searchForIssuesUsingJql"
    with pytest.raises(SubsetError, match="wiki-markup string"):
        subset().check_answer(
            "GET",
            "/rest/api/2/issue/PROJ-1",
            200,
            {
                "id": "1",
                "key": "PROJ-1",
                "fields": {"description": {"type": "doc", "version": 1, "content": []}},
            },
        )


def test_an_error_body_must_be_an_error_collection() -> None:
    subset().check_answer("GET", "/rest/api/3/myself", 404, {"errorMessages": ["x"], "errors": {}})
    with pytest.raises(SubsetError, match="Additional properties"):
        subset().check_answer("GET", "/rest/api/3/myself", 404, {"message": "x"})


def test_a_request_body_and_query_values_are_held_to_the_description() -> None:
    with pytest.raises(SubsetError, match="Additional properties are not allowed \\('startAt'"):
        subset().check_request("POST", "/rest/api/3/search/jql", "", {"jql": "x", "startAt": 0})
    with pytest.raises(SubsetError, match="'outwardIssue' is a required property"):
        subset().check_request(
            "POST", "/rest/api/3/issueLink", "", {"type": {"name": "Blocks"}, "inwardIssue": {}}
        )
    with pytest.raises(SubsetError, match="maxResults='many' is not an integer"):
        subset().check_request("GET", "/rest/api/3/search/jql", "jql=x&maxResults=many")
    with pytest.raises(SubsetError, match="orderBy='newest' is none of"):
        subset().check_request("GET", "/rest/api/3/issue/PROJ-1/comment", "orderBy=newest")
    with pytest.raises(SubsetError, match="needs a request body"):
        subset().check_request("POST", "/rest/api/3/issue")
    subset().check_request("POST", "/rest/api/3/search/jql", "", {"jql": "x", "fields": ["id"]})


def test_the_extraction_takes_the_served_operations_and_every_schema_they_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {
        "info": {"title": "Jira", "version": "1"},
        "paths": {
            "/rest/api/3/thing/{id}": {
                "get": {
                    "operationId": "getThing",
                    "description": "prose",
                    "parameters": [{"name": "id", "in": "path", "required": True}],
                    "responses": {
                        "200": {
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/A"}}
                            }
                        },
                        "404": {"description": "none"},
                    },
                },
                "delete": {"operationId": "notServed", "responses": {}},
            }
        },
        "components": {
            "schemas": {
                "A": {"properties": {"b": {"$ref": "#/components/schemas/B"}}},
                "B": {"description": "prose", "properties": {"description": {"type": "string"}}},
                "Unreached": {"type": "string"},
                "ErrorCollection": {"type": "object"},
            }
        },
    }
    source = tmp_path / "vendor.json"
    source.write_text(json.dumps(spec))
    monkeypatch.setattr(extract_openapi, "SERVED", (("GET", "/thing/{id}"),))
    monkeypatch.setattr(extract_openapi, "FIELD_SCHEMAS", ())
    first = extract_openapi.extract(source)
    assert first == extract_openapi.extract(source)
    assert first["source"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert sorted(first["operations"]) == ["GET /rest/api/3/thing/{id}"]
    operation = first["operations"]["GET /rest/api/3/thing/{id}"]
    assert operation["responses"] == {"200": {"$ref": "#/components/schemas/A"}, "404": None}
    assert sorted(first["components"]["schemas"]) == ["A", "B", "ErrorCollection"]
    assert first["components"]["schemas"]["B"] == {
        "properties": {"description": {"type": "string"}}
    }
