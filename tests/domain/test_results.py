"""Agent output schemas (generated from the models) and validation of what agents return."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.errors import InvalidAgentOutputError
from domain.models import AGENT_ROLES
from domain.results import (
    ImplementorOutput,
    PlannerResult,
    ReviewerResult,
    output_schema,
    parse_agent_result,
    strict_output_schema,
    validate_output,
)


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value)
    return found


@pytest.mark.parametrize("role", AGENT_ROLES)
def test_output_schema_is_self_contained_json(role: str) -> None:
    schema = output_schema(role)
    text = json.dumps(schema)
    assert "$ref" not in text
    assert "$defs" not in text
    assert schema["type"] == "object"


def test_the_implementor_schema_has_no_patch_field() -> None:
    assert set(output_schema("implementor")["properties"]) == {"role", "outcome", "summary"}


def test_the_reviewer_schema_requires_a_verdict_from_the_two_allowed() -> None:
    review = output_schema("reviewer")["properties"]["review"]
    assert review["properties"]["verdict"]["enum"] == ["approve", "needs-changes"]
    assert {"verdict", "summary"} <= set(review["required"])


@pytest.mark.parametrize("role", AGENT_ROLES)
def test_strict_schema_closes_every_object_and_requires_every_property(role: str) -> None:
    strict = strict_output_schema(role)
    objects = _objects(strict)
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    text = json.dumps(strict)
    for word in ('"default"', '"title"', '"const"', "$ref"):
        assert word not in text


def test_strict_schema_keeps_optional_fields_nullable() -> None:
    strict = strict_output_schema("reviewer")
    line = strict["properties"]["review"]["properties"]["comments"]["items"]["properties"]["line"]
    assert {"type": "null"} in line["anyOf"]


def test_validate_output_returns_the_typed_result_for_each_role() -> None:
    planner = validate_output(
        "planner",
        {
            "role": "planner",
            "create": [
                {"temp_id": "a", "title": "A", "body": "x", "labels": [], "blocked_by": []},
                {"temp_id": "b", "title": "B", "body": "y", "labels": [], "blocked_by": ["a"]},
            ],
            "close": [],
            "update": [{"work_item_id": "4", "body": None, "labels": ["x"]}],
        },
    )
    assert isinstance(planner, PlannerResult)
    assert planner.create[1].blocked_by == ("a",)
    implementor = validate_output("implementor", '{"outcome": "blocked", "summary": "no"}')
    assert isinstance(implementor, ImplementorOutput)
    assert implementor.outcome == "blocked"
    reviewer = validate_output(
        "reviewer", {"review": {"verdict": "approve", "summary": "ok", "comments": []}}
    )
    assert isinstance(reviewer, ReviewerResult)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (None, "no structured output"),
        ("not json", "not JSON"),
        ([1, 2], "expected a JSON object"),
        ({"outcome": "finished", "summary": "x"}, "outcome"),
        ({"outcome": "completed"}, "summary"),
        ({"outcome": "completed", "summary": "x", "patch": "diff"}, "patch"),
        ({"role": "reviewer", "outcome": "completed", "summary": "x"}, "role"),
    ],
)
def test_invalid_implementor_output_is_rejected_naming_the_problem(
    data: object, fragment: str
) -> None:
    with pytest.raises(InvalidAgentOutputError) as caught:
        validate_output("implementor", data)
    assert fragment in str(caught.value)
    assert caught.value.role == "implementor"


def test_a_full_agent_result_parses_by_its_role() -> None:
    result = parse_agent_result(
        {"role": "implementor", "outcome": "completed", "summary": "s", "patch": "d"}
    )
    assert result.role == "implementor"
    assert result.patch == "d"
