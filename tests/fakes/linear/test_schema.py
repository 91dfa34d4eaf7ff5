"""The schema the fake Linear serves: built from the committed subset of Linear's SDL, narrowed
as ``extract_schema.py`` says, and refused when the vendor lacks what the subset needs."""

import re
from pathlib import Path

import pytest
from graphql import (
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    build_schema,
    print_ast,
)

from tests.fakes.linear import extract_schema
from tests.fakes.linear.extract_schema import ExtractionError, extract
from tests.fakes.linear.schema import resolvers

SCHEMA = Path(extract_schema.__file__).with_name("schema.graphql")


def test_the_served_schema_builds_and_names_its_source() -> None:
    text = SCHEMA.read_text(encoding="utf-8")
    schema = build_schema(text)
    assert schema.query_type is not None
    assert schema.mutation_type is not None
    assert schema.subscription_type is None
    assert re.search(r"^# source sha256: [0-9a-f]{64}$", text, re.MULTILINE)
    assert re.search(r"^# source date: \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)


def test_the_served_object_types_hold_exactly_the_fields_the_script_lists() -> None:
    schema = build_schema(SCHEMA.read_text(encoding="utf-8"))
    objects = {
        name: tuple(sorted(t.fields))
        for name, t in schema.type_map.items()
        if isinstance(t, (GraphQLObjectType, GraphQLInterfaceType)) and not name.startswith("__")
    }
    listed = {name: tuple(sorted(fields)) for name, fields in extract_schema.OBJECTS.items()}
    assert objects == listed


def test_an_argument_whose_type_is_not_served_is_dropped() -> None:
    schema = build_schema(SCHEMA.read_text(encoding="utf-8"))
    issues = schema.type_map["Query"].fields["issues"]  # type: ignore[union-attr]
    # Linear's `sort: [IssueSortInput!]` is not served: a document using it fails validation.
    assert "sort" not in issues.args
    assert {"filter", "first", "after", "includeArchived", "orderBy"} <= set(issues.args)
    issue_filter = schema.type_map["IssueFilter"]
    assert isinstance(issue_filter, GraphQLInputObjectType)
    assert {"team", "updatedAt", "project", "labels", "state"} <= set(issue_filter.fields)
    assert "cycle" not in issue_filter.fields  # NullableCycleFilter is not served


VENDOR = """
schema { query: Query }
interface Node { id: ID! }
"Linear's description of Issue."
type Issue implements Node { id: ID! title: String! cycle: Cycle }
type Cycle implements Node { id: ID! }
input CycleFilter { id: ID }
type Query { issue(id: String!): Issue! issues(cycle: CycleFilter): [Issue!]! }
"""


def _narrowed(monkeypatch: pytest.MonkeyPatch, objects: dict[str, tuple[str, ...]]) -> str:
    monkeypatch.setattr(extract_schema, "OBJECTS", {"Mutation": ("noop",), **objects})
    monkeypatch.setattr(extract_schema, "INPUTS", ())
    monkeypatch.setattr(extract_schema, "ENUMS", ())
    monkeypatch.setattr(extract_schema, "SCALARS", ())
    monkeypatch.setattr(extract_schema, "SERVED", frozenset(objects) | {"Query", "Mutation"})
    return print_ast(extract(VENDOR + "type Mutation { noop: Boolean }"))


def test_the_subset_keeps_descriptions_and_drops_unserved_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = _narrowed(
        monkeypatch, {"Query": ("issue", "issues"), "Node": ("id",), "Issue": ("id", "title")}
    )
    assert "Linear's description of Issue." in text
    assert "issues: [Issue!]!" in text  # its unserved `cycle:` argument dropped
    assert "cycle" not in text.lower()


def test_a_listed_field_linear_lacks_is_an_extraction_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ExtractionError, match="Linear's Issue has no field estimate"):
        _narrowed(monkeypatch, {"Query": ("issue",), "Node": ("id",), "Issue": ("id", "estimate")})


def test_a_listed_field_of_an_unserved_type_is_an_extraction_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ExtractionError, match=r"Issue.cycle returns Cycle, which is not served"):
        _narrowed(monkeypatch, {"Query": ("issue",), "Node": ("id",), "Issue": ("id", "cycle")})


def test_the_resolvers_cover_exactly_the_served_fields() -> None:
    """Every field the fake resolves is in the served schema, and every served object field
    has a resolver: nothing is served that the fake would answer with nothing."""
    schema = build_schema(SCHEMA.read_text(encoding="utf-8"))
    served = {
        (name, f)
        for name, t in schema.type_map.items()
        if isinstance(t, (GraphQLObjectType, GraphQLInterfaceType)) and not name.startswith("__")
        for f in t.fields
    }
    resolved = {(t, f) for t, fields in resolvers().items() for f in fields}
    assert resolved - served == set()
    assert served - resolved == set()


def test_a_required_argument_of_an_unserved_type_is_an_extraction_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        extract_schema, "OBJECTS", {"Mutation": ("noop",), "Query": ("issues",), "Issue": ("id",)}
    )
    monkeypatch.setattr(extract_schema, "INPUTS", ())
    monkeypatch.setattr(extract_schema, "ENUMS", ())
    monkeypatch.setattr(extract_schema, "SCALARS", ())
    monkeypatch.setattr(extract_schema, "SERVED", frozenset({"Query", "Mutation", "Issue"}))
    vendor = (
        "schema { query: Query mutation: Mutation }\n"
        "type Issue { id: ID! }\ninput CycleFilter { id: ID }\n"
        "type Query { issues(cycle: CycleFilter!): [Issue!]! }\n"
        "type Mutation { noop: Boolean }\n"
    )
    with pytest.raises(ExtractionError, match=r"Query.issues\(cycle:\) is required"):
        extract(vendor)
