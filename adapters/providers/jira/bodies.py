"""Descriptions and comments as Jira keeps them, and as cpe reads and writes them (Markdown).

Cloud (REST v3) keeps an ADF document, Data Center (REST v2) a wiki-markup string: ``adf.py``
and ``wiki.py`` convert. cpe's idempotency key rides in what it writes as a **visible last
paragraph** ``cpe-key: <token>``: ADF has no comment node, and a hidden HTML comment would come
back as text anyway. It is written and found on the raw document (an ADF paragraph of one text
node, a wiki line), never through the Markdown conversion, so no escaping can change it; the
reader takes it off, so the body an agent reads never holds it.
"""

from __future__ import annotations

import re
from typing import Any

from adapters.providers.jira import adf, wiki

FOOTER = "cpe-key: "
_FOOTER_LINE = re.compile(r"^cpe-key: (\S+)$")


def footer(token: str) -> str:
    return f"{FOOTER}{token}"


def to_jira(text: str, token: str | None, *, cloud: bool) -> Any:
    """Markdown (and a key's token, ``markers.key_token``) as Jira keeps it: an ADF document,
    or wiki markup; None for no text at all."""
    if not text.strip() and token is None:
        return None
    if cloud:
        doc = adf.from_markdown(text) if text.strip() else _empty_doc()
        if token is not None:
            content = list(doc.get("content") or [])
            content.append(
                {"type": "paragraph", "content": [{"type": "text", "text": footer(token)}]}
            )
            doc = {**doc, "content": content}
        return doc
    marked = wiki.from_markdown(text) if text.strip() else ""
    if token is not None:
        marked = f"{marked.rstrip()}\n\n{footer(token)}" if marked.strip() else footer(token)
    return marked


def from_jira(value: object) -> tuple[str, str | None]:
    """(the Markdown, the key token it carries or None), from an ADF document or wiki text."""
    if isinstance(value, dict):
        content = value.get("content")
        token = None
        if isinstance(content, list) and content:
            token = _adf_footer(content[-1])
            if token is not None:
                value = {**value, "content": content[:-1]}
        return adf.to_markdown(value).strip("\n"), token
    if isinstance(value, str):
        lines = value.rstrip().split("\n")
        found = _FOOTER_LINE.match(lines[-1].strip()) if lines else None
        if found is not None:
            value = "\n".join(lines[:-1]).rstrip()
        return wiki.to_markdown(value).strip("\n"), found.group(1) if found else None
    return "", None


def _adf_footer(node: object) -> str | None:
    if not isinstance(node, dict) or node.get("type") != "paragraph":
        return None
    kids = node.get("content")
    if not isinstance(kids, list) or len(kids) != 1 or not isinstance(kids[0], dict):
        return None
    text = kids[0].get("text")
    if kids[0].get("type") != "text" or not isinstance(text, str) or kids[0].get("marks"):
        return None
    found = _FOOTER_LINE.match(text.strip())
    return found.group(1) if found else None


def _empty_doc() -> dict[str, Any]:
    return {"type": "doc", "version": 1, "content": []}
