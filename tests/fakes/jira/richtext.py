"""Rich text as the fake Jira keeps it: Atlassian Document Format on Cloud (``/rest/api/3``), a
wiki-markup string on Data Center (``/rest/api/2``). The fake stores what it was sent and
answers it back unchanged; it only checks an ADF document's frame (Jira refuses a description or
comment body on v3 that is not a document) and reads its text for tests."""

from __future__ import annotations

from typing import Any

NOT_ADF = "Operation value must be an Atlassian Document (see the Atlassian Document Format)"
NOT_STRING = "Operation value must be a string"


def adf(text: str) -> dict[str, Any]:
    """Plain text as an ADF document: a paragraph per blank-line-separated block, a hard break
    per line break inside one (how the Jira editor stores typed text)."""
    content: list[dict[str, Any]] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        nodes: list[dict[str, Any]] = []
        for n, line in enumerate(block.split("\n")):
            if n:
                nodes.append({"type": "hardBreak"})
            if line:
                nodes.append({"type": "text", "text": line})
        content.append({"type": "paragraph", "content": nodes})
    return {"type": "doc", "version": 1, "content": content}


# The node and mark types of Atlassian's ADF JSON schema (developer.atlassian.com, "Atlassian
# Document Format": nodes and marks). Jira refuses a document holding any other.
NODES = frozenset(
    {
        "blockquote",
        "bulletList",
        "codeBlock",
        "date",
        "decisionItem",
        "decisionList",
        "doc",
        "emoji",
        "expand",
        "hardBreak",
        "heading",
        "inlineCard",
        "blockCard",
        "listItem",
        "media",
        "mediaGroup",
        "mediaInline",
        "mediaSingle",
        "mention",
        "nestedExpand",
        "orderedList",
        "panel",
        "paragraph",
        "placeholder",
        "rule",
        "status",
        "table",
        "tableCell",
        "tableHeader",
        "tableRow",
        "taskItem",
        "taskList",
        "text",
    }
)
MARKS = frozenset(
    {
        "alignment",
        "annotation",
        "backgroundColor",
        "border",
        "breakout",
        "code",
        "em",
        "indentation",
        "link",
        "strike",
        "strong",
        "subsup",
        "textColor",
        "underline",
    }
)


def is_adf(value: Any) -> bool:
    """Whether ``value`` is an ADF document Jira takes: ``{"type": "doc", "version": 1,
    "content": [...]}`` whose nodes and marks are ADF's (``NODES``, ``MARKS``), a text node
    holding a non-empty ``text``, a ``link`` mark an ``href``."""
    if not isinstance(value, dict) or value.get("type") != "doc" or value.get("version") != 1:
        return False
    return _nodes_ok(value.get("content"))


def _nodes_ok(nodes: Any) -> bool:
    if not isinstance(nodes, list):
        return False
    for node in nodes:
        if not isinstance(node, dict) or node.get("type") not in NODES - {"doc"}:
            return False
        if node["type"] == "text":
            if not isinstance(node.get("text"), str) or not node["text"]:
                return False
            if not _marks_ok(node.get("marks", [])):
                return False
        if "content" in node and not _nodes_ok(node["content"]):
            return False
    return True


def _marks_ok(marks: Any) -> bool:
    if not isinstance(marks, list):
        return False
    for mark in marks:
        if not isinstance(mark, dict) or mark.get("type") not in MARKS:
            return False
        if mark["type"] == "link" and not (mark.get("attrs") or {}).get("href"):
            return False
    return True


def text_of(value: Any) -> str:
    """The text of a stored body: a wiki string as it is, an ADF document's text nodes (blocks
    separated by a blank line, hard breaks as line breaks)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    blocks = [_inline(block) for block in value.get("content", [])]
    return "\n\n".join(blocks)


def _inline(node: dict[str, Any]) -> str:
    if node.get("type") == "text":
        return str(node.get("text", ""))
    if node.get("type") == "hardBreak":
        return "\n"
    parts = [_inline(child) for child in node.get("content", [])]
    joiner = "\n" if node.get("type") in ("bulletList", "orderedList", "listItem") else ""
    return joiner.join(parts)
