"""Atlassian Document Format (ADF, Jira Cloud's v3 rich text) <-> Markdown (cpe's text).

``to_markdown(doc)`` reads any ADF document: paragraphs, hard breaks, headings, the strong, em,
strike, code and link marks, code blocks with their language, bullet, ordered and task lists
(nested), block quotes, rules and tables (GFM), and gracefully, as readable text, what Markdown
has no syntax for: panels (a quote opened by "**Info:**"), expands, mentions (``@Name``), emoji,
inline and block cards (the URL), statuses (inline code), dates (``YYYY-MM-DD``, UTC), media (an
``(attachment: name)`` line or an image link). A node it does not know never fails the read: its
text, or its children's, is kept. Anything malformed (a missing ``content``, an ``attrs`` that is
no object) is read as far as it makes sense and never raises.

``from_markdown(text)`` writes ADF that Atlassian's published JSON schema admits (how, and what
becomes of what ADF has no node for: ``adf_build``). This module reads the blocks; their inline
content is read by ``adf_inline``, and text escaped by ``adf_escape``.

Hidden markers. ADF has no comment node, so an HTML comment (``<!-- cpe:key=... -->``, the
markers of adapters/providers/markers.py) is kept as plain text: a line that is a comment
becomes a paragraph (or a line of one, joined by ``hardBreak`` to the lines it touches), and
``to_markdown`` writes such text back verbatim, unescaped. So the generated section cpe appends
to an issue body comes back byte for byte and ``markers.user_body`` / ``markers.has_key`` work on
the Markdown read back. Jira shows those lines as text: they are visible in the issue, not
hidden as on GitHub.

What comes back. ``to_markdown(from_markdown(md))`` gives ``md`` back for what cpe writes
(headings, paragraphs, lists, code, links, quotes, tables, the generated section); for other
Markdown it gives an equivalent text in a normal form (``-`` bullets, ``*``/``**`` emphasis,
blank lines between blocks, no trailing newline) that is itself stable. Text is data:
converting never follows a link, fetches media or runs anything. Nesting deeper than
``MAX_DEPTH`` (ADF) is read as plain text, Markdown nested deeper than the parser's limit
(``MAX_DEPTH`` too) is cut there, so neither can exhaust the stack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.providers.jira.adf_build import MAX_DEPTH, from_markdown
from adapters.providers.jira.adf_escape import escape
from adapters.providers.jira.adf_inline import atom, attributes, children, flat, inline, string

__all__ = ["MAX_DEPTH", "from_markdown", "to_markdown"]

_EMPTY_ITEM = re.compile(r"(?:[-*]|\d+[.)])(?:\n|$)")
_PANEL = {"info": "Info", "note": "Note", "tip": "Tip", "warning": "Warning", "error": "Error"}
_PANEL |= {"success": "Success"}
_INLINE = {"text", "hardBreak", "mention", "emoji", "date", "status", "inlineCard", "mediaInline"}
_INLINE |= {"placeholder", "inlineExtension"}
_LISTS = {"bulletList", "orderedList", "taskList", "decisionList"}


def to_markdown(doc: Mapping[str, Any] | None) -> str:
    """The Markdown of an ADF document (None or anything not a document: "")."""
    if not isinstance(doc, Mapping):
        return ""
    return _blocks(children(doc), 0).strip("\n")


def _blocks(nodes: list[Mapping[str, Any]], depth: int, *, tight: bool = False) -> str:
    """Blocks apart by blank lines (a list right after a line of its item: by a newline when
    ``tight``); two lists in a row alternate their markers, or Markdown would join them."""
    out, previous, alternate = "", "", False
    for node in nodes:
        kind = string(node.get("type"))
        family = "ordered" if kind == "orderedList" else "bullet" if kind in _LISTS else ""
        alternate = not alternate if family and family == previous else False
        text = _list(node, depth, alternate) if family else _block(node, depth)
        if text:  # (an empty item cannot interrupt a paragraph: a blank line before it)
            gap = "\n" if tight and family and not _EMPTY_ITEM.match(text) else "\n\n"
            out, previous = (out + gap + text if out else text), family
    return out


def _block(node: Mapping[str, Any], depth: int) -> str:
    kind, attrs = string(node.get("type")), attributes(node)
    if depth >= MAX_DEPTH:
        return flat(node)
    if kind == "paragraph":
        return inline(children(node), depth)
    if kind == "heading":
        level = attrs.get("level")
        level = min(max(level, 1), 6) if isinstance(level, int) else 1
        text = inline(children(node), depth, one_line=True)
        closing = text.endswith("#") and not text.endswith("\\#")
        text = text[:-1] + "\\#" if closing else text  # no closing sequence
        return f"{'#' * level} {text}" if text else ""
    if kind == "codeBlock":
        return _code_block(node)
    if kind in _LISTS:
        return _list(node, depth, False)
    if kind == "blockquote":
        return _quote(_blocks(_quoted(children(node)), depth + 1))
    if kind == "panel":
        title = _PANEL.get(string(attrs.get("panelType")), "Note")
        return _quote(f"**{title}:**\n\n{_blocks(_quoted(children(node)), depth + 1)}".strip())
    if kind == "rule":
        return "---"
    if kind == "table":
        return _table(node, depth)
    if kind in ("expand", "nestedExpand"):
        title = escape(string(attrs.get("title")).strip())
        return f"**{title}**\n\n" * bool(title) + _blocks(children(node), depth + 1)
    if kind in ("mediaSingle", "mediaGroup"):
        return "\n".join(atom(child) for child in children(node))
    if kind in ("blockCard", "embedCard"):
        return atom({**node, "type": "inlineCard"})
    kids = children(node)
    if kids and all(_is_inline(child) for child in kids):
        return inline(kids, depth)
    if kids:
        return _blocks(kids, depth + 1)
    return atom(node)


def _quoted(nodes: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Blocks as a quote holds them: a heading (no ADF quote holds one) as a strong line."""
    strong = {"type": "strong"}
    return [
        {
            "type": "paragraph",
            "content": [
                {**n, "marks": [*_list_of(n.get("marks")), strong]} for n in children(node)
            ],
        }
        if node.get("type") == "heading"
        else node
        for node in nodes
    ]


