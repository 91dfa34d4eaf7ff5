"""Markdown -> Atlassian Document Format: what ``adf.from_markdown`` does. Markdown is parsed by
markdown-it-py (CommonMark, with GFM tables and strikethrough); its token tree becomes ADF nodes
that Atlassian's published JSON schema admits (the node and mark types, their required
attributes, the content each container admits: tests/adapters/providers/jira/test_adf_schema.py).

A line break inside a paragraph is a ``hardBreak`` (as GitHub shows issue text); an HTML comment
or other raw HTML is plain text (see ``adf`` on hidden markers); an image becomes a link to it
(Jira only shows uploaded media); a checklist (``- [ ]``/``- [x]``) is a task list; a block a
container does not admit becomes one it does (a heading in a list item a paragraph, a table in a
quote its cells' paragraphs); links the parser refuses (``javascript:`` and the like) stay text.
"""

from __future__ import annotations

import uuid
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

MAX_DEPTH = 40
_MD = MarkdownIt("commonmark", {"maxNesting": MAX_DEPTH}).enable(["table", "strikethrough"])

_Tree = list[tuple[Token, "_Tree"]]
IN_DOC = {"paragraph", "heading", "codeBlock", "bulletList", "orderedList", "taskList"}
IN_DOC |= {"blockquote", "rule", "table", "panel"}
IN_ITEM = {"paragraph", "codeBlock", "bulletList", "orderedList"}
IN_QUOTE = {"paragraph", "codeBlock", "bulletList", "orderedList"}
IN_CELL = IN_DOC - {"table"}
_CONTAINERS = {"blockquote", "panel", "bulletList", "orderedList", "listItem", "table"}
_CONTAINERS |= {"tableRow", "tableHeader", "tableCell"}
_MARK_TOKENS = {"strong": "strong", "em": "em", "s": "strike", "link": "link"}


def normalize_link(href: str) -> str:
    """A link as the parser writes it (percent-encoded where a URL must be)."""
    return str(_MD.normalizeLink(href))


def valid_link(href: str) -> bool:
    """Whether the parser makes a link of it (``javascript:`` and the like: no)."""
    return bool(_MD.validateLink(href))


def from_markdown(text: str) -> dict[str, Any]:
    """An ADF document (``{"type": "doc", "version": 1, "content": [...]}``) for Markdown."""
    tree: _Tree = []
    stack = [tree]
    for token in _MD.parse(text or ""):
        if token.nesting == 1:
            node: tuple[Token, _Tree] = (token, [])
            stack[-1].append(node)
            stack.append(node[1])
        elif token.nesting == -1:
            if len(stack) > 1:
                stack.pop()
        else:
            stack[-1].append((token, []))
    return {"type": "doc", "version": 1, "content": Builder().blocks(tree, IN_DOC)}


def paragraph(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "paragraph", "content": content}


def add_text(nodes: list[dict[str, Any]], text: str, marks: list[dict[str, Any]]) -> None:
    if not text:
        return
    unique: dict[str, dict[str, Any]] = {}
    for mark in marks:
        if mark["type"] != "link" or mark["attrs"]["href"]:  # "[a]()" links nowhere
            unique.setdefault(mark["type"], mark)
    node: dict[str, Any] = {"type": "text", "text": text}
    if unique:
        node["marks"] = list(unique.values())
    last = nodes[-1] if nodes else None
    if last and last["type"] == "text" and last.get("marks") == node.get("marks"):
        last["text"] += text
    else:
        nodes.append(node)


