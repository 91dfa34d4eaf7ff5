"""Extracts from Atlassian's Jira Cloud platform OpenAPI description the part the fake Jira
serves: ``tests/fakes/jira/openapi_subset.json``.

Run by hand with the vendor file's path (the output is deterministic: same input, same bytes)::

    python -m tests.fakes.jira.extract_openapi /work/shared/vendor/jira-platform-openapi.json

What the subset holds:

- ``source``: the vendor file's name, sha256 and ``info.version``;
- ``operations``: each operation the fake serves (``"GET /rest/api/3/myself"``), with its
  ``operationId``, its parameters (name, place, required, schema), its request body's schema and
  each response's schema (None where Atlassian describes the answer without one);
- ``components.schemas``: every component schema those reach through ``$ref`` (whole, with
  their descriptions dropped: the subset is checked against, not read);
- ``fields``: what the description leaves open. ``IssueBean.fields`` is a free-form object
  there; the schemas of the issue fields the fake serves are named here from Jira's field
  documentation (a ``$ref`` to a component schema, or a plain schema), so a test checks them too.

The description names only ``/rest/api/3`` paths (its README says v2 and v3, but every path is
v3). Data Center serves ``/rest/api/2`` with the same shapes, except that rich text (an issue's
description, a comment's body) is a wiki-markup string where v3 has an Atlassian Document
Format object; the fake's v2 routes are checked against these same v3 operations.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("openapi_subset.json")
PREFIX = "/rest/api/3"

# (method, path under /rest/api/3): what the fake Jira serves.
SERVED: tuple[tuple[str, str], ...] = (
    ("GET", "/myself"),
    ("GET", "/serverInfo"),
    ("GET", "/project/{projectIdOrKey}"),
    ("GET", "/project/{projectIdOrKey}/statuses"),
    ("GET", "/search/jql"),
    ("POST", "/search/jql"),
    ("GET", "/search"),  # Cloud's deprecated offset search, Data Center's /rest/api/2/search
    ("POST", "/search"),
    ("POST", "/issue"),
    ("GET", "/issue/{issueIdOrKey}"),
    ("PUT", "/issue/{issueIdOrKey}"),
    ("GET", "/issue/{issueIdOrKey}/transitions"),
    ("POST", "/issue/{issueIdOrKey}/transitions"),
    ("GET", "/issue/{issueIdOrKey}/comment"),
    ("POST", "/issue/{issueIdOrKey}/comment"),
    ("GET", "/issue/{issueIdOrKey}/changelog"),
    ("POST", "/issueLink"),
    ("GET", "/issueLinkType"),
    ("GET", "/label"),
    ("GET", "/user"),
    ("GET", "/user/groups"),
    ("GET", "/user/permission/search"),
    ("GET", "/group/member"),
    ("GET", "/mypermissions"),
    ("POST", "/permissions/check"),
)

# Always carried: the body of Jira's error answers (most responses name no schema for it).
EXTRA_SCHEMAS = ("ErrorCollection",)


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


# IssueBean.fields is free-form in the description; these are the fields the fake serves, with
# the shapes Jira's field documentation gives them. ``description`` is an ADF document on v3 (a
# string on v2); ``comment`` is the issue's comment page; dates are Jira's
# ``2026-11-29T12:00:00.000+0000``.
FIELDS: dict[str, Any] = {
    "summary": {"type": "string"},
    "description": {"type": ["object", "string", "null"]},
    "status": ref("StatusDetails"),
    "issuetype": ref("IssueTypeDetails"),
    "project": ref("ProjectDetails"),
    "labels": {"type": "array", "items": {"type": "string"}},
    # The description's IssueLink (GET /issueLink/{id}) requires both ends; in an issue's
    # issuelinks field each link names only the other issue, on the side it is on.
    "issuelinks": {
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "type"],
            "properties": {
                "id": {"type": "string"},
                "self": {"type": "string"},
                "type": ref("IssueLinkType"),
                "inwardIssue": ref("LinkedIssue"),
                "outwardIssue": ref("LinkedIssue"),
            },
            "oneOf": [{"required": ["inwardIssue"]}, {"required": ["outwardIssue"]}],
        },
    },
    "reporter": ref("UserDetails"),
    "creator": ref("UserDetails"),
    "assignee": {"anyOf": [ref("UserDetails"), {"type": "null"}]},
    "comment": ref("PageOfComments"),
    "created": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$"},
    "updated": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$"},
    "resolution": {"type": ["object", "null"]},
    "resolutiondate": {"type": ["string", "null"]},
}
FIELD_SCHEMAS = (
    "StatusDetails",
    "IssueTypeDetails",
    "ProjectDetails",
    "LinkedIssue",
    "UserDetails",
)
FIELD_SCHEMAS += ("PageOfComments",)

DROPPED_KEYS = frozenset({"description", "example", "examples", "externalDocs", "xml"})


def strip(node: Any) -> Any:
    """A schema without its prose (descriptions, examples): what is checked stays. The names
    under ``properties`` are property names (``description`` is one), kept whatever they are."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key in sorted(node):
            if key in DROPPED_KEYS or key.startswith("x-"):
                continue
            if key == "properties" and isinstance(node[key], dict):
                out[key] = {name: strip(value) for name, value in sorted(node[key].items())}
            else:
                out[key] = strip(node[key])
        return out
    if isinstance(node, list):
        return [strip(item) for item in node]
    return node


