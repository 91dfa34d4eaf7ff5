"""Jira wiki markup (Data Center's v2 API: descriptions and comments are strings of it) <->
Markdown (cpe's text).

Both ways go through Atlassian Document Format, so Markdown is read and written exactly as for
Jira Cloud (``adf``): ``to_markdown(wiki)`` parses the markup into ADF (``wiki_parse``) and reads
that as Markdown; ``from_markdown(md)`` writes the ADF of the Markdown as markup.

What is written: ``h1.``-``h6.`` headings; ``*strong*``, ``_emphasis_``, ``-deleted-``,
``{{monospace}}`` and ``[text|url]`` links (``{*}x{*}`` where a word goes on either side);
``{code:lang}`` / ``{noformat}`` blocks; ``*``/``#`` lists nested by repeating the marker
(``**``, ``*#``), a checklist item as ``* [ ] ...`` (text that only looks like a box: ``\\[``);
``{quote}`` and ``{info}``/``{note}``/``{tip}``/``{warning}`` panels; ``----``; ``||head||`` and
``|cell|`` tables; a line break inside a paragraph as a newline (Jira shows it as one), inside a
list item or a cell as ``\\\\`` (two of them between an item's paragraphs), a code block of a list
item on the lines right after the item's (an item's text after its sublist has no place: it
joins the item's line). A character that would otherwise be markup is escaped with a backslash;
a backslash itself, which has no escape (``\\\\`` is a line break), is written ``&#92;``.

Hidden markers: an HTML comment (``<!-- cpe:key=... -->``) has no markup either; it is written
verbatim, never escaped, so ``markers.has_key`` finds it in the raw description as well as in
the Markdown read back (Jira shows it as text, its ``--`` perhaps as a dash).

What is read besides: ``bq.`` quotes, ``+inserted+``, ``^sup^``, ``~sub~``, ``??citation??``,
``{color}``, ``[~user]`` mentions, ``[^attachment]``, ``!image!``, ``{panel}``; anything else is
kept as its text. Nesting is bounded as in ``adf``; text is data: nothing is fetched or run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.providers.jira import adf
from adapters.providers.jira.adf_escape import comments
from adapters.providers.jira.wiki_parse import MAX_DEPTH, parse

__all__ = ["from_markdown", "to_markdown"]

_DELIMS = {"strong": "*", "em": "_", "strike": "-", "underline": "+"}
_ORDER = {"link": 0, "strong": 1, "em": 2, "strike": 3, "underline": 4}
_EFFECT = "*_-+^~"
_PANELS = {"info": "info", "note": "note", "tip": "tip", "success": "tip"}
_LINE_START = re.compile(r"^(h[1-6]\.|bq\.|[*#-]+\s|----|\|)")


def to_markdown(text: str | None) -> str:
    """The Markdown of a wiki markup string (None or "": "")."""
    return adf.to_markdown(parse(text or ""))


def from_markdown(text: str) -> str:
    """Wiki markup for Markdown."""
    return _blocks(_kids(adf.from_markdown(text)), 0).strip("\n")


def _kids(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = node.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [child for child in content if isinstance(child, Mapping)]


def _attrs(node: Mapping[str, Any]) -> Mapping[str, Any]:
    attrs = node.get("attrs")
    return attrs if isinstance(attrs, Mapping) else {}


def _blocks(nodes: list[Mapping[str, Any]], depth: int) -> str:
    out = [_block(node, depth) for node in nodes]
    return "\n\n".join(text for text in out if text)


def _block(node: Mapping[str, Any], depth: int) -> str:
    kind, attrs = str(node.get("type")), _attrs(node)
    if depth >= MAX_DEPTH:
        return ""
    if kind == "paragraph":
        return _inline(_kids(node))
    if kind == "heading":
        level = attrs.get("level") if attrs.get("level") in range(1, 7) else 1
        return f"h{level}. {_inline(_kids(node), one_line=True)}"
    if kind == "codeBlock":
        code = "".join(str(child.get("text", "")) for child in _kids(node))
        language = re.sub(r"[^\w#+.-]", "", str(attrs.get("language") or ""))
        if (language and "{code}" not in code) or "{noformat}" in code:
            return f"{{code{':' * bool(language)}{language}}}\n{code}\n{{code}}"
        return f"{{noformat}}\n{code}\n{{noformat}}"
    if kind in ("bulletList", "orderedList", "taskList"):
        return "\n".join(_list(node, "", depth))
    if kind == "blockquote":
        return f"{{quote}}\n{_blocks(_kids(node), depth + 1)}\n{{quote}}"
    if kind == "panel":
        macro = _PANELS.get(str(attrs.get("panelType")), "warning")
        return f"{{{macro}}}\n{_blocks(_kids(node), depth + 1)}\n{{{macro}}}"
    if kind == "rule":
        return "----"
    if kind == "table":
        return "\n".join(_row(row) for row in _kids(node))
    return _blocks(_kids(node), depth + 1) if _kids(node) else ""


def _list(node: Mapping[str, Any], prefix: str, depth: int) -> list[str]:
    if depth >= MAX_DEPTH:  # (never from Markdown, whose parser nests less)
        return []
    marker = prefix + ("#" if node.get("type") == "orderedList" else "*")
    lines: list[str] = []
    for item in _kids(node):
        if item.get("type") in ("bulletList", "orderedList", "taskList"):
            lines += _list(item, marker, depth + 1)
            continue
        parts, codes, nested = [], [], []  # its line; its code blocks and sublists, after it
        if item.get("type") == "taskItem":
            box = "[x]" if _attrs(item).get("state") == "DONE" else "[ ]"  # (escaped: text)
            parts.append(f"{box} {_inline(_kids(item), line=False)}".rstrip())
        for child in _kids(item) if item.get("type") == "listItem" else []:
            if child.get("type") in ("bulletList", "orderedList", "taskList"):
                nested += _list(child, marker, depth + 1)
            elif child.get("type") == "codeBlock":
                codes.append(_block(child, 0))
            elif child.get("type") == "paragraph":
                parts.append(_inline(_kids(child), line=False))
            else:
                parts.append(_block(child, depth + 1).replace("\n", "\\\\"))
        line = _bang("\\\\\\\\".join(part for part in parts if part))  # paragraphs: a blank line
        lines += [f"{marker} {line}", *codes, *nested]  # "* ": an empty item
    return lines


def _row(row: Mapping[str, Any]) -> str:
    cells = []
    for cell in _kids(row):
        bar = "||" if cell.get("type") == "tableHeader" else "|"
        text = _bang("\\\\".join(_inline(_kids(block), line=False) for block in _kids(cell)))
        cells.append(f"{bar}{text or ' '}")
    return "".join(cells) + ("||" if cells and cells[-1].startswith("||") else "|")


def _inline(nodes: list[Mapping[str, Any]], *, one_line: bool = False, line: bool = True) -> str:
    """Inline nodes as markup; a line break a newline, or ``\\\\`` where the text must stay on one
    ``line`` (a list item's, a cell's: the caller then ends it with ``_bang``)."""
    out: list[str] = []
    active: list[tuple[str, str, str]] = []  # (mark, link target, closing delimiter)

    def close(keep: int) -> None:
        tail = ""  # an effect ends on a character, never a space: the spaces go after it
        while out and not out[-1].strip():
            tail = out.pop() + tail
        if out:
            stripped = out[-1].rstrip()
            tail, out[-1] = out[-1][len(stripped) :] + tail, stripped
        while len(active) > keep:
            out.append(active.pop()[2])
        out.append(tail)

    flat = _flatten(nodes)
    for i, node in enumerate(flat):
        marks = [] if node["type"] == "hardBreak" else _marks(node)
        keep = 0
        while keep < len(active) and active[keep][:2] in marks:
            keep += 1
        if keep < len(active):
            close(keep)
        text, code = str(node.get("text", "")), bool(node.get("code"))
        if node["type"] == "hardBreak" or not (text.strip() or code):
            out.append(" " if one_line and not text else text or "\n")
            continue
        lead = "" if code else text[: len(text) - len(text.lstrip())]  # (code keeps its spaces)
        out.append(lead)
        opening = [mark for mark in marks if mark not in [entry[:2] for entry in active]]
        for mark in sorted(opening, key=lambda mark: -_run(flat, i, mark)):
            before = next((part[-1] for part in reversed(out) if part), "")
            start, end = _delimiters(mark, flat, i, before)
            out.append(start)
            active.append((*mark, end))
        body = _escape(text[len(lead) :], code=code)
        out.append("{{" + body + "}}" if code else body)
    close(0)
    lines = [_line_start(part) for part in "".join(out).split("\n")]
    if not line:
        return "\\\\".join(lines).strip()
    return "\n".join(_bang(part) for part in lines).strip()


def _bang(line: str) -> str:
    """A line's last ``!`` unescaped: no image opens at a line's end ("Done!")."""
    return re.sub(r"(?<!\\)\\!$", "!", line)


def _run(flat: list[dict[str, Any]], start: int, mark: tuple[str, str]) -> int:
    end = start
    while end < len(flat) and flat[end]["type"] == "text" and mark in _marks(flat[end]):
        end += 1
    return end - start


def _flatten(nodes: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Inline nodes as text with marks (a mention, emoji, card or date as its Markdown text)."""
    flat: list[dict[str, Any]] = []
    for node in nodes:
        if node.get("type") == "hardBreak":
            flat.append({"type": "hardBreak"})
        elif node.get("type") == "text" and isinstance(node.get("text"), str):
            raw = node.get("marks")
            marks = raw if isinstance(raw, list) else []
            code = any(isinstance(m, Mapping) and m.get("type") == "code" for m in marks)
            flat.append({"type": "text", "text": node["text"], "marks": marks, "code": code})
        else:
            text = adf.to_markdown(
                {"type": "doc", "content": [{"type": "paragraph", "content": [node]}]}
            )
            flat.append({"type": "text", "text": re.sub(r"\\(.)", r"\1", text), "marks": []})
    return flat


