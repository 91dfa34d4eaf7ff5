"""ADF inline nodes -> Markdown, for ``adf.to_markdown``: text with its marks (each delimiter
opened once for a run of text, the longest-running outside, never where CommonMark's flanking
rules would read it as text), hard breaks, and the nodes Markdown has no syntax for as readable
text (mentions, emoji, cards, statuses, dates, media).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from adapters.providers.jira.adf_build import MAX_DEPTH, normalize_link, valid_link
from adapters.providers.jira.adf_escape import (
    AUTOLINK,
    autolink,
    can_wrap,
    code_span,
    destination,
    escape,
    escape_line_start,
)

_DELIMS = {"strong": ("**", "**"), "em": ("*", "*"), "strike": ("~~", "~~")}
_MARK_ORDER = {"link": 0, "strong": 1, "em": 2, "strike": 3}


def children(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A node's child nodes (none when ``content`` is missing or no list; non-objects skipped)."""
    content = node.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [child for child in content if isinstance(child, Mapping)]


def attributes(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """A node's or mark's ``attrs`` ({} when missing or no object)."""
    attrs = node.get("attrs")
    return attrs if isinstance(attrs, Mapping) else {}


def string(value: Any) -> str:
    """A field's value when it is a string, else ""."""
    return value if isinstance(value, str) else ""


def flat(node: Mapping[str, Any]) -> str:
    """What is nested too deep: its text on one line."""
    return escape(" ".join(_plain(node).split()))


def _plain(node: Mapping[str, Any]) -> str:
    """All the text under a node, without recursion (for what is nested too deep)."""
    parts, stack = [], [node]
    while stack:
        current = stack.pop()
        parts.append(string(current.get("text")) or string(attributes(current).get("text")))
        stack.extend(reversed(children(current)))
    return " ".join(part for part in parts if part)


def inline(nodes: list[Mapping[str, Any]], depth: int, *, one_line: bool = False) -> str:
    """Inline nodes as Markdown (on one line: a heading's)."""
    if depth >= MAX_DEPTH:
        return " ".join(flat(node) for node in nodes)
    writer = _Writer(_split_lines(nodes, one_line))
    for index, node in enumerate(writer.nodes):
        kind = node.get("type")
        if kind == "hardBreak":
            writer.close(0)
            writer.plain(" " if one_line else "\n")
            writer.delimited = not one_line  # (a line's start: nothing known before it)
        elif kind == "text":
            writer.text(index, node)
        else:
            writer.close(0)
            nested = children(node)
            writer.plain(inline(nested, depth + 1) if nested else atom(node))
    writer.close(0)
    joined = AUTOLINK.sub(autolink, "".join(writer.out))
    lines = [escape_line_start(line.strip(" \t")) for line in joined.split("\n")]
    # a line's end was a space: what could open there must not close there ("a *", "a~")
    lines = [
        re.sub(r"(?<=\s)\*$|(?<![~\\])~$", lambda m: "\\" + m.group(0), line) for line in lines
    ]
    if one_line:
        return " ".join(lines).strip()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")  # a blank line parts it


class _Writer:
    """Text nodes written one after another, each mark's delimiters opened once for its run."""

    def __init__(self, nodes: list[Mapping[str, Any]]) -> None:
        self.nodes = nodes
        self.out: list[str] = []
        self.active: list[tuple[str, str]] = []  # open marks, outermost first: (type, link)
        self.unsaid: dict[tuple[str, str], int] = {}  # marks Markdown cannot say, up to a node
        self.delimited = False  # whether the last thing written is a delimiter

    def close(self, keep: int) -> None:
        """Close the marks past the first ``keep``; spaces before them go after them."""
        out, tail = self.out, ""
        if out:
            stripped = out[-1].rstrip()
            tail, out[-1] = out[-1][len(stripped) :], stripped
        while len(self.active) > keep:
            kind, dest = self.active.pop()
            out.append(f"]({dest})" if kind == "link" else _DELIMS[kind][1])
            self.delimited = not tail
        out.append(tail)

    def plain(self, text: str) -> None:
        self.out.append(text)
        self.delimited = self.delimited and not text

    def text(self, index: int, node: Mapping[str, Any]) -> None:
        text, marks, out = string(node.get("text")), _marks(node), self.out
        code = any(kind == "code" for kind, _ in marks)
        want = [m for m in marks if m[0] != "code" and self.unsaid.get(m, 0) <= index]
        keep = 0
        while keep < len(self.active) and self.active[keep] in want:
            keep += 1
        if keep < len(self.active):
            self.close(keep)
        if not (text.strip() or code):  # opens nothing: emphasis cannot start or end on a space
            self.plain(text)
            return
        lead = "" if code else text[: len(text) - len(text.lstrip())]  # (code keeps its spaces)
        self.plain(lead)
        body = text[len(lead) :]
        shown = code_span(body) if code else escape(body)
        opening = [mark for mark in want if mark not in self.active]
        ordered = sorted(opening, key=lambda mark: -_run(self.nodes, index, mark))
        for number, mark in enumerate(ordered):
            end = index + _run(self.nodes, index, mark)  # (the longest-running opens outside)
            inner = ordered[number + 1 :]  # (their delimiters come first inside this one)
            first = "[" if any(m[0] == "link" for m in inner) else "*" if inner else shown[:1]
            if mark[0] != "link" and not can_wrap(_last(out), first, *_after(self.nodes, end)):
                self.unsaid[mark] = end  # (flanking rules: "a**#b**" is no emphasis)
                continue
            last = next((i for i in range(len(out) - 1, -1, -1) if out[i]), None)
            if mark[0] == "link" and last is not None and out[last].endswith("!"):
                out[last] = out[last][:-1] + "\\!"  # a link, not an image
            self.active.append(mark)
            out.append("[" if mark[0] == "link" else _DELIMS[mark[0]][0])
            self.delimited = True
        if not code:  # escaped as the plain text around it reads (u + _a: "u_a")
            said = [mark for mark in want if mark in self.active]  # (not those left unsaid)
            before = "" if self.delimited else _last(out)
            core = body.rstrip() if said else body  # (its trailing spaces may go past a delimiter)
            after = "" if core != body else self._plain_after(index, said)
            shown = escape(core, before, after) + body[len(core) :]
        self.plain(shown)

    def _plain_after(self, index: int, want: list[tuple[str, str]]) -> str:
        """The character right after node ``index`` when no delimiter comes between, else ""."""
        following = self.nodes[index + 1] if index + 1 < len(self.nodes) else None
        if want or following is None or following.get("type") == "hardBreak":
            return ""
        if following.get("type") != "text":
            return atom(following)[:1]
        return "" if _marks(following) else string(following.get("text"))[:1]


def _last(out: list[str]) -> str:
    return next((part[-1] for part in reversed(out) if part), "")


def _after(flat: list[Mapping[str, Any]], end: int) -> tuple[str, str]:
    """The last character inside a mark that ends before node ``end``, and the one after it."""
    text = string(flat[end - 1].get("text"))
    inside = "`" if any(mark[0] == "code" for mark in _marks(flat[end - 1])) else text.rstrip()[-1:]
    if text != text.rstrip() or end >= len(flat) or flat[end].get("type") == "hardBreak":
        return inside, " "
    following = flat[end]
    if following.get("type") != "text":
        return inside, atom(following)[:1]
    if _marks(following):  # a delimiter opens there
        return inside, "*"
    return inside, string(following.get("text"))[:1]


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
        text = string(node.get("text"))
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
                out[-1] = {**last, "text": string(last.get("text")) + string(part.get("text"))}
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
            href = string(attributes(mark).get("href"))
            if href and valid_link(href):  # (else Markdown would read it back as text)
                href = normalize_link(href)
                marks[("link", destination(href, string(attributes(mark).get("title"))))] = None
        elif kind in ("strong", "em", "strike", "code"):
            marks[(kind, "")] = None
    return sorted(marks, key=lambda mark: _MARK_ORDER.get(mark[0], 9))


def atom(node: Mapping[str, Any]) -> str:
    """Markdown for an inline (or leaf) node that is no text: something readable."""
    kind, attrs = string(node.get("type")), attributes(node)
    text = string(attrs.get("text"))
    if kind == "mention":
        name = text or string(attrs.get("id"))
        return escape(name if name.startswith("@") else f"@{name}") if name else ""
    if kind == "emoji":
        return escape(text or string(attrs.get("shortName")))
    if kind == "inlineCard":
        url = string(attrs.get("url"))
        return f"<{url}>" if re.fullmatch(r"[A-Za-z][\w+.-]*:[^\s<>]+", url) else escape(url)
    if kind == "status":
        return code_span(text) if text.strip() else ""
    if kind == "date":
        stamp = string(attrs.get("timestamp"))
        try:
            return datetime.fromtimestamp(int(stamp) / 1000, UTC).date().isoformat()
        except (ValueError, OverflowError, OSError):
            return escape(stamp)
    if kind in ("media", "mediaInline"):
        url, alt = string(attrs.get("url")), string(attrs.get("alt")).strip()
        if attrs.get("type") == "external" and url and not re.search(r"[\s()<>]", url):
            return f"![{escape(alt)}]({url})"
        return escape(f"(attachment: {alt})" if alt else "(attachment)")
    return escape(string(node.get("text")) or text)
