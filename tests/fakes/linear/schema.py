"""The executable schema of the fake Linear: ``schema.graphql`` (the served subset of
Linear's SDL) with the resolvers of ``fields.py`` and ``roots.py`` attached; and the
complexity of a document, as Linear counts it.

Complexity (Linear's rate-limiting guide): each object costs 1 point and each scalar property
0.1; a connection multiplies what it holds by its page size (``first`` or ``last``, 50 when
neither is given); the total is rounded up. A query over ``MAX_COMPLEXITY`` (10,000 points) is
refused before it runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    build_schema,
    get_named_type,
    is_leaf_type,
)

from tests.fakes.linear.connections import DEFAULT_PAGE
from tests.fakes.linear.fields import FIELDS, Resolver
from tests.fakes.linear.roots import ROOTS

SDL = Path(__file__).with_name("schema.graphql")
MAX_COMPLEXITY = 10_000


def resolvers() -> dict[str, dict[str, Resolver]]:
    """Every field the fake resolves, by type."""
    return {**FIELDS, **ROOTS}


@cache
def served_schema() -> GraphQLSchema:
    """The schema with its resolvers (built once: the resolvers keep no state)."""
    schema = build_schema(SDL.read_text(encoding="utf-8"))
    for type_name, fields in resolvers().items():
        served = schema.type_map[type_name]
        assert isinstance(served, GraphQLObjectType) or type_name == "Node", type_name
        for name, resolve in fields.items():
            served.fields[name].resolve = resolve  # type: ignore[union-attr]
    return schema


def complexity(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Mapping[str, Any],
) -> int:
    """The points ``operation`` costs, as Linear counts them (rounded up)."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    root = schema.mutation_type if operation.operation.value == "mutation" else schema.query_type
    assert root is not None
    return math.ceil(_cost(schema, operation.selection_set, root, fragments, variables) - 1e-9)


def _cost(
    schema: GraphQLSchema,
    selections: SelectionSetNode | None,
    parent: GraphQLObjectType,
    fragments: Mapping[str, FragmentDefinitionNode],
    variables: Mapping[str, Any],
) -> float:
    total = 0.0
    for node in selections.selections if selections else ():
        if isinstance(node, FieldNode):
            field = parent.fields.get(node.name.value)
            if field is None:  # __typename
                total += 0.1
                continue
            named = get_named_type(field.type)
            if is_leaf_type(named) or not isinstance(named, GraphQLObjectType):
                total += 0.1
                continue
            inner = _cost(schema, node.selection_set, named, fragments, variables)
            if named.name.endswith("Connection"):
                total += 1 + _page(node, variables) * inner
            else:
                total += 1 + inner
        elif isinstance(node, InlineFragmentNode):
            kind = (
                schema.type_map.get(node.type_condition.name.value)
                if node.type_condition
                else parent
            )
            target = kind if isinstance(kind, GraphQLObjectType) else parent
            total += _cost(schema, node.selection_set, target, fragments, variables)
        elif isinstance(node, FragmentSpreadNode):
            fragment = fragments.get(node.name.value)
            if fragment is not None:
                kind = schema.type_map.get(fragment.type_condition.name.value)
                target = kind if isinstance(kind, GraphQLObjectType) else parent
                total += _cost(schema, fragment.selection_set, target, fragments, variables)
    return total


def _page(node: FieldNode, variables: Mapping[str, Any]) -> int:
    for argument in node.arguments or ():
        if argument.name.value not in ("first", "last"):
            continue
        value = argument.value
        if isinstance(value, IntValueNode):
            return int(value.value)
        if isinstance(value, VariableNode):
            given = variables.get(value.name.value)
            if isinstance(given, int):
                return given
    return DEFAULT_PAGE
