"""What ``adf.from_markdown`` writes is ADF that Atlassian's published JSON schema admits.

The schema itself is not copied here. ``NODES`` and ``MARKS`` are a small table written from it
(http://go.atlassian.com/adf-json-schema, the ``@atlaskit/adf-schema`` package's
``json-schema/v1/full.json``: its ``*_node`` and ``*_mark`` definitions) for the node and mark
types cpe writes: the attributes each requires and admits, the node types its content admits
(where an earlier version of the schema admitted less, the smaller set), the content's minimum
length. Every document written from a corpus of Markdown, and from generated Markdown, is walked
against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.providers.jira import adf

INLINE = frozenset({"text", "hardBreak", "mention", "emoji", "date", "status", "inlineCard"})
# doc_node's content: the top-level blocks (those cpe writes among them).
TOP = frozenset({"paragraph", "heading", "codeBlock", "bulletList", "orderedList", "taskList"})
TOP |= {"blockquote", "rule", "table", "panel", "mediaSingle", "mediaGroup", "expand"}
# table_cell_content (the blocks of non_nestable_block_content, less table and expand).
CELL = TOP - {"table", "expand"}


@dataclass(frozen=True)
class Node:
    required: frozenset[str] = frozenset()  # required attributes
    admitted: frozenset[str] = frozenset()  # all the attributes it may carry
    content: frozenset[str] | None = None  # node types of its content; None: no content
    first: frozenset[str] | None = None  # what the first child must be, when it is narrower
    min_items: int = 0
    content_required: bool = False
    checks: dict[str, Any] = field(default_factory=dict)  # attribute -> allowed values


def _node(**kwargs: Any) -> Node:
    for key in ("required", "admitted", "content", "first"):
        if key in kwargs:
            kwargs[key] = frozenset(kwargs[key])
    return Node(**kwargs)


NODES: dict[str, Node] = {
    "doc": _node(content=TOP, content_required=True),
    "paragraph": _node(content=INLINE),
    "heading": _node(
        required={"level"}, admitted={"level"}, content=INLINE, checks={"level": range(1, 7)}
    ),
    "codeBlock": _node(admitted={"language"}, content={"text"}),
    "bulletList": _node(content={"listItem"}, min_items=1, content_required=True),
    "orderedList": _node(
        required={"order"},
        admitted={"order"},
        content={"listItem"},
        min_items=1,
        content_required=True,
    ),
    "listItem": _node(
        content={"paragraph", "codeBlock", "bulletList", "orderedList", "mediaSingle"},
        first={"paragraph", "codeBlock", "mediaSingle"},
        min_items=1,
        content_required=True,
    ),
    "taskList": _node(
        required={"localId"},
        admitted={"localId"},
        content={"taskItem", "taskList"},
        first={"taskItem"},
        min_items=1,
        content_required=True,
    ),
    "taskItem": _node(
        required={"localId", "state"},
        admitted={"localId", "state"},
        content=INLINE,
        checks={"state": {"TODO", "DONE"}},
    ),
    # paragraphs only in the schema's earlier versions; lists and code blocks since.
    "blockquote": _node(
        content={"paragraph", "bulletList", "orderedList", "codeBlock"},
        min_items=1,
        content_required=True,
    ),
    "rule": _node(),
    "table": _node(
        admitted={"isNumberColumnEnabled", "layout", "localId"},
        content={"tableRow"},
        min_items=1,
        content_required=True,
        checks={
            "layout": {"wide", "full-width", "default"},
            "isNumberColumnEnabled": {False, True},
        },
    ),
    "tableRow": _node(content={"tableCell", "tableHeader"}, content_required=True),
    "tableCell": _node(
        admitted={"colspan", "rowspan", "colwidth", "background"},
        content=CELL,
        min_items=1,
        content_required=True,
    ),
    "tableHeader": _node(
        admitted={"colspan", "rowspan", "colwidth", "background"},
        content=CELL,
        min_items=1,
        content_required=True,
    ),
    "hardBreak": _node(admitted={"text"}, checks={"text": {"\n"}}),
    "text": _node(),
}
# mark type -> (required attributes, admitted attributes)
MARKS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "strong": (frozenset(), frozenset()),
    "em": (frozenset(), frozenset()),
    "strike": (frozenset(), frozenset()),
    "code": (frozenset(), frozenset()),
    "link": (
        frozenset({"href"}),
        frozenset({"href", "title", "id", "collection", "occurrenceKey"}),
    ),
}
# code_inline_node: a code mark goes with these alone.
WITH_CODE = {"code", "link"}


def problems(node: Mapping[str, Any], path: str = "doc") -> list[str]:
    """Where a node breaks the table, each as "path: what"."""
    found: list[str] = []
    kind = node.get("type")
    rule = NODES.get(str(kind))
    if rule is None:
        return [f"{path}: a node type cpe has no rule for: {kind!r}"]
    keys = {"type", "attrs", "content", "marks", "text"} | ({"version"} if kind == "doc" else set())
    found += [f"{path}: unknown property {key!r}" for key in set(node) - keys]
    if kind == "doc" and node.get("version") != 1:
        found.append(f"{path}: version is not 1")
    attrs = node.get("attrs", {})
    if not isinstance(attrs, Mapping):
        return [*found, f"{path}: attrs is no object"]
    found += [f"{path}: misses attribute {name!r}" for name in rule.required - set(attrs)]
    found += [f"{path}: unknown attribute {name!r}" for name in set(attrs) - rule.admitted]
    for name, allowed in rule.checks.items():
        if name in attrs and attrs[name] not in allowed:
            found.append(f"{path}: attribute {name}={attrs[name]!r} is not allowed")
    if kind == "orderedList" and not (isinstance(attrs.get("order"), int) and attrs["order"] >= 1):
        found.append(f"{path}: order must be a number >= 1")
    if kind == "text":
        found += _text_problems(node, path)
    elif "marks" in node:
        found.append(f"{path}: marks on a {kind}")
    content = node.get("content")
    if content is None:
        if rule.content_required:
            found.append(f"{path}: content is required")
        return found
    if rule.content is None or not isinstance(content, list):
        return [*found, f"{path}: content not admitted here"]
    if len(content) < rule.min_items:
        found.append(f"{path}: fewer than {rule.min_items} children")
    for i, child in enumerate(content):
        allowed = rule.first if i == 0 and rule.first is not None else rule.content
        if child.get("type") not in allowed:
            found.append(f"{path}.{i}: {child.get('type')!r} inside {kind}")
        if kind == "codeBlock" and "marks" in child:
            found.append(f"{path}.{i}: marks inside a code block")
        found += problems(child, f"{path}.{i}")
    return found


def _text_problems(node: Mapping[str, Any], path: str) -> list[str]:
    found = []
    if not isinstance(node.get("text"), str) or not node["text"]:
        found.append(f"{path}: text must be a non-empty string")
    marks = node.get("marks", [])
    kinds = [mark.get("type") for mark in marks]
    if len(kinds) != len(set(kinds)):
        found.append(f"{path}: a mark twice")
    if "code" in kinds and not set(kinds) <= WITH_CODE:
        found.append(f"{path}: code with {kinds}")
    for mark in marks:
        if mark.get("type") not in MARKS:
            found.append(f"{path}: unknown mark {mark.get('type')!r}")
            continue
        required, admitted = MARKS[mark["type"]]
        attrs = mark.get("attrs", {})
        found += [f"{path}: {mark['type']} misses {name}" for name in required - set(attrs)]
        found += [f"{path}: {mark['type']} with {name}" for name in set(attrs) - admitted]
        if set(mark) - {"type", "attrs"}:
            found.append(f"{path}: unknown property of a mark")
        if mark["type"] == "link" and not isinstance(attrs.get("href"), str):
            found.append(f"{path}: link href is no string")
    return found


CORPUS = [
    "",
    "# H1\n## H2\n### H3\n#### H4\n##### H5\n###### H6",
    '**b** *i* ~~s~~ `c` [l](https://e.x "t") ***bi*** **[`code link`](https://e.x)**',
    "a\nb  \nc\\\nd",
    "- a\n  - b\n    1. c\n       ```\n       code\n       ```\n- \n-\n  - first is a list",
    "3. start\n0. zero start",
    "0. zero\n1. one",
    "- [ ] t\n  - [x] nested task\n- [X] u",
    "- [ ] t\n  - plain nested",
    "- # heading in an item\n- > quote in an item\n- | a |\n  | - |\n  | 1 |\n- ---",
    "> # heading in a quote\n> > nested\n> - list\n> ```\n> code\n> ```\n> | a |\n> | - |\n> | 1 |",
    "> - [ ] task in a quote",
    "| a | b |\n| :- | -: |\n| `x` | **y** |\n| | |",
    "| a |\n| - |\n| - [ ] x |",
    "```js\nlet x = 1\n```\n\n```\n\n```\n\n    indented",
    "<!-- cpe:generated -->\nBlocked by PROJ-1\n<!-- cpe:key=plan:1:a -->",
    "<div>\n*raw*\n</div>\n\n<!--\nmulti\n\nline\n-->",
    "![alt](https://e.x/i.png) ![](https://e.x/j.png) [x](javascript:alert(1))",
    "&amp; &#169; \\* \\_ <https://e.x> <a@b.c>",
    "Setext\n======\n\nand\n---",
    ">" * 60 + " deep",
    "- " * 60 + "deep",
    "***",
    "a\n\n\n\n",
]


@pytest.mark.parametrize("markdown", CORPUS)
def test_what_is_written_is_admitted_by_the_schema(markdown: str) -> None:
    written = adf.from_markdown(markdown)
    assert written["type"] == "doc"
    assert problems(written) == []


def test_the_table_catches_what_the_schema_refuses() -> None:
    """The walk itself fails on what the schema refuses, or the tests above would prove nothing."""
    bad = {
        "type": "doc",
        "version": 1,
        "content": [
            {"type": "heading", "content": []},
            {"type": "listItem", "content": []},
            {
                "type": "bulletList",
                "content": [
                    {"type": "listItem", "content": [{"type": "bulletList", "content": []}]}
                ],
            },
            {
                "type": "paragraph",
                "content": [
                    {"type": "text", "text": ""},
                    {"type": "text", "text": "x", "marks": [{"type": "code"}, {"type": "strong"}]},
                    {"type": "text", "text": "y", "marks": [{"type": "link", "attrs": {}}]},
                ],
            },
            {
                "type": "taskList",
                "attrs": {},
                "content": [{"type": "taskList", "attrs": {"localId": "a"}, "content": []}],
            },
            {
                "type": "codeBlock",
                "content": [{"type": "text", "text": "c", "marks": [{"type": "em"}]}],
            },
            {"type": "blockquote", "content": [{"type": "heading", "attrs": {"level": 7}}]},
        ],
    }
    found = "\n".join(problems(bad))
    for expected in [
        "doc.0: misses attribute 'level'",
        "doc.1: 'listItem' inside doc",
        "doc.2.0.0: 'bulletList' inside listItem",
        "doc.2.0.0: fewer than 1 children",
        "doc.3.0: text must be a non-empty string",
        "doc.3.1: code with ['code', 'strong']",
        "doc.3.2: link misses href",
        "doc.4: misses attribute 'localId'",
        "doc.4.0: 'taskList' inside taskList",
        "doc.5.0: marks inside a code block",
        "doc.6.0: 'heading' inside blockquote",
        "doc.6.0: attribute level=7 is not allowed",
    ]:
        assert expected in found


_PIECES = st.sampled_from(
    [
        *"ab1 .#*_`[]()<>!~\\-+>|&\n:",
        *("\n\n", "- ", "1. ", "- [ ] ", "```", "<!-- c -->", "**", "    ", "> ", "---"),
        *("| a |\n| - |\n", "[a](https://e.x)", "![i](https://e.x)"),
    ]
)


@settings(
    max_examples=300, suppress_health_check=list(HealthCheck), deadline=None, derandomize=True
)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_generated_markdown_is_written_as_admitted_adf(markdown: str) -> None:
    assert problems(adf.from_markdown(markdown)) == []
