"""The fake Jira checked against Atlassian's description: ``openapi_subset.json`` (extracted by
``extract_openapi.py`` from the vendor's OpenAPI file) loaded, and the checks its tests make.

``Subset.check_answer(method, path, status, body)`` validates an answer the fake sent with
``jsonschema``: a 2xx body against the operation's response schema (and each served issue field
against the subset's ``fields``), an error body against ``ErrorCollection``.
``Subset.check_request(method, path, query)`` says the route is one of the subset's operations
and that every query parameter sent is one the operation takes. A Data Center path
(``/rest/api/2/...``) is checked against the same v3 operation, its rich text (an issue's
description, a comment's body) being a wiki-markup string there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SUBSET = Path(__file__).with_name("openapi_subset.json")


@dataclass(frozen=True)
class Operation:
    key: str  # "GET /rest/api/3/issue/{issueIdOrKey}"
    method: str
    template: str
    pattern: re.Pattern[str]
    spec: dict[str, Any]

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in self.spec["parameters"] if p["in"] == "query"}


class SubsetError(AssertionError):
    """The fake answered or was asked something the description does not allow."""


class Subset:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.source = data["source"]
        self.operations: list[Operation] = []
        for key, spec in data["operations"].items():
            method, template = key.split(" ", 1)
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
            self.operations.append(Operation(key, method, template, re.compile(regex), spec))
        # OpenAPI 3.0 schemas read as JSON Schema: "nullable" is handled below.
        schemas = {
            name: _nullable(schema) for name, schema in data["components"]["schemas"].items()
        }
        document = {"components": {"schemas": schemas}}
        self.registry: Registry[Any] = Registry().with_resource(
            "urn:jira", Resource.from_contents(document, default_specification=DRAFT202012)
        )

    def operation(self, method: str, path: str) -> Operation:
        """The subset's operation for a request (a v2 path is read as its v3 twin)."""
        v3 = re.sub(r"^/rest/api/2/", "/rest/api/3/", path)
        for op in self.operations:
            if op.method == method and op.pattern.fullmatch(v3):
                return op
        raise SubsetError(f"{method} {path} is none of the subset's operations")

    def validator(self, schema: Any) -> Draft202012Validator:
        return Draft202012Validator(_nullable(schema), registry=self.registry)

    def check_request(self, method: str, path: str, query: str = "", body: Any = None) -> Operation:
        """``method path?query`` is one of the subset's operations, each query parameter one
        it takes with a value of its type (an integer, a boolean, one of an enum), and a JSON
        ``body`` fits its request body's schema."""
        op = self.operation(method, path)
        known = op.parameters
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name not in known:
                raise SubsetError(f"{op.key} takes no query parameter {name!r}: {sorted(known)}")
            _check_value(op.key, name, value, known[name].get("schema") or {})
        request = op.spec.get("requestBody")
        if body is not None:
            if request is None:
                raise SubsetError(f"{op.key} takes no request body")
            if request.get("schema"):
                self._validate(request["schema"], body, f"{op.key} request body")
        elif request is not None and request.get("required"):
            raise SubsetError(f"{op.key} needs a request body")
        return op

    def check_answer(self, method: str, path: str, status: int, body: Any) -> None:
        op = self.operation(method, path)
        v2 = path.startswith("/rest/api/2/")
        responses = op.spec["responses"]
        if 200 <= status < 300:
            if str(status) not in responses:
                raise SubsetError(f"{op.key} never answers {status}: {sorted(responses)}")
            schema = responses[str(status)]
            if schema is None or schema == {}:
                return
            self._validate(schema, body, f"{op.key} {status}")
            for issue in _issues(op.key, body):
                self._check_fields(issue.get("fields", {}), v2, op.key)
            return
        if body is not None and isinstance(body, dict):
            self._validate({"$ref": "#/components/schemas/ErrorCollection"}, body, "an error")

    def _check_fields(self, fields: dict[str, Any], v2: bool, where: str) -> None:
        for name, value in fields.items():
            schema = self.data["fields"].get(name)
            if schema is None:
                raise SubsetError(f"{where}: the fake serves a field {name!r} the subset names not")
            if name == "description" and value is not None:
                want = str if v2 else dict
                if not isinstance(value, want):
                    kind = "a wiki-markup string" if v2 else "an ADF document"
                    raise SubsetError(f"{where}: description must be {kind}, got {value!r}")
            self._validate(schema, value, f"{where} field {name}")

    def _validate(self, schema: Any, body: Any, where: str) -> None:
        errors = sorted(self.validator(schema).iter_errors(body), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            at = "/".join(str(p) for p in first.absolute_path) or "(the body)"
            raise SubsetError(f"{where}: at {at}: {first.message}")


def _check_value(where: str, name: str, value: str, schema: dict[str, Any]) -> None:
    """A query parameter's value read as its schema's type (an array's items: its values)."""
    if schema.get("type") == "array":
        schema = schema.get("items") or {}
    kind = schema.get("type")
    if kind == "integer" and not re.fullmatch(r"-?\d+", value):
        raise SubsetError(f"{where}: {name}={value!r} is not an integer")
    if kind == "boolean" and value not in ("true", "false"):
        raise SubsetError(f"{where}: {name}={value!r} is not true or false")
    if "enum" in schema and value not in schema["enum"]:
        raise SubsetError(f"{where}: {name}={value!r} is none of {schema['enum']}")


def _issues(key: str, body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        return []
    if key.endswith("/issue/{issueIdOrKey}") and "fields" in body:
        return [body]
    return [i for i in body.get("issues", []) if isinstance(i, dict)]


def _nullable(schema: Any) -> Any:
    """OpenAPI 3.0's ``nullable: true`` as JSON Schema's null type; references rebased."""
    if isinstance(schema, dict):
        out = {k: _nullable(v) for k, v in schema.items() if k != "nullable"}
        if schema.get("nullable") is True:
            out = {"anyOf": [out, {"type": "null"}]}
        target = out.get("$ref")
        if isinstance(target, str) and target.startswith("#/"):
            out["$ref"] = "urn:jira" + target
        return out
    if isinstance(schema, list):
        return [_nullable(item) for item in schema]
    return schema


@cache
def subset() -> Subset:
    return Subset(json.loads(SUBSET.read_text()))
