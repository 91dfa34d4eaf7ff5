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
becomes of what ADF has no node for: ``adf_build``).

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
from datetime import UTC, datetime
from typing import Any

from adapters.providers.jira.adf_build import MAX_DEPTH, from_markdown, normalize_link, valid_link
from adapters.providers.jira.adf_escape import (
    AUTOLINK,
    autolink,
    code_span,
    destination,
    escape,
    escape_line_start,
)

__all__ = ["MAX_DEPTH", "from_markdown", "to_markdown"]

_DELIMS = {"strong": ("**", "**"), "em": ("*", "*"), "strike": ("~~", "~~")}
_MARK_ORDER = {"link": 0, "strong": 1, "em": 2, "strike": 3}
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
    return _blocks(_kids(doc), 0).strip("\n")


def _kids(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = node.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [child for child in content if isinstance(child, Mapping)]


def _attrs(node: Mapping[str, Any]) -> Mapping[str, Any]:
    attrs = node.get("attrs")
    return attrs if isinstance(attrs, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _blocks(nodes: list[Mapping[str, Any]], depth: int, *, tight: bool = False) -> str:
    """Blocks apart by blank lines (a list right after a line of its item: by a newline when
    ``tight``); two lists in a row alternate their markers, or Markdown would join them."""
    out, previous, alternate = "", "", False
    for node in nodes:
        kind = _str(node.get("type"))
        family = "ordered" if kind == "orderedList" else "bullet" if kind in _LISTS else ""
        alternate = not alternate if family and family == previous else False
        text = _list(node, depth, alternate) if family else _block(node, depth)
        if text:  # (an empty item cannot interrupt a paragraph: a blank line before it)
            gap = "\n" if tight and family and not _EMPTY_ITEM.match(text) else "\n\n"
            out, previous = (out + gap + text if out else text), family
    return out


def _block(node: Mapping[str, Any], depth: int) -> str:
    kind, attrs = _str(node.get("type")), _attrs(node)
    if depth >= MAX_DEPTH:
        return _flat(node)
    if kind == "paragraph":
        return _inline(_kids(node), depth)
    if kind == "heading":
        level = attrs.get("level")
        level = min(max(level, 1), 6) if isinstance(level, int) else 1
        text = _inline(_kids(node), depth, one_line=True)
        closing = text.endswith("#") and not text.endswith("\\#")
        text = text[:-1] + "\\#" if closing else text  # no closing sequence
        return f"{'#' * level} {text}" if text else ""
    if kind == "codeBlock":
        return _code_block(node)
    if kind in _LISTS:
        return _list(node, depth, False)
    if kind == "blockquote":
        return _quote(_blocks(_kids(node), depth + 1))
    if kind == "panel":
        title = _PANEL.get(_str(attrs.get("panelType")), "Note")
        return _quote(f"**{title}:**\n\n{_blocks(_kids(node), depth + 1)}".strip())
    if kind == "rule":
        return "---"
    if kind == "table":
        return _table(node, depth)
    if kind in ("expand", "nestedExpand"):
        title = escape(_str(attrs.get("title")).strip())
        return f"**{title}**\n\n" * bool(title) + _blocks(_kids(node), depth + 1)
    if kind in ("mediaSingle", "mediaGroup"):
        return "\n".join(_atom(child) for child in _kids(node))
    if kind in ("blockCard", "embedCard"):
        return _atom({**node, "type": "inlineCard"})
    kids = _kids(node)
    if kids and all(_is_inline(child) for child in kids):
        return _inline(kids, depth)
    if kids:
        return _blocks(kids, depth + 1)
    return _atom(node)


def _is_inline(node: Mapping[str, Any]) -> bool:
    return _str(node.get("type")) in _INLINE or "text" in node


def _flat(node: Mapping[str, Any]) -> str:
    """What is nested too deep: its text on one line."""
    return escape(" ".join(_plain(node).split()))


def _plain(node: Mapping[str, Any]) -> str:
    """All the text under a node, without recursion (for what is nested too deep)."""
    parts, stack = [], [node]
    while stack:
        current = stack.pop()
        parts.append(_str(current.get("text")) or _str(_attrs(current).get("text")))
        stack.extend(reversed(_kids(current)))
    return " ".join(part for part in parts if part)


def _code_block(node: Mapping[str, Any]) -> str:
    code = "".join(_str(child.get("text")) for child in _kids(node))
    runs = [len(run) for run in re.findall(r"`{3,}", code)]
    fence = "`" * max([3, *(n + 1 for n in runs)])
    language = re.sub(r"[^\w#+.-]", "", _str(_attrs(node).get("language")))
    return f"{fence}{language}\n{code}\n{fence}" if code else f"{fence}{language}\n{fence}"


def _list(node: Mapping[str, Any], depth: int, alternate: bool) -> str:
    if depth >= MAX_DEPTH:
        return _flat(node)
    kind, order = node.get("type"), _attrs(node).get("order")
    number = order if isinstance(order, int) and order >= 0 else 1
    items: list[str] = []
    bullet = "*" if alternate else "-"
    for item in _kids(node):
        if _str(item.get("type")) in _LISTS:  # a nested task list: the previous item's sublist
            nested = _indent("\n" + _list(item, depth + 1, False), 2)[1:]
            items.append(f"{items.pop()}\n{nested}" if items else nested)
            continue
        if kind == "orderedList":
            marker, number = f"{number}{')' if alternate else '.'} ", number + 1
        elif item.get("type") == "taskItem":
            box = "[x]" if _attrs(item).get("state") == "DONE" else "[ ]"
            marker = f"{bullet} {box} "
        else:
            marker = f"{bullet} "
        body = _indent(_item_body(item, depth + 1), len(marker))
        kids = _kids(item)
        if body and kids and kids[0].get("type") == "paragraph" and not _inline(_kids(kids[0]), 0):
            marker = marker.rstrip() + "\n" + " " * len(marker)  # no text before its sublist
        items.append((marker + body).rstrip())
    return "\n".join(items)


def _item_body(item: Mapping[str, Any], depth: int) -> str:
    kids = _kids(item)
    if kids and all(_is_inline(child) for child in kids):
        return _inline(kids, depth)
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
    for row in _kids(node):
        cells = []
        for cell in _kids(row):
            text = _blocks(_kids(cell), depth + 1)
            cells.append(text.replace("\n", " ").strip().replace("|", "\\|"))
        rows.append(cells)
    rows = [row for row in rows if row]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = [rows[0], ["---"] * width, *rows[1:]]
    return "\n".join(("| " + " | ".join(cells) + " |").replace("|  |", "| |") for cells in lines)


def _inline(nodes: list[Mapping[str, Any]], depth: int, *, one_line: bool = False) -> str:
    if depth >= MAX_DEPTH:
        return " ".join(_flat(node) for node in nodes)
    out: list[str] = []
    active: list[tuple[str, str]] = []  # open marks, outermost first: (type, link destination)

    def close(keep: int) -> None:
        tail = ""
        if out:
            stripped = out[-1].rstrip()
            tail, out[-1] = out[-1][len(stripped) :], stripped
        while len(active) > keep:
            kind, dest = active.pop()
            out.append(f"]({dest})" if kind == "link" else _DELIMS[kind][1])
        out.append(tail)

    flat = _split_lines(nodes, one_line)
    for index, node in enumerate(flat):
        kind = node.get("type")
        if kind == "hardBreak":
            close(0)
            out.append(" " if one_line else "\n")
            continue
        text = _str(node.get("text")) if kind == "text" else ""
        marks = _marks(node) if kind == "text" else []
        if kind != "text":
            close(0)
            out.append(_atom(node) if not _kids(node) else _inline(_kids(node), depth + 1))
            continue
        code = any(kind == "code" for kind, _ in marks)
        want = [mark for mark in marks if mark[0] != "code"]
        keep = 0
        while keep < len(active) and active[keep] in want:
            keep += 1
        if keep < len(active):
            close(keep)
        if not text.strip():  # opens nothing: emphasis cannot start or end on a space
            out.append(text)
            continue
        lead = text[: len(text) - len(text.lstrip())]
        out.append(lead)
        opening = [mark for mark in want if mark not in active]
        for mark in sorted(opening, key=lambda mark: -_run(flat, index, mark)):  # longest outside
            last = next((i for i in range(len(out) - 1, -1, -1) if out[i]), None)
            if mark[0] == "link" and last is not None and out[last].endswith("!"):
                out[last] = out[last][:-1] + "\\!"  # a link, not an image
            active.append(mark)
            out.append("[" if mark[0] == "link" else _DELIMS[mark[0]][0])
        body = text[len(lead) :]
        out.append(code_span(body) if code else escape(body))
    close(0)
    joined = AUTOLINK.sub(autolink, "".join(out))
    lines = [escape_line_start(line.strip(" \t")) for line in joined.split("\n")]
    lines = [re.sub(r"(?<=\s)\*$", r"\\*", line) for line in lines]  # "a *": nothing after it
    if one_line:
        return " ".join(lines).strip()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")  # a blank line parts it


def _run(flat: list[Mapping[str, Any]], start: int, mark: tuple[str, str]) -> int:
    """For how many nodes from ``start`` on a mark goes on."""
    end = start
    while end < len(flat) and mark in _marks(flat[end]):
        end += 1
    return end - start


def _split_lines(nodes: list[Mapping[str, Any]], one_line: bool) -> list[Mapping[str, Any]]:
    """Text with newlines as text and hard breaks (on one line: spaces), and neighbouring text
    of the same marks as one node (escaping looks at a character's neighbours)."""
    out: list[Mapping[str, Any]] = []
    for given in nodes:
        node = (
            {"type": "text", "text": " "}
            if one_line and given.get("type") == "hardBreak"
            else given
        )
        text = _str(node.get("text"))
        if node.get("type") != "text" or "\n" not in text or one_line:
            parts = [{**node, "text": text.replace("\n", " ")}] if one_line and text else [node]
        else:
            parts = []
            for i, line in enumerate(text.split("\n")):
                parts += [{"type": "hardBreak"}] * bool(i) + [{**node, "text": line}] * bool(line)
        for part in parts:
            last = out[-1] if out else None
            same = last is not None and last.get("type") == part.get("type") == "text"
            if same and last is not None and _marks(last) == _marks(part):
                out[-1] = {**last, "text": _str(last.get("text")) + _str(part.get("text"))}
            else:
                out.append(part)
    return out


def _marks(node: Mapping[str, Any]) -> list[tuple[str, str]]:
    marks: dict[tuple[str, str], None] = {}
    raw = node.get("marks")
    for mark in raw if isinstance(raw, Sequence) and not isinstance(raw, str) else []:
        if not isinstance(mark, Mapping):
            continue
        kind = mark.get("type")
        if kind == "link":
            href = _str(_attrs(mark).get("href"))
            if href and valid_link(href):  # (else Markdown would read it back as text)
                href = normalize_link(href)
                marks[("link", destination(href, _str(_attrs(mark).get("title"))))] = None
        elif kind in ("strong", "em", "strike", "code"):
            marks[(kind, "")] = None
    return sorted(marks, key=lambda mark: _MARK_ORDER.get(mark[0], 9))


def _atom(node: Mapping[str, Any]) -> str:
    """Markdown for an inline (or leaf) node that is no text: something readable."""
    kind, attrs = _str(node.get("type")), _attrs(node)
    text = _str(attrs.get("text"))
    if kind == "mention":
        name = text or _str(attrs.get("id"))
        return escape(name if name.startswith("@") else f"@{name}") if name else ""
    if kind == "emoji":
        return escape(text or _str(attrs.get("shortName")))
    if kind == "inlineCard":
        url = _str(attrs.get("url"))
        return f"<{url}>" if re.fullmatch(r"[A-Za-z][\w+.-]*:[^\s<>]+", url) else escape(url)
    if kind == "status":
        return code_span(text) if text.strip() else ""
    if kind == "date":
        stamp = _str(attrs.get("timestamp"))
        try:
            return datetime.fromtimestamp(int(stamp) / 1000, UTC).date().isoformat()
        except (ValueError, OverflowError, OSError):
            return escape(stamp)
    if kind in ("media", "mediaInline"):
        url, alt = _str(attrs.get("url")), _str(attrs.get("alt")).strip()
        if attrs.get("type") == "external" and url and not re.search(r"[\s()<>]", url):
            return f"![{escape(alt)}]({url})"
        return escape(f"(attachment: {alt})" if alt else "(attachment)")
    return escape(_str(node.get("text")) or text)
