"""Jira wiki markup's inline part (effects, monospace, links, mentions, images, escapes, character
references, line breaks) -> ADF inline nodes, for ``wiki_parse``. One pass over the text: each
closing tag is looked up once (``_Scan``), so a long line of openers that never close is read in
linear time, and effects nested deeper than ``MAX_DEPTH`` stay plain text.
"""

from __future__ import annotations

import bisect
import html
import re
from typing import Any

from adapters.providers.jira.adf_build import MAX_DEPTH, add_text

_EFFECTS = {"*": "strong", "_": "em", "-": "strike", "+": "underline", "^": "", "~": ""}
_ENTITY = r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|amp|lt|gt|quot|apos|nbsp);"
_ENTITY_AT = re.compile(_ENTITY)
_COLOR_AT = re.compile(r"\{color(?::[^}\n]*)?\}")
_BRACED_AT = re.compile(r"\{[*_+^~-]\}")
_SPECIAL = re.compile(r"<!--|[\\{\[!&*_+^~-]|\?\?")
_URL = re.compile(r"^(?:[A-Za-z][\w+.-]*:|\.{0,2}/)\S*$")  # a scheme, or a path
_UNSAFE_LINK = re.compile(r"^\s*(?:javascript|vbscript|data):", re.I)


def inline(text: str, marks: list[dict[str, Any]], depth: int) -> list[dict[str, Any]]:
    """Inline markup as ADF nodes. One pass: every closing tag is looked up once
    (``_Scan``), so even a long line of unclosed openers is read in linear time."""
    nodes: list[dict[str, Any]] = []
    scan, position, plain = _Scan(text), 0, 0
    while depth < MAX_DEPTH and (special := _SPECIAL.search(text, position)):
        found = _token(scan, special.start(), marks, depth)
        if found is None:
            position = special.start() + 1
            continue
        add_text(nodes, text[plain : special.start()].replace("\n", "\0"), marks)
        end, made = found
        for node in made:
            if node["type"] == "text":
                add_text(nodes, node["text"], node.get("marks", []))
            else:
                nodes.append(node)
        position = plain = end
    add_text(nodes, text[plain:].replace("\n", "\0"), marks)
    out: list[dict[str, Any]] = []
    for node in nodes:  # newlines (kept apart as \0 while text merged) are hard breaks
        if node["type"] != "text" or "\0" not in node["text"]:
            out.append(node)
            continue
        for i, part in enumerate(node["text"].split("\0")):
            out += [{"type": "hardBreak"}] * bool(i) + [{**node, "text": part}] * bool(part)
    return out


