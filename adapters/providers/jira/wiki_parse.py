"""Jira wiki markup -> Atlassian Document Format: what ``wiki.to_markdown`` reads (see ``wiki``'s
docstring for the markup covered). A parser of its own, line by line for the blocks (the inline
markup: ``wiki_inline``); it never fails on what it does not know (that stays text), and quotes,
panels and list levels nested deeper than ``MAX_DEPTH`` are kept as plain text or flattened.
"""

from __future__ import annotations

import re
from typing import Any

from adapters.providers.jira.adf_build import (
    IN_DOC,
    IN_QUOTE,
    MAX_DEPTH,
    Builder,
    is_box,
    paragraph,
)
from adapters.providers.jira.wiki_inline import inline

__all__ = ["MAX_DEPTH", "parse"]

_MACRO = re.compile(r"^\{(code|noformat|quote|panel|info|note|tip|warning)(?::([^}]*))?\}(.*)$")
_HEADING = re.compile(r"^h([1-6])\.\s+(.*)$")
_LIST = re.compile(r"^([*#]+|-)\s(.*)$")  # "* ": an empty item
_PANELS = {"info": "info", "note": "note", "tip": "success", "warning": "warning", "panel": "info"}
_IN_PANEL = {"paragraph", "heading", "bulletList", "orderedList"}
_CODE = ("code", "noformat")
_Entry = tuple[str, str, list[dict[str, Any]]]


def parse(text: str) -> dict[str, Any]:
    """The ADF document of a wiki markup string."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return {"type": "doc", "version": 1, "content": _blocks(lines, 0, Builder())}


def _blocks(lines: list[str], depth: int, builder: Builder) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(paragraph(inline("\n".join(para), [], 0)))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i].strip()
        macro, heading, item = (
            _MACRO.match(line),
            _HEADING.match(line),
            _LIST.match(lines[i].lstrip()),
        )
        if not line or macro or heading or item or line == "----" or line.startswith(("bq. ", "|")):
            flush()
        if not line:
            i += 1
        elif macro:
            body, i = _until(lines, i, macro.group(1), macro.group(3))
            out += _macro(macro.group(1), macro.group(2) or "", body, depth, builder)
        elif heading:
            content = inline(heading.group(2), [], 0)
            out += [
                {"type": "heading", "attrs": {"level": int(heading.group(1))}, "content": content}
            ]
            i += 1
        elif line == "----":
            out.append({"type": "rule"})
            i += 1
        elif line.startswith("bq. "):
            out.append({"type": "blockquote", "content": [paragraph(inline(line[4:], [], 0))]})
            i += 1
        elif item:
            entries: list[_Entry] = []
            while i < len(lines):
                if match := _LIST.match(lines[i].lstrip()):
                    markers = match.group(1)[:MAX_DEPTH]  # deeper: kept at the deepest level
                    entries.append((markers, match.group(2).strip(), []))
                    i += 1
                elif (code := _MACRO.match(lines[i].strip())) and code.group(1) in _CODE:
                    body, i = _until(lines, i, code.group(1), code.group(3))
                    entries[-1][2].extend(
                        _macro(code.group(1), code.group(2) or "", body, 0, builder)
                    )
                else:
                    break
            out += _lists(entries, builder)
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_row(lines[i].strip()))
                i += 1
            out.append(_table(rows))
        else:
            para.append(line)
            i += 1
    flush()
    return out


def _until(lines: list[str], i: int, name: str, rest: str) -> tuple[str, int]:
    """The body of a ``{name}`` macro opened on line i (``rest`` after its tag) up to its
    closing ``{name}``, and the line after it (whatever follows the closing tag is put back)."""
    body, close = [], "{" + name + "}"
    while True:
        if close in rest:
            head, tail = rest.split(close, 1)
            body.append(head)
            if tail.strip():
                lines[i] = tail
                return "\n".join(body), i
            return "\n".join(body), i + 1
        body.append(rest)
        i += 1
        if i >= len(lines):
            return "\n".join(body), i
        rest = lines[i]


def _macro(name: str, params: str, body: str, depth: int, builder: Builder) -> list[dict[str, Any]]:
    if name in ("code", "noformat"):
        code = body.removeprefix("\n").removesuffix("\n")  # the tags' own lines
        node: dict[str, Any] = {"type": "codeBlock", "content": []}
        if code:
            node["content"] = [{"type": "text", "text": code}]
        options = [part for part in params.split("|") if part]
        language = [o for o in options if "=" not in o] + [
            o.split("=", 1)[1] for o in options if o.startswith("language=")
        ]
        if name == "code" and language and language[0].strip():
            node["attrs"] = {"language": language[0].strip()}
        return [node]
    if depth >= MAX_DEPTH:
        return [paragraph(inline(body, [], MAX_DEPTH))] if body.strip() else []
    inner = _blocks(body.split("\n"), depth + 1, builder)
    if name == "quote":
        content = builder.fit(inner, IN_QUOTE)
        return [{"type": "blockquote", "content": content}] if content else []
    content = builder.fit(inner, _IN_PANEL)
    title = re.search(r"(?:^|\|)title=([^|]*)", params)
    if title and title.group(1).strip():
        strong = [{"type": "strong"}]
        content.insert(0, paragraph([{"type": "text", "text": title.group(1), "marks": strong}]))
    panel = {"type": "panel", "attrs": {"panelType": _PANELS[name]}, "content": content}
    return [panel] if content else []


def _lists(entries: list[_Entry], builder: Builder) -> list[dict[str, Any]]:
    """Wiki list lines (markers, text, the code blocks right under the line) as nested ADF
    lists: ``**`` a level down, ``*#`` an ordered list inside a bullet item."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(entries):
        kind = entries[i][0][0]
        items: list[list[dict[str, Any]]] = []
        boxed: list[bool] = []  # whether an item's line opens with a box (an escaped one: no)
        while i < len(entries) and entries[i][0][0] == kind:
            markers, text, code = entries[i]
            if len(markers) == 1:
                first = _paragraphs(inline(text, [], 0)) if text.strip() or not code else []
                items.append(first + code)
                boxed.append(is_box(text))
                i += 1
                continue
            nested = []
            while i < len(entries) and len(entries[i][0]) > 1 and entries[i][0][0] == kind:
                nested.append((entries[i][0][1:], *entries[i][1:]))
                i += 1
            if not items:
                items.append([])
                boxed.append(False)
            items[-1] += _lists(nested, builder)
        node = builder.list_node(kind == "#", items, boxed)
        out += [node] if node else []
    return builder.fit(out, IN_DOC)