def _marks(node: Mapping[str, Any]) -> list[tuple[str, str]]:
    found: dict[tuple[str, str], None] = {}
    for mark in node.get("marks") or []:
        kind = mark.get("type") if isinstance(mark, Mapping) else None
        if kind == "link":
            href = str(_attrs(mark).get("href") or "")
            if href:
                found[("link", href.replace("|", "%7C").replace("]", "%5D"))] = None
        elif kind in _DELIMS:
            found[(kind, "")] = None
    return sorted(found, key=lambda mark: _ORDER[mark[0]])


def _delimiters(
    mark: tuple[str, str], flat: list[dict[str, Any]], start: int, before: str
) -> tuple[str, str]:
    """How a mark opens and closes: ``*x*``, or ``{*}x{*}`` when a word touches it."""
    kind, href = mark
    if kind == "link":
        return "[", f"|{href}]"
    end = start + _run(flat, start, mark)
    after = str(flat[end].get("text", ""))[:1] if end < len(flat) else ""
    char = _DELIMS[kind]
    marked_after = end < len(flat) and bool(_marks(flat[end]))  # another effect opens there
    first = str(flat[start].get("text", ""))
    at_start = char == "*" and before[-1:] in ("", "\n") and re.match(r"#+\s", first)  # "*# x"
    touching = any(c.isalnum() or c in ("_", char) for c in (before[-1:], after) if c)
    if marked_after or at_start or touching:
        return "{" + char + "}", "{" + char + "}"
    return char, char


def _escape(text: str, *, code: bool = False) -> str:
    """Text as markup that reads back as the same text; HTML comments kept verbatim."""
    raw = {i for span in comments(text) for i in range(*span)}
    out = []
    for i, char in enumerate(text):
        before, after = text[i - 1 : i], text[i + 1 : i + 2]
        if i in raw:
            out.append(char)
        elif char == "\\" or (char == "&" and re.match(r"#?\w+;", text[i + 1 :])):
            out.append(f"&#{ord(char)};")  # "\\\\" is a line break: no escape for a backslash
        elif (
            char in "{}[]|"
            or (char == "!" and not after.isspace())
            or (char == "?" and "?" in (before, after))
            or (code and char in _EFFECT)
            or (char in _EFFECT and _may_open(before, after))
            or (char in _EFFECT and _may_open(after, before))
        ):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _may_open(before: str, after: str) -> bool:
    return not before.isalnum() and not after.isspace()  # an edge may touch a delimiter


def _line_start(line: str) -> str:
    line = line.strip(" \t")
    return "\\" + line if _LINE_START.match(line) else line
