"""Text as Markdown that reads back as the same text: what ``adf.to_markdown`` escapes, and how
it writes code spans and link destinations. HTML comments (cpe's hidden markers) stay verbatim.
"""

from __future__ import annotations

import re
import string
import unicodedata

_LINE_START = re.compile(
    r"^(#{1,6}(?=\s|$)|>|[-+*](?=\s|$)|\d{1,9}(?=[.)](?:\s|$))|=+\s*$|(?:-\s*)+$)"
)
# (a label never holds a bracket or a space: each try stops at the next one, so the search is
# linear on a text of many brackets)
AUTOLINK = re.compile(r"\[([^\[\]\s]+)\]\(([A-Za-z][\w+.-]*:[^()\s<>]+)\)")


def autolink(match: re.Match[str]) -> str:
    """``[url](url)`` as ``<url>``: how a bare link is written."""
    label, url = re.sub(r"\\(.)", r"\1", match.group(1)), match.group(2)
    return f"<{url}>" if label == url else match.group(0)


def destination(href: str, title: str) -> str:
    """A link's destination (and title) as Markdown writes it: a character reference or a
    backslash in it escaped, so that it reads back as it is."""
    href = href.replace("\n", "%0A").replace("<", "%3C").replace(">", "%3E")
    href = re.sub(r"\\(?=[!-/:-@\[-`{-~])|&(?=#?\w+;)", lambda m: "\\" + m.group(0), href)
    dest = f"<{href}>" if re.search(r"[\s()]", href) else href
    if title:
        dest += ' "' + title.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return dest


def code_span(text: str) -> str:
    text = text.replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    spaced = text.startswith(" ") and text.endswith(" ") and text.strip()
    pad = " " if text.startswith("`") or text.endswith("`") or spaced else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def comments(text: str) -> list[tuple[int, int]]:
    """Where the HTML comments (``<!-- ... -->``) of a text start and end; found with one
    forward search each, so a text of many unclosed ``<!--`` takes one pass."""
    spans, start = [], text.find("<!--")
    while start != -1:
        end = text.find("-->", start + 4)
        if end == -1:
            break
        spans.append((start, end + 3))
        start = text.find("<!--", end + 3)
    return spans


def escape(text: str, before: str = "", after: str = "") -> str:
    """Text as Markdown that reads back as the same text; HTML comments kept verbatim.
    ``before``/``after``: the plain text that touches it ("" where a delimiter, a line's end or
    nothing known does), so ``u`` + ``_a`` escapes as ``u_a`` does."""
    out, last, spans = [], 0, comments(text)
    for start, end in spans:
        out += [_escape_plain(text[last:start], before if not last else ""), text[start:end]]
        last = end
    out.append(_escape_plain(text[last:], before if not spans else "", after))
    return "".join(out)


def _escape_plain(text: str, before_text: str = "", after_text: str = "") -> str:
    out = []
    for i, char in enumerate(text):
        before = text[i - 1] if i else before_text
        after = text[i + 1] if i + 1 < len(text) else after_text
        if (
            char in "\\`[]"
            or (char == "~" and ("~" in (before, after) or not before.strip() or not after.strip()))
            or (char == "*" and not (before.isspace() and after.isspace()))
            or (char == "_" and not (before.isalnum() and after.isalnum()))
            or (char == "<" and re.match(r"[A-Za-z/?!]", after))
            or (char == "&" and re.match(r"#?\w+;", text[i + 1 :]))
        ):
            out.append("\\")
        out.append(char)
    return "".join(out)


def escape_line_start(line: str) -> str:
    if line.startswith("<!--"):  # an HTML block: raw to its end, so only comments stay raw
        rest = "".join(line[end:start] for end, start in _gaps(comments(line), len(line)))
        return line if not rest.strip(" \t") else "\\" + line
    match = _LINE_START.match(line)
    if not match:  # a row of bars and dashes would make the line above a table's head
        return (
            "\\" + line
            if re.fullmatch(r"[|: \t]*-[-|: \t]*", line) and ("|" in line or ":" in line)
            else line
        )
    if match.group(1)[0].isdigit():
        cut = len(match.group(1))
        return f"{line[:cut]}\\{line[cut:]}"
    return "\\" + line


def _gaps(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """The stretches between spans (as (start, end) pairs), from 0 to ``length``."""
    ends = [0, *(end for _, end in spans)]
    starts = [start for start, _ in spans] + [length]
    return list(zip(ends, starts, strict=True))


def can_wrap(before: str, first: str, last: str, after: str) -> bool:
    """Whether ``*``/``~~`` delimiters around a text (its ``first`` and ``last`` characters,
    ``before`` and ``after`` it) open and close emphasis: CommonMark's flanking rules."""
    opens = not _space(first) and (not _punct(first) or _space(before) or _punct(before))
    closes = not _space(last) and (not _punct(last) or _space(after) or _punct(after))
    return opens and closes


def _space(char: str) -> bool:
    return not char or char.isspace()


def _punct(char: str) -> bool:
    return bool(char) and (char in string.punctuation or unicodedata.category(char)[0] in "PS")
