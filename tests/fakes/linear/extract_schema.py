"""Extract the schema the fake Linear serves (``schema.graphql`` beside this file) from Linear's
public GraphQL SDL.

Run by hand when the vendor description changes (the output is deterministic: the same source
and date give the same bytes)::

    .venv/bin/python -m tests.fakes.linear.extract_schema \\
        /work/shared/vendor/linear-schema.graphql --date 2026-07-22

The served schema is a faithful subset of Linear's: every definition is copied from the vendor
SDL (descriptions and deprecations kept) and only narrowed, never changed, so a document valid
against the subset is valid against Linear's:

- object types keep the fields listed in ``OBJECTS`` (what the fake resolves);
- input types keep every field whose type is served (a filter key the fake does not evaluate
  is refused by the fake with a clear error, never ignored);
- a field's or an input's argument whose type is not served is dropped; a *required* one
  whose type is not served is an extraction error, as is a listed field that Linear lacks or
  whose type is not served;
- a type's interfaces are kept when served.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

from graphql import (
    DocumentNode,
    EnumTypeDefinitionNode,
    FieldDefinitionNode,
    InputObjectTypeDefinitionNode,
    InputValueDefinitionNode,
    InterfaceTypeDefinitionNode,
    ListTypeNode,
    NamedTypeNode,
    NameNode,
    NonNullTypeNode,
    ObjectTypeDefinitionNode,
    OperationType,
    OperationTypeDefinitionNode,
    ScalarTypeDefinitionNode,
    SchemaDefinitionNode,
    TypeNode,
    assert_valid_schema,
    build_ast_schema,
    parse,
    print_ast,
)

OUTPUT = Path(__file__).with_name("schema.graphql")

_ENTITY = ("id", "createdAt", "updatedAt", "archivedAt")
_CONNECTION = ("edges", "nodes", "pageInfo")
_EDGE = ("node", "cursor")

# Object and interface types served, with the fields the fake resolves.
OBJECTS: dict[str, tuple[str, ...]] = {
    "Query": (
        "viewer",
        "user",
        "users",
        "teams",
        "team",
        "issues",
        "issue",
        "issueLabels",
        "workflowStates",
        "comments",
        "projects",
    ),
    "Mutation": (
        "issueCreate",
        "issueUpdate",
        "issueArchive",
        "issueRelationCreate",
        "issueRelationDelete",
        "commentCreate",
        "issueLabelCreate",
    ),
    "Node": ("id",),
    "User": (
        *_ENTITY,
        "name",
        "displayName",
        "email",
        "guest",
        "admin",
        "active",
        "isMe",
        "teams",
        "teamMemberships",
    ),
    "Team": (
        *_ENTITY,
        "key",
        "name",
        "states",
        "labels",
        "members",
        "memberships",
        "issues",
    ),
    "TeamMembership": (*_ENTITY, "owner", "team", "user"),
    "WorkflowState": (
        *_ENTITY,
        "name",
        "type",
        "position",
        "color",
        "description",
        "team",
    ),
    "IssueLabel": (*_ENTITY, "name", "color", "description", "isGroup", "team"),
    "Project": (*_ENTITY, "name", "slugId", "url"),
    "Issue": (
        *_ENTITY,
        "identifier",
        "number",
        "title",
        "description",
        "url",
        "priority",
        "trashed",
        "startedAt",
        "completedAt",
        "canceledAt",
        "state",
        "team",
        "creator",
        "project",
        "labelIds",
        "labels",
        "relations",
        "inverseRelations",
        "history",
        "comments",
    ),
    "IssueRelation": (*_ENTITY, "type", "issue", "relatedIssue"),
    "IssueHistory": (
        *_ENTITY,
        "issue",
        "actor",
        "actorId",
        "addedLabelIds",
        "removedLabelIds",
        "fromStateId",
        "toStateId",
    ),
    "Comment": (*_ENTITY, "body", "url", "editedAt", "issue", "issueId", "user"),
    "PageInfo": ("hasNextPage", "hasPreviousPage", "startCursor", "endCursor"),
    **{
        f"{node}Connection": _CONNECTION
        for node in (
            "User",
            "Team",
            "TeamMembership",
            "WorkflowState",
            "IssueLabel",
            "Project",
            "Issue",
            "IssueRelation",
            "IssueHistory",
            "Comment",
        )
    },
    **{
        f"{node}Edge": _EDGE
        for node in (
            "User",
            "Team",
            "TeamMembership",
            "WorkflowState",
            "IssueLabel",
            "Project",
            "Issue",
            "IssueRelation",
            "IssueHistory",
            "Comment",
        )
    },
    "IssuePayload": ("lastSyncId", "issue", "success"),
    "IssueArchivePayload": ("lastSyncId", "entity", "success"),
    "IssueRelationPayload": ("lastSyncId", "issueRelation", "success"),
    "DeletePayload": ("lastSyncId", "entityId", "success"),
    "CommentPayload": ("lastSyncId", "comment", "success"),
    "IssueLabelPayload": ("lastSyncId", "issueLabel", "success"),
}

# Input types served whole (less the fields whose types are not served).
INPUTS: tuple[str, ...] = (
    "IssueCreateInput",
    "IssueUpdateInput",
    "IssueRelationCreateInput",
    "CommentCreateInput",
    "IssueLabelCreateInput",
    "IssueFilter",
    "TeamFilter",
    "WorkflowStateFilter",
    "IssueLabelFilter",
    "IssueLabelCollectionFilter",
    "UserFilter",
    "NullableUserFilter",
    "CommentFilter",
    "ProjectFilter",
    "NullableProjectFilter",
    "IDComparator",
    "IssueIDComparator",
    "StringComparator",
    "NullableStringComparator",
    "DateComparator",
    "NullableDateComparator",
    "BooleanComparator",
    "NumberComparator",
    "NullableNumberComparator",
)

ENUMS: tuple[str, ...] = ("IssueRelationType", "PaginationOrderBy")

# GraphQL's own scalars need no definition; Linear's custom ones served are copied.
BUILTIN_SCALARS = frozenset({"String", "Boolean", "Int", "Float", "ID"})
SCALARS: tuple[str, ...] = ("DateTime", "DateTimeOrDuration")

SERVED = frozenset(OBJECTS) | frozenset(INPUTS) | frozenset(ENUMS) | frozenset(SCALARS)


class ExtractionError(Exception):
    """The vendor SDL does not have what the served subset needs."""


def named(type_node: TypeNode) -> str:
    """The named type under list and non-null wrappers."""
    while isinstance(type_node, (ListTypeNode, NonNullTypeNode)):
        type_node = type_node.type
    assert isinstance(type_node, NamedTypeNode)
    return type_node.name.value


def served(type_node: TypeNode) -> bool:
    name = named(type_node)
    return name in SERVED or name in BUILTIN_SCALARS


def _arguments(
    owner: str, arguments: Iterable[InputValueDefinitionNode]
) -> tuple[InputValueDefinitionNode, ...]:
    kept = []
    for argument in arguments:
        if served(argument.type):
            kept.append(argument)
        elif isinstance(argument.type, NonNullTypeNode) and argument.default_value is None:
            raise ExtractionError(
                f"{owner}({argument.name.value}:) is required and its type "
                f"{named(argument.type)} is not served: add it to the served types"
            )
    return tuple(kept)


def _object(node: ObjectTypeDefinitionNode | InterfaceTypeDefinitionNode) -> object:
    name = node.name.value
    wanted = OBJECTS[name]
    fields: dict[str, FieldDefinitionNode] = {f.name.value: f for f in node.fields or ()}
    kept = []
    for field_name in wanted:
        field = fields.get(field_name)
        if field is None:
            raise ExtractionError(f"Linear's {name} has no field {field_name}")
        if not served(field.type):
            raise ExtractionError(
                f"{name}.{field_name} returns {named(field.type)}, which is not served"
            )
        kept.append(field)
    # Keep the vendor's order (alphabetical in Linear's SDL).
    order = {f.name.value: i for i, f in enumerate(node.fields or ())}
    kept.sort(key=lambda f: order[f.name.value])
    narrowed = tuple(
        FieldDefinitionNode(
            description=f.description,
            name=f.name,
            arguments=_arguments(f"{name}.{f.name.value}", f.arguments or ()),
            type=f.type,
            directives=f.directives,
        )
        for f in kept
    )
    interfaces = tuple(i for i in node.interfaces or () if i.name.value in SERVED)
    return type(node)(
        description=node.description,
        name=node.name,
        interfaces=interfaces,
        directives=node.directives,
        fields=narrowed,
    )


def _input(node: InputObjectTypeDefinitionNode) -> InputObjectTypeDefinitionNode:
    return InputObjectTypeDefinitionNode(
        description=node.description,
        name=node.name,
        directives=node.directives,
        fields=_arguments(node.name.value, node.fields or ()),
    )


def extract(source: str) -> DocumentNode:
    """The served subset of the vendor SDL ``source``, as a document."""
    document = parse(source)
    definitions: list[object] = [
        SchemaDefinitionNode(
            operation_types=(
                OperationTypeDefinitionNode(
                    operation=OperationType.QUERY, type=NamedTypeNode(name=_name("Query"))
                ),
                OperationTypeDefinitionNode(
                    operation=OperationType.MUTATION,
                    type=NamedTypeNode(name=_name("Mutation")),
                ),
            ),
            directives=(),
        )
    ]
    found: set[str] = set()
    for node in document.definitions:
        name_node = getattr(node, "name", None)
        name = name_node.value if name_node is not None else ""
        if name not in SERVED:
            continue
        found.add(name)
        if isinstance(node, (ObjectTypeDefinitionNode, InterfaceTypeDefinitionNode)):
            definitions.append(_object(node))
        elif isinstance(node, InputObjectTypeDefinitionNode):
            definitions.append(_input(node))
        elif isinstance(node, (EnumTypeDefinitionNode, ScalarTypeDefinitionNode)):
            definitions.append(node)
    missing = sorted(SERVED - found)
    if missing:
        raise ExtractionError(f"Linear's SDL lacks the served types: {', '.join(missing)}")
    subset = DocumentNode(definitions=tuple(definitions))
    assert_valid_schema(build_ast_schema(subset))  # raises if the subset is not valid
    return subset


def _name(value: str) -> NameNode:
    return NameNode(value=value)


def render(source: bytes, date: str) -> str:
    """The served schema's text: a header naming the source, then the subset."""
    digest = hashlib.sha256(source).hexdigest()
    header = (
        "# The schema the fake Linear serves (tests/fakes/linear/): a subset of Linear's public\n"
        "# GraphQL SDL, extracted by tests/fakes/linear/extract_schema.py. Do not edit by hand.\n"
        "# source: linear/linear packages/sdk/src/schema.graphql "
        "(shared/vendor/linear-schema.graphql)\n"
        f"# source sha256: {digest}\n"
        f"# source date: {date}\n\n"
    )
    return header + print_ast(extract(source.decode("utf-8"))) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="Linear's SDL (linear-schema.graphql)")
    parser.add_argument("--date", required=True, help="the source's date (YYYY-MM-DD)")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    options = parser.parse_args(argv)
    try:
        text = render(options.source.read_bytes(), options.date)
    except ExtractionError as error:
        print(f"extract_schema: {error}", file=sys.stderr)
        return 1
    options.output.write_text(text, encoding="utf-8")
    print(f"wrote {options.output} ({len(text):,} characters)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
