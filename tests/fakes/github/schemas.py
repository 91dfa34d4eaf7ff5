"""Checking what the fake GitHub serves against githubkit's generated models for the API
version a request named — strictly: a field the model does not declare is reported, so a
payload still carrying a field the version removed (``merge_commit_sha`` in API 2026-03-10)
fails, where githubkit's own parsing would silently ignore it.

The model of a recorded answer is the one githubkit itself would parse it with: the answer is
replayed to the githubkit call of its operation (``OPERATIONS``), and the ``Response`` (or the
``RequestFailed`` for an error) names its data model.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import httpx
import pydantic
from githubkit import GitHub, TokenAuthStrategy
from githubkit.exception import RequestFailed
from pydantic import BaseModel, TypeAdapter

from tests.fakes.github.records import RecordedRequest

# Fields GitHub sends that the REST description leaves out of a model, with why each is taken.
UNDECLARED_BUT_SENT: Mapping[str, str] = {
    # Every error body carries the status as a string since 2023; ``ValidationError`` and
    # ``ValidationErrorSimple`` (the 422 models) do not declare it, ``BasicError`` does.
    "status": "GitHub's error bodies",
}

Call = Callable[[Any], Any]
LATEST = "2026-03-10"  # githubkit_schemas' latest, the version the provider sends

# The operations the provider uses (as the fake's routes name them) -> the githubkit call that
# parses the answer. The arguments do not matter: the replayed answer is served whatever the
# request.
OPERATIONS: Mapping[str, Call] = {
    "repos/get": lambda r: r.repos.get("o", "r"),
    "issues/list-for-repo": lambda r: r.issues.list_for_repo("o", "r"),
    "issues/get": lambda r: r.issues.get("o", "r", 1),
    "issues/create": lambda r: r.issues.create("o", "r", title="t"),
    "issues/update": lambda r: r.issues.update("o", "r", 1, title="t"),
    "issues/add-labels": lambda r: r.issues.add_labels("o", "r", 1, labels=["x"]),
    "issues/set-labels": lambda r: r.issues.set_labels("o", "r", 1, labels=["x"]),
    "issues/list-labels-for-repo": lambda r: r.issues.list_labels_for_repo("o", "r"),
    "issues/create-label": lambda r: r.issues.create_label("o", "r", name="x"),
    "issues/list-dependencies-blocked-by": lambda r: r.issues.list_dependencies_blocked_by(
        "o", "r", 1
    ),
    "issues/add-blocked-by-dependency": lambda r: r.issues.add_blocked_by_dependency(
        "o", "r", 1, issue_id=1
    ),
    "issues/list-events-for-timeline": lambda r: r.issues.list_events_for_timeline("o", "r", 1),
    "pulls/list": lambda r: r.pulls.list("o", "r"),
    "pulls/get": lambda r: r.pulls.get("o", "r", 1),
    "pulls/create": lambda r: r.pulls.create("o", "r", title="t", head="h", base="b"),
    "pulls/merge": lambda r: r.pulls.merge("o", "r", 1),
    "pulls/list-files": lambda r: r.pulls.list_files("o", "r", 1),
    "pulls/list-reviews": lambda r: r.pulls.list_reviews("o", "r", 1),
    "pulls/create-review": lambda r: r.pulls.create_review("o", "r", 1, event="COMMENT"),
    "pulls/list-review-comments": lambda r: r.pulls.list_review_comments("o", "r", 1),
    "repos/merge": lambda r: r.repos.merge("o", "r", base="b", head="h"),
    "repos/compare-commits": lambda r: r.repos.compare_commits("o", "r", "a...b"),
    "checks/list-for-ref": lambda r: r.checks.list_for_ref("o", "r", "main"),
    "repos/list-commit-statuses-for-ref": lambda r: r.repos.list_commit_statuses_for_ref(
        "o", "r", "main"
    ),
    "git/get-ref": lambda r: r.git.get_ref("o", "r", "heads/main"),
    "git/create-ref": lambda r: r.git.create_ref("o", "r", ref="refs/heads/x", sha="0" * 40),
    "git/update-ref": lambda r: r.git.update_ref("o", "r", "heads/x", sha="0" * 40),
    "git/create-blob": lambda r: r.git.create_blob("o", "r", content="x"),
    "git/get-blob": lambda r: r.git.get_blob("o", "r", "0" * 40),
    "git/create-tree": lambda r: r.git.create_tree("o", "r", tree=[]),
    "git/get-tree": lambda r: r.git.get_tree("o", "r", "0" * 40),
    "git/create-commit": lambda r: r.git.create_commit(
        "o", "r", message="m", tree="0" * 40, parents=[]
    ),
    "git/get-commit": lambda r: r.git.get_commit("o", "r", "0" * 40),
    "apps/create-installation-access-token": lambda r: r.apps.create_installation_access_token(1),
    "users/get-authenticated": lambda r: r.users.get_authenticated(),
    "apps/get-authenticated": lambda r: r.apps.get_authenticated(),
    "repos/get-collaborator-permission-level": lambda r: r.repos.get_collaborator_permission_level(
        "o", "r", "u"
    ),
}

# Operations the fake serves that the provider does not use (yet), checked the same way where a
# test records them (the fake's own tests). One the provider comes to use moves to OPERATIONS.
SERVED: Mapping[str, Call] = {
    "issues/remove-label": lambda r: r.issues.remove_label("o", "r", 1, "x"),
    "issues/remove-all-labels": lambda r: r.issues.remove_all_labels("o", "r", 1),
    "pulls/update": lambda r: r.pulls.update("o", "r", 1, title="t"),
}


def model_of(recorded: RecordedRequest) -> Any:
    """The type githubkit parses this answer into, for the API version the request named."""
    assert recorded.route is not None, f"no route answered {recorded.method} {recorded.path}"
    call = OPERATIONS.get(recorded.route) or SERVED[recorded.route]
    body = recorded.response or b""

    def replay(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": "application/json"} if body else {}
        return httpx.Response(recorded.status, headers=headers, content=body)

    client = GitHub(
        TokenAuthStrategy("replay"),
        base_url="http://replay.invalid/",
        transport=httpx.MockTransport(replay),
        auto_retry=False,
        http_cache=False,
    )
    # A request naming no version is githubkit's own (the App's token exchange): githubkit
    # parses its answer with the models of the latest version it has.
    version = recorded.api_version or LATEST
    rest: Any = client.rest  # typed per literal version; this one is the request's
    try:
        response = call(rest(version))
    except RequestFailed as failed:
        return failed.response._data_model  # githubkit keeps the model it would parse with
    return response._data_model


def check(recorded: RecordedRequest) -> list[str]:
    """Problems with one recorded answer: schema errors, and fields the model does not declare
    (each as a dotted path)."""
    model = model_of(recorded)
    if not recorded.response:
        return []
    data = pydantic.TypeAdapter(Any).validate_json(recorded.response)
    try:
        _adapter(model).validate_python(data)
    except pydantic.ValidationError as exc:
        return [f"not a valid {_name(model)}: {exc}"]
    return [
        f"{where} is not in {_name(model)}"
        for where in undeclared(model, data, "$")
        if where.rsplit(".", 1)[-1] not in UNDECLARED_BUT_SENT
    ]


def undeclared(annotation: Any, data: Any, where: str) -> list[str]:
    """Paths in ``data`` that ``annotation`` does not declare (extra fields, at any depth)."""
    if data is None or annotation is Any:
        return []
    origin = get_origin(annotation)
    if origin is Annotated:
        return undeclared(get_args(annotation)[0], data, where)
    if origin is Union or origin is types.UnionType:
        return _best_member(annotation, data, where)
    if origin in (list, tuple, Sequence) and isinstance(data, list):
        item = get_args(annotation)[0] if get_args(annotation) else Any
        return [p for i, v in enumerate(data) for p in undeclared(item, v, f"{where}[{i}]")]
    if origin in (dict, Mapping) and isinstance(data, dict):
        args = get_args(annotation)
        value = args[1] if len(args) == 2 else Any
        return [p for k, v in data.items() for p in undeclared(value, v, f"{where}.{k}")]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_fields(annotation, data, where)
    return []


def _model_fields(model: type[BaseModel], data: Any, where: str) -> list[str]:
    if not isinstance(data, dict):
        return []
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    open_ended = model.model_config.get("extra") == "allow"
    found: list[str] = []
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            if not open_ended:
                found.append(f"{where}.{key}")
            continue
        found += undeclared(field.annotation, value, f"{where}.{key}")
    return found


def _best_member(annotation: Any, data: Any, where: str) -> list[str]:
    """For a union, the member that takes the data with the fewest undeclared fields."""
    best: list[str] | None = None
    for member in get_args(annotation):
        if member is type(None) or get_origin(member) is Literal:
            continue
        try:
            _adapter(member).validate_python(data)
        except pydantic.ValidationError:
            continue
        found = undeclared(member, data, where)
        if best is None or len(found) < len(best):
            best = found
    return best or []


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _name(model: Any) -> str:
    return getattr(model, "__name__", None) or str(model)