def _row(line: str) -> list[tuple[bool, str]]:
    """A table line's cells: (a header cell?, its markup), split on bars outside links,
    monospace and escapes."""
    cells: list[tuple[bool, str]] = []
    current, header, i, bracket = "", False, 0, 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            current += line[i : i + 2]
            i += 2
            continue
        if char == "|" and not bracket:
            if i:
                cells.append((header, current))
            header = line[i : i + 2] == "||"
            current, i = "", i + (2 if header else 1)
            continue
        if line.startswith("{{", i) and "}}" in line[i + 2 :]:  # monospace, bars and all
            end = line.index("}}", i + 2) + 2
            current, i = current + line[i:end], end
            continue
        bracket += (char == "[") - (char == "]" and bracket > 0)
        current += char
        i += 1
    if current.strip():
        cells.append((header, current))
    return cells


def _table(rows: list[list[tuple[bool, str]]]) -> dict[str, Any]:
    content = []
    for row in rows:
        cells = [
            {
                "type": "tableHeader" if header else "tableCell",
                "content": [paragraph(inline(text.strip(), [], 0))],
            }
            for header, text in row
        ]
        if cells:
            content.append({"type": "tableRow", "content": cells})
    attrs = {"isNumberColumnEnabled": False, "layout": "default"}
    return {"type": "table", "attrs": attrs, "content": content}


def _paragraphs(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A list item's line as its paragraphs: two line breaks in a row part them."""
    out: list[list[dict[str, Any]]] = [[]]
    for node in nodes:
        if node["type"] == "hardBreak" and out[-1] and out[-1][-1]["type"] == "hardBreak":
            out[-1].pop()
            out.append([])
        else:
            out[-1].append(node)
    return [paragraph(content) for content in out if content] or [paragraph([])]