def _list_of(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _is_inline(node: Mapping[str, Any]) -> bool:
    return string(node.get("type")) in _INLINE or "text" in node


def _code_block(node: Mapping[str, Any]) -> str:
    code = "".join(string(child.get("text")) for child in children(node))
    runs = [len(run) for run in re.findall(r"`{3,}", code)]
    fence = "`" * max([3, *(n + 1 for n in runs)])
    language = re.sub(r"[^\w#+.-]", "", string(attributes(node).get("language")))
    return f"{fence}{language}\n{code}\n{fence}" if code else f"{fence}{language}\n{fence}"


def _list(node: Mapping[str, Any], depth: int, alternate: bool) -> str:
    if depth >= MAX_DEPTH:
        return flat(node)
    kind, order = node.get("type"), attributes(node).get("order")
    number = order if isinstance(order, int) and order >= 0 else 1
    items: list[str] = []
    bullet = "*" if alternate else "-"
    for item in children(node):
        if string(item.get("type")) in _LISTS:  # a nested task list: the previous item's sublist
            nested = _indent("\n" + _list(item, depth + 1, False), 2)[1:]
            items.append(f"{items.pop()}\n{nested}" if items else nested)
            continue
        if kind == "orderedList":
            marker, number = f"{number}{')' if alternate else '.'} ", number + 1
        elif item.get("type") == "taskItem":
            box = "[x]" if attributes(item).get("state") == "DONE" else "[ ]"
            marker = f"{bullet} {box} "
        else:
            marker = f"{bullet} "
        body = _indent(_item_body(item, depth + 1), len(marker))
        kids = children(item)
        if (
            body
            and kids
            and kids[0].get("type") == "paragraph"
            and not inline(children(kids[0]), 0)
        ):
            marker = marker.rstrip() + "\n" + " " * len(marker)  # no text before its sublist
        items.append((marker + body).rstrip())
    return "\n".join(items)


def _item_body(item: Mapping[str, Any], depth: int) -> str:
    kids = children(item)
    if kids and all(_is_inline(child) for child in kids):
        return inline(kids, depth)
    return _blocks(kids, depth, tight=True)


def _indent(text: str, width: int) -> str:
    pad = " " * width
    return "\n".join(
        (pad + line if line and i else line) for i, line in enumerate(text.split("\n"))
    )


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n")) if text else ""


def _table(node: Mapping[str, Any], depth: int) -> str:
    rows = []
    for row in children(node):
        cells = []
        for cell in children(row):
            text = _blocks(children(cell), depth + 1)
            cells.append(text.replace("\n", " ").strip().replace("|", "\\|"))
        rows.append(cells)
    rows = [row for row in rows if row]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = [rows[0], ["---"] * width, *rows[1:]]
    return "\n".join(("| " + " | ".join(cells) + " |").replace("|  |", "| |") for cells in lines)
