"""Agent results: what each role returns, and the JSON Schemas a runtime hands to the model.

The pydantic models are the one source of truth for agent output: the schema
a runtime passes to the agent is generated from them (``output_schema``), and what the agent
returns is validated against them (``validate_output``). ``strict_output_schema`` is the same
schema in the form that runtimes with a strict structured-output mode demand (OpenAI's Responses
API behind ``codex --output-schema``): no ``$ref``, ``additionalProperties: false`` on every
object, every property required (optional ones stay nullable), no ``default`` or ``title``.
"""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from domain.errors import InvalidAgentOutputError
from domain.models import AgentRole, Frozen, WorkItemId

ImplementorOutcome = Literal["completed", "blocked", "validation-failure"]
ReviewVerdict = Literal["approve", "needs-changes"]


class PlannedWorkItem(Frozen):
    temp_id: str = Field(description="An id for this item, unique within this plan")
    title: str
    body: str
    labels: tuple[str, ...] = ()
    blocked_by: tuple[str, ...] = Field(
        default=(), description="temp_ids from this plan or ids of existing work items"
    )


class PlannedWorkItemUpdate(Frozen):
    work_item_id: WorkItemId
    body: str | None = Field(description="The new body, or null for no change")
    labels: tuple[str, ...] | None = Field(description="The new labels, or null for no change")


class PlannerResult(Frozen):
    role: Literal["planner"] = "planner"
    create: tuple[PlannedWorkItem, ...] = ()
    close: tuple[WorkItemId, ...] = ()
    update: tuple[PlannedWorkItemUpdate, ...] = ()


class ImplementorOutput(Frozen):
    """What the implementor agent returns; the adapter adds the patch (``ImplementorResult``)."""

    role: Literal["implementor"] = "implementor"
    outcome: ImplementorOutcome
    summary: str


class ImplementorResult(ImplementorOutput):
    patch: str | None = None
    # The commit the run's branch forked from (the default branch's head when it began): the
    # patch is against it, and the revision is built on it, so that another item landing
    # meanwhile is the merge queue's business, not a failure of this run's pipeline.
    base_sha: str | None = None


class AgentReviewComment(Frozen):
    path: str
    line: int | None = Field(description="The line in the new file, or null for the whole file")
    body: str


class AgentReview(Frozen):
    verdict: ReviewVerdict
    summary: str
    comments: tuple[AgentReviewComment, ...] = ()


class ReviewerResult(Frozen):
    role: Literal["reviewer"] = "reviewer"
    review: AgentReview


AgentResult = Annotated[
    PlannerResult | ImplementorResult | ReviewerResult, Field(discriminator="role")
]
AgentOutput = PlannerResult | ImplementorOutput | ReviewerResult

OUTPUT_MODELS: dict[AgentRole, type[PlannerResult] | type[ImplementorOutput] | type[ReviewerResult]]
OUTPUT_MODELS = {
    "planner": PlannerResult,
    "implementor": ImplementorOutput,
    "reviewer": ReviewerResult,
}

_AGENT_RESULT: TypeAdapter[PlannerResult | ImplementorResult | ReviewerResult] = TypeAdapter(
    AgentResult
)


def parse_agent_result(data: object) -> PlannerResult | ImplementorResult | ReviewerResult:
    """A full ``AgentResult`` (as stored in events and the journal) from plain data."""
    return _AGENT_RESULT.validate_python(data)


def output_schema(role: AgentRole) -> dict[str, Any]:
    """The JSON Schema of what an agent of ``role`` must return (``$defs`` inlined)."""
    schema = OUTPUT_MODELS[role].model_json_schema()
    return _inline_refs(schema)


def strict_output_schema(role: AgentRole) -> dict[str, Any]:
    """``output_schema`` in strict form: closed objects, every property required, no defaults."""
    strict: dict[str, Any] = _strict(output_schema(role))
    return strict


def validate_output(role: AgentRole, data: object) -> AgentOutput:
    """The agent's structured output as the role's model, or ``InvalidAgentOutputError``.

    ``data`` may be the decoded object or a JSON string. The ``role`` field may be omitted by the
    agent; when present it must name ``role``.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InvalidAgentOutputError(role, f"not JSON: {exc}") from exc
    if data is None:
        raise InvalidAgentOutputError(role, "no structured output was returned")
    if not isinstance(data, dict):
        raise InvalidAgentOutputError(role, f"expected a JSON object, got {type(data).__name__}")
    try:
        return OUTPUT_MODELS[role].model_validate(data)
    except ValidationError as exc:
        raise InvalidAgentOutputError(role, _describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(root)"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                target = resolve(copy.deepcopy(defs[ref.rsplit("/", 1)[-1]]))
                extra = {k: resolve(v) for k, v in node.items() if k != "$ref"}
                return {**target, **extra}
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    result: dict[str, Any] = resolve(schema)
    return result


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items() if k not in ("default", "title")}
    if "const" in out:
        # Strict modes accept enum everywhere; const is not accepted by all of them.
        out["enum"] = [out.pop("const")]
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])
    return out