class _Scan:
    """A text's escaped characters, and the next unescaped occurrence of a closing tag, each
    tag searched forward once whatever the number of openers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.escaped = bytearray(len(text) + 1)
        i = 0
        while i < len(text):
            if text.startswith("\\\\", i):
                i += 2
            elif text[i] == "\\" and i + 1 < len(text) and text[i + 1] != "\n":
                self.escaped[i + 1] = 1
                i += 2
            else:
                i += 1
        self._found: dict[str, tuple[int, int]] = {}
        self._closers: dict[str, list[int]] = {}

    def find(self, needle: str, start: int, *, line: bool = True) -> int:
        """The next unescaped ``needle`` from ``start`` (on the same line when ``line``), or -1."""
        since, at = self._found.get(needle, (len(self.text) + 1, -1))
        if not (since <= start and (at == -1 or at >= start)):
            at = self.text.find(needle, start)
            while at != -1 and self.escaped[at]:
                at = self.text.find(needle, at + 1)
            self._found[needle] = (start, at)
        if (
            at != -1
            and line
            and needle != "\n"
            and self.find("\n", start, line=False) in range(start, at)
        ):
            return -1
        return at

    def closer(self, char: str, start: int) -> int:
        """Where an effect opened at ``start`` closes: its next closing ``char`` on the line."""
        if char not in self._closers:
            text, escaped = self.text, self.escaped
            self._closers[char] = [
                j
                for j in range(1, len(text))
                if text[j] == char
                and not escaped[j]
                # after a character (an escaped one, or anything but a space or another one)
                and (escaped[j - 1] or not (text[j - 1].isspace() or text[j - 1] in (char, "\\")))
                # and before no word nor another one
                and not (text[j + 1 : j + 2].isalnum() or text[j + 1 : j + 2] in ("_", char))
            ]
        closers = self._closers[char]
        index = bisect.bisect_left(closers, start + 2)
        if index == len(closers):
            return -1
        end = closers[index]
        newline = self.find("\n", start, line=False)
        return -1 if newline != -1 and newline < end else end


def _token(
    scan: _Scan, i: int, marks: list[dict[str, Any]], depth: int
) -> tuple[int, list[dict[str, Any]]] | None:
    """The markup that starts at i: where it ends and its nodes; None when it is plain text."""
    text = scan.text
    if text.startswith("<!--", i):
        end = scan.find("-->", i + 4, line=False)
        return (
            (end + 3, [{"type": "text", "text": text[i : end + 3], "marks": marks}])
            if end != -1
            else None
        )
    if text.startswith("\\\\", i):
        return i + 2, [{"type": "hardBreak"}]
    if text[i] == "\\":
        return (
            (i + 2, [{"type": "text", "text": text[i + 1], "marks": marks}])
            if scan.escaped[i + 1]
            else None
        )
    if text.startswith("{{", i):
        end = scan.find("}}", i + 2)
        if end > i + 2:
            code = [m for m in marks if m["type"] == "link"] + [{"type": "code"}]
            return end + 2, [{"type": "text", "text": unescape(text[i + 2 : end]), "marks": code}]
        return None
    if braced := _BRACED_AT.match(text, i):
        end = scan.find(braced.group(0), i + 3)
        return (
            (end + 3, _effect(braced.group(0)[1], text[i + 3 : end], marks, depth))
            if end > i + 3
            else None
        )
    if color := _COLOR_AT.match(text, i):
        return color.end(), []
    if text[i] == "[":
        end = scan.find("]", i + 1)
        return (end + 1, _link(text[i + 1 : end], marks, depth)) if end != -1 else None
    if text[i] == "!":
        end = scan.find("!", i + 1)
        if end > i + 1 and not text[i + 1].isspace() and text[i + 1] != "|":
            source = text[i + 1 : end].split("|", 1)[0]
            link = [_href(source)] if "://" in source else []
            return end + 1, [
                {
                    "type": "text",
                    "text": f"(image: {source.rsplit('/', 1)[-1]})",
                    "marks": marks + link,
                }
            ]
        return None
    if text.startswith("??", i):
        end = scan.find("??", i + 2)
        if end > i + 2 and not text[i + 2].isspace() and not text[end - 1].isspace():
            return end + 2, inline(text[i + 2 : end], [*marks, {"type": "em"}], depth + 1)
        return None
    if entity := _ENTITY_AT.match(text, i):
        return entity.end(), [
            {"type": "text", "text": html.unescape(entity.group(0)), "marks": marks}
        ]
    char, before, after = text[i], text[i - 1 : i], text[i + 1 : i + 2]
    opens = char in _EFFECTS and not (before.isalnum() or before in ("_", char))
    if opens and after and not after.isspace() and after != char:
        end = scan.closer(char, i)
        return (end + 1, _effect(char, text[i + 1 : end], marks, depth)) if end != -1 else None
    return None


def _effect(char: str, inner: str, marks: list[dict[str, Any]], depth: int) -> list[dict[str, Any]]:
    mark = _EFFECTS[char]
    if mark == "underline":  # no Markdown for it: the text alone
        mark = ""
    return inline(inner, marks + ([{"type": mark}] if mark else []), depth + 1)


def _link(body: str, marks: list[dict[str, Any]], depth: int) -> list[dict[str, Any]]:
    """``[text|url]``, ``[url]``, ``[~user]``, ``[^attachment]``; brackets around anything
    else that is no URL (``[ ]``, ``[a page name]``) are text."""
    parts = [part.strip() for part in re.split(r"(?<!\\)\|", body)]
    unlinked = [m for m in marks if m["type"] != "link"]
    target = parts[0]
    if len(parts) == 1 and target[1:] and target[0] in "~^#":  # a user, an attachment, an anchor
        name = "@" + target[1:].removeprefix("accountid:") if target[0] == "~" else target[1:]
        return [{"type": "text", "text": name, "marks": marks}]
    label, href = target, unescape(parts[-1] if len(parts) == 1 else parts[1])
    if _UNSAFE_LINK.match(href):
        return inline(label, marks, depth + 1)
    if (len(parts) == 1 and not _URL.match(href)) or not href:
        return [{"type": "text", "text": f"[{unescape(body)}]", "marks": marks}]
    if len(parts) == 1:
        return [{"type": "text", "text": href, "marks": [*unlinked, _href(href)]}]
    return inline(label, [*unlinked, _href(href)], depth + 1)


def _href(href: str) -> dict[str, Any]:
    return {"type": "link", "attrs": {"href": href}}


def unescape(text: str) -> str:
    """Backslash escapes and character references as the characters they stand for."""
    return re.sub(rf"\\(.)|({_ENTITY})", lambda m: m.group(1) or html.unescape(m.group(2)), text)