def refs(node: Any) -> set[str]:
    """The component schema names ``node`` refers to (directly)."""
    found: set[str] = set()
    if isinstance(node, dict):
        target = node.get("$ref")
        if isinstance(target, str) and target.startswith("#/components/schemas/"):
            found.add(target.rsplit("/", 1)[1])
        for value in node.values():
            found |= refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= refs(item)
    return found


def json_schema(content: Any) -> Any:
    """The ``application/json`` schema of a request body or response, None if none."""
    if not isinstance(content, dict):
        return None
    media = content.get("content", {}).get("application/json")
    if not media or "schema" not in media:
        return None
    return strip(media["schema"])


def operation(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    found = spec["paths"].get(PREFIX + path, {}).get(method.lower())
    if found is None:
        raise SystemExit(f"{method} {PREFIX}{path} is not in the description")
    parameters = [
        {
            "name": p["name"],
            "in": p["in"],
            "required": bool(p.get("required", False)),
            "schema": strip(p.get("schema", {})),
        }
        for p in found.get("parameters", [])
    ]
    body = found.get("requestBody")
    return {
        "operationId": found["operationId"],
        "deprecated": bool(found.get("deprecated", False)),
        "parameters": parameters,
        "requestBody": None
        if body is None
        else {"required": bool(body.get("required", False)), "schema": json_schema(body)},
        "responses": {
            status: json_schema(answer) for status, answer in sorted(found["responses"].items())
        },
    }


def extract(source: Path) -> dict[str, Any]:
    raw = source.read_bytes()
    spec = json.loads(raw)
    operations = {
        f"{method} {PREFIX}{path}": operation(spec, method, path) for method, path in SERVED
    }
    schemas = spec["components"]["schemas"]
    wanted: set[str] = set(EXTRA_SCHEMAS) | set(FIELD_SCHEMAS) | refs(operations)
    todo = sorted(wanted)
    while todo:
        name = todo.pop()
        for more in sorted(refs(schemas[name]) - wanted):
            wanted.add(more)
            todo.append(more)
    return {
        "source": {
            "file": source.name,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "version": spec["info"]["version"],
            "title": spec["info"]["title"],
        },
        "generated_by": "python -m tests.fakes.jira.extract_openapi <the vendor file>",
        "prefix": PREFIX,
        "operations": operations,
        "fields": FIELDS,
        "components": {"schemas": {name: strip(schemas[name]) for name in sorted(wanted)}},
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.fakes.jira.extract_openapi <jira-platform-openapi.json>")
        return 2
    subset = extract(Path(argv[0]))
    OUT.write_text(json.dumps(subset, indent=1, sort_keys=True) + "\n")
    count = len(subset["components"]["schemas"])
    print(f"{OUT}: {len(subset['operations'])} operations, {count} component schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