def _lines(text: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            nodes.append({"type": "hardBreak"})
        add_text(nodes, line, [])
    return nodes


def _is_comment(token: Token) -> bool:
    return token.type == "html_block" and token.content.lstrip().startswith("<!--")


class Builder:
    def __init__(self) -> None:
        self._ids = 0

    def _local_id(self) -> str:
        self._ids += 1
        return str(uuid.UUID(int=self._ids))

    def blocks(self, tree: _Tree, allowed: set[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        joinable: tuple[int, bool] | None = None  # (the line it ends on, a comment?)
        for token, kids in tree:
            block = self._block(token, kids)
            if block is None:
                continue
            lines = token.map or [-1, -1]
            comment = _is_comment(token)
            if block["type"] == "paragraph" and token.type in ("paragraph_open", "html_block"):
                if joinable and joinable[0] == lines[0] and (comment or joinable[1]):
                    out[-1]["content"] += [{"type": "hardBreak"}, *block["content"]]
                    joinable = (lines[1], comment)
                    continue
                joinable = (lines[1], comment)
            else:
                joinable = None
            out.append(block)
        return self.fit(out, allowed)

    def _block(self, token: Token, kids: _Tree) -> dict[str, Any] | None:
        kind = token.type
        if kind == "paragraph_open":
            return paragraph(self._inline(kids))
        if kind == "html_block":
            return paragraph(_lines(token.content.rstrip("\n")))
        if kind == "heading_open":
            level = int(token.tag[1:]) if token.tag[1:].isdigit() else 1
            content = self._inline(kids)
            heading = {"type": "heading", "attrs": {"level": level}, "content": content}
            return heading if content else None  # "#" alone: nothing to show
        if kind in ("fence", "code_block"):
            code = token.content[:-1] if token.content.endswith("\n") else token.content
            text = [{"type": "text", "text": code}] if code else []  # (no empty text node)
            node: dict[str, Any] = {"type": "codeBlock", "content": text}
            language = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
            if language:
                node["attrs"] = {"language": language}
            return node
        if kind == "hr":
            return {"type": "rule"}
        if kind in ("bullet_list_open", "ordered_list_open"):
            return self._list(token, kids)
        if kind == "blockquote_open":
            content = self.blocks(kids, IN_QUOTE)
            return {"type": "blockquote", "content": content} if content else None
        if kind == "table_open":
            return self._table(kids)
        return paragraph(_lines(token.content)) if token.content.strip() else None

    def _inline(self, kids: _Tree) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = []
        marks: list[dict[str, Any]] = []
        for token, _ in kids:
            for child in token.children or []:
                kind = child.type
                name = kind.rsplit("_", 1)[0]
                if kind in ("softbreak", "hardbreak"):
                    nodes.append({"type": "hardBreak"})
                elif kind == "code_inline":
                    links = [mark for mark in marks if mark["type"] == "link"]
                    add_text(nodes, child.content, [*links, {"type": "code"}])
                elif kind.endswith("_open") and name in _MARK_TOKENS:
                    mark: dict[str, Any] = {"type": _MARK_TOKENS[name]}
                    if name == "link":
                        mark["attrs"] = {"href": str(child.attrGet("href") or "")}
                        if child.attrGet("title"):
                            mark["attrs"]["title"] = str(child.attrGet("title"))
                    marks.append(mark)
                elif kind.endswith("_close") and name in _MARK_TOKENS:
                    for i in range(len(marks) - 1, -1, -1):
                        if marks[i]["type"] == _MARK_TOKENS[name]:
                            del marks[i]
                            break
                elif kind == "image":
                    src = str(child.attrGet("src") or "")
                    link = [{"type": "link", "attrs": {"href": src}}] if src else []
                    add_text(nodes, child.content or src, [*marks, *link])
                else:
                    add_text(nodes, child.content, marks)
        return nodes

    def _list(self, token: Token, items: _Tree) -> dict[str, Any] | None:
        entries = [self.blocks(kids, IN_DOC) for _, kids in items]
        start = str(token.attrGet("start") or "1")
        order = int(start) if start.isdigit() else 1
        boxed = [_boxed(kids) for _, kids in items]
        return self.list_node(token.type == "ordered_list_open", entries, boxed, order)

    def list_node(
        self,
        ordered: bool,
        entries: list[list[dict[str, Any]]],
        boxed: list[bool],
        order: int = 1,
    ) -> dict[str, Any] | None:
        """A list of items (each its blocks): a task list when every item's source starts with
        a box (``boxed``: ``[ ]``, ``[x]``; an escaped ``\\[ ]`` is text) and holds one line."""
        if not ordered and entries and all(boxed) and all(map(_is_task, entries)):
            return self._task_list(entries)
        content = [{"type": "listItem", "content": self._item(entry)} for entry in entries]
        if not content:
            return None
        if not ordered:
            return {"type": "bulletList", "content": content}
        return {"type": "orderedList", "attrs": {"order": max(1, order)}, "content": content}

    def _item(self, entry: list[dict[str, Any]]) -> list[dict[str, Any]]:
        content = self.fit(entry, IN_ITEM)
        if not content or content[0]["type"] not in ("paragraph", "codeBlock"):
            content.insert(0, paragraph([]))
        return content

    def _task_list(self, entries: list[list[dict[str, Any]]]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for entry in entries:
            inline = [dict(node) for node in entry[0]["content"]]
            state = "TODO" if inline[0]["text"].startswith("[ ]") else "DONE"
            inline[0]["text"] = inline[0]["text"][4:]
            inline = [node for node in inline if node.get("text") != ""]
            attrs = {"localId": self._local_id(), "state": state}
            content.append({"type": "taskItem", "attrs": attrs, "content": inline})
            content += entry[1:]
        return {"type": "taskList", "attrs": {"localId": self._local_id()}, "content": content}

    def _table(self, sections: _Tree) -> dict[str, Any] | None:
        rows = []
        for _, section in sections:
            for _, cells in section:
                row = []
                for cell, inline in cells:
                    kind = "tableHeader" if cell.type == "th_open" else "tableCell"
                    row.append({"type": kind, "content": [paragraph(self._inline(inline))]})
                if row:
                    rows.append({"type": "tableRow", "content": row})
        if not rows:
            return None
        attrs = {"isNumberColumnEnabled": False, "layout": "default"}
        return {"type": "table", "attrs": attrs, "content": rows}

    def fit(self, blocks: list[dict[str, Any]], allowed: set[str]) -> list[dict[str, Any]]:
        """The blocks, each turned into what the container admits when it admits it not."""
        out: list[dict[str, Any]] = []
        for block in blocks:
            kind = block["type"]
            if kind in allowed:
                out.append(block)
            elif kind == "heading":
                out.append(paragraph(block.get("content", [])))
            elif kind == "taskList":
                out += self.fit([_task_bullets(block)], allowed)
            elif kind in _CONTAINERS:
                out += self.fit(block.get("content", []), allowed)
            elif kind == "codeBlock":
                code = "".join(node["text"] for node in block.get("content", []))
                out.append(
                    paragraph(
                        [
                            {**n, "marks": [{"type": "code"}]} if n["type"] == "text" else n
                            for n in _lines(code)
                        ]
                    )
                )
        return out


def is_box(source: str) -> bool:
    """Whether an item's source text opens with a task box."""
    return source[:4] in ("[ ] ", "[x] ", "[X] ")


def _boxed(kids: _Tree) -> bool:
    """Whether a list item's source (its first paragraph's) opens with a task box."""
    if not kids or kids[0][0].type != "paragraph_open" or not kids[0][1]:
        return False
    return is_box(kids[0][1][0][0].content)


def _is_task(entry: list[dict[str, Any]]) -> bool:
    if not entry or entry[0]["type"] != "paragraph" or not entry[0]["content"]:
        return False
    first = entry[0]["content"][0]
    return (
        first["type"] == "text"
        and "marks" not in first
        and first["text"][:4] in ("[ ] ", "[x] ", "[X] ")
        and all(block["type"] == "taskList" for block in entry[1:])
    )


def _task_bullets(task_list: dict[str, Any]) -> dict[str, Any]:
    """A task list as a bullet list whose items start with ``[ ]`` / ``[x]``."""
    items: list[dict[str, Any]] = []
    for node in task_list.get("content", []):
        if node["type"] == "taskList" and items:
            items[-1]["content"].append(_task_bullets(node))
        elif node["type"] == "taskItem":
            box = "[x] " if node["attrs"]["state"] == "DONE" else "[ ] "
            inline = [{"type": "text", "text": box}, *node.get("content", [])]
            items.append({"type": "listItem", "content": [paragraph(inline)]})
    return {"type": "bulletList", "content": items}
