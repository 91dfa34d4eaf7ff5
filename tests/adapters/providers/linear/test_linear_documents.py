"""Every GraphQL document the Linear provider sends is valid against the schema the fake Linear
serves (a faithful subset of Linear's public schema), and the provider sends no other."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from graphql import GraphQLSchema, build_schema, parse, validate

from adapters.providers.linear import documents
from tests.fakes.linear.fake import FakeLinear
from tests.support.linear_provider import linear_provider, with_cpe_states

SERVED = Path(__file__).resolve().parents[4] / "tests" / "fakes" / "linear" / "schema.graphql"


@cache
def served() -> GraphQLSchema:
    return build_schema(SERVED.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(documents.ALL))
def test_the_document_validates_against_the_served_schema(name: str) -> None:
    document = parse(documents.ALL[name])
    assert validate(served(), document) == []
    [operation] = [d for d in document.definitions if getattr(d, "operation", None)]
    assert operation.name is not None
    assert operation.name.value == name  # type: ignore[attr-defined]


def test_a_session_of_every_kind_of_call_sends_only_the_provider_s_documents(
    fake_linear: FakeLinear,
) -> None:
    with linear_provider(with_cpe_states(fake_linear), admit_label="cpe:admit") as provider:
        writer, reader = provider.work_item_writer, provider.work_item_reader
        assert writer is not None
        assert reader is not None
        first = writer.create_work_item("First", "b", ("feature",), idempotency_key="k:1")
        second = writer.create_work_item("Second", "b", (), (first,), idempotency_key="k:2")
        writer.update_work_item(second, body="Edited", labels=["x"])
        writer.transition_status(second, "in-review")
        writer.comment(second, "Opened a pull request", idempotency_key="c:1")  # type: ignore[attr-defined]
        writer.close_work_item(first)
        guest_issue = fake_linear.open_issue("By a guest", as_user="guest@example.com")
        fake_linear.add_label(guest_issue, "cpe:admit")
        reader.list_work_items()
        reader.get_work_item_body(second)
    sent = {r.operation_name for r in fake_linear.requests}
    assert sent <= set(documents.ALL)
    assert {"CpeViewer", "CpeTeam", "CpeIssues", "CpeIssueCreate", "CpeIssueHistory"} <= sent
    bodies = {r.document for r in fake_linear.requests}
    assert bodies <= set(documents.ALL.values())
