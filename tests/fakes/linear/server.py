"""The fake Linear's HTTP layer: Linear's conventions around ``tests/fakes/http.HttpCore``.

What a client sees is what Linear's GraphQL API (``POST /graphql``, JSON ``{query, variables,
operationName}``) does for the same calls:

- Auth: a personal API key is sent bare (``Authorization: lin_api_...``), an OAuth access token
  as ``Authorization: Bearer <token>``. No header, an unknown token, or a token sent the other
  way is Linear's ``AUTHENTICATION_ERROR`` (HTTP 400, ``statusCode`` 401 in the extensions).
- A document that does not parse is ``GRAPHQL_PARSE_FAILED``, one that is not valid against the
  served schema ``GRAPHQL_VALIDATION_FAILED`` (both ``type: graphql error``), a variable of the
  wrong type ``BAD_USER_INPUT``; a resolver's refusal is its own error with its ``path``
  (``Entity not found: Issue``, ``INPUT_ERROR``). Any answer with errors is HTTP 400.
- Rate limits (Linear's leaky buckets, per token): requests (5,000 an hour) and complexity
  points (250,000 an hour), refilled continuously. Every authenticated answer carries
  ``X-RateLimit-Requests-Limit``/``-Remaining``/``-Reset`` and
  ``X-RateLimit-Complexity-Limit``/``-Remaining``/``-Reset`` (resets in epoch milliseconds:
  when the bucket is full again) and ``X-Complexity`` (what this query cost). An empty bucket is
  Linear's ``RATELIMITED`` answer (HTTP 400, ``statusCode`` 429) with those headers and a
  ``Retry-After`` (seconds until a request may be sent again, as Linear's SDK reads it); a single
  query over 10,000 points is refused before it runs.
- The per-request record (``LinearRequest``) adds the operation's name, its kind, its root
  fields, its variables, its complexity and who sent it (never the token).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    execute,
    parse,
    validate,
)

from tests.fakes.http import (
    DROP,
    Exchange,
    Fault,
    HttpCore,
    HttpError,
    Incoming,
    Reply,
    Router,
)
from tests.fakes.linear.errors import LinearError, authentication, ratelimited
from tests.fakes.linear.fields import Context
from tests.fakes.linear.records import Credential
from tests.fakes.linear.schema import MAX_COMPLEXITY, complexity, served_schema
from tests.fakes.linear.wire import HOUR, Bucket, Budget, LinearFault, LinearRequest
from tests.fakes.linear.workspace import Workspace

REQUESTS_PER_HOUR = 5_000
COMPLEXITY_PER_HOUR = 250_000


def _error_body(*errors: LinearError) -> dict[str, Any]:
    return {"errors": [e.entry() for e in errors]}


def auth_failure(message: str, presentable: str) -> HttpError:
    body = _error_body(authentication(message, presentable))
    return HttpError(400, message, body=body)


class LinearCore(HttpCore):
    thread_name = "fake-linear"

    def __init__(
        self,
        router: Router,
        lock: threading.RLock,
        workspace: Workspace,
        tokens: Mapping[str, Credential],
        now: Callable[[], float],
    ) -> None:
        super().__init__(router, lock, now)
        self.workspace = workspace
        self.tokens = dict(tokens)
        self.request_limit = REQUESTS_PER_HOUR
        self.complexity_limit = COMPLEXITY_PER_HOUR
        self.budgets: dict[str, Budget] = {}
        self.throttled = 0  # the next requests answered RATELIMITED whatever the buckets
        self.throttle_seconds: float | None = None  # the wait those answers announce
        self._current: dict[str, Any] = {}
        self._headers: dict[str, str] = {}
        router.add("POST", r"/graphql", self.graphql, "graphql")

    # ------------------------------------------------------------------ HttpCore hooks

    def admit(self, method: str, path: str, headers: Mapping[str, str]) -> Any:
        self._current, self._headers = {}, {}
        given = headers.get("authorization", "").strip()
        if not given:
            raise auth_failure(
                "Authentication required, not authenticated",
                "You need to authenticate to access this operation.",
            )
        scheme, _, rest = given.partition(" ")
        bearer = scheme.lower() == "bearer"
        token = rest.strip() if bearer else given
        credential = self.tokens.get(token)
        if credential is None or (credential.kind == "oauth") != bearer:
            raise auth_failure(
                "Authentication required, not authenticated",
                "Authentication failed: the API key or access token is invalid, revoked or "
                "sent the wrong way (an API key bare, an OAuth token after 'Bearer').",
            )
        user = self.workspace.users[credential.user_id]
        self._current.update(user=user.email, auth=credential.kind)
        budget = self._budget(token)
        budget.requests.refill(self.now())
        budget.complexity.refill(self.now())
        self._current["budget"] = budget
        if self.throttled > 0:
            self.throttled -= 1
            self._rate_headers(budget, None, limited=True, retry=self.throttle_seconds)
            raise HttpError(400, "Rate limit exceeded", body=_error_body(ratelimited("requests")))
        if budget.requests.remaining < 1:
            wait = (1 - budget.requests.remaining) * HOUR / budget.requests.limit
            self._rate_headers(budget, None, limited=True, retry=wait)
            raise HttpError(400, "Rate limit exceeded", body=_error_body(ratelimited("requests")))
        budget.requests.remaining -= 1
        self._rate_headers(budget, None)
        return credential

    def make_call(self, incoming: Incoming) -> Any:
        """Notes what the request asks (for the log and the faults by operation) before any
        fault may answer it."""
        body = incoming.body
        if isinstance(body, dict) and isinstance(body.get("query"), str):
            self._current.update(
                document=body["query"],
                variables=body.get("variables") or {},
                operation_name=body.get("operationName"),
            )
            try:
                operation = _operation(parse(body["query"]), body.get("operationName"))
            except GraphQLError:
                operation = None
            if operation is not None:
                self._current.update(
                    operation=operation.operation.value,
                    operation_name=body.get("operationName")
                    or (operation.name.value if operation.name else None),
                    fields=[
                        s.name.value
                        for s in operation.selection_set.selections
                        if isinstance(s, FieldNode)
                    ],
                )
        return incoming

    def no_route(self, allowed: bool) -> HttpError:
        return HttpError(
            405 if allowed else 404,
            "Not Found",
            body={
                "errors": [
                    {"message": "Only POST /graphql is served", "extensions": {"code": "NOT_FOUND"}}
                ]
            },
        )

    def fault_reply(self, fault: Fault) -> tuple[int, dict[str, str], bytes]:
        if fault.status == 400 and fault.message == "RATELIMITED":
            budget = self._current.get("budget")
            if budget is not None:
                retry = None if fault.retry_after is None else float(fault.retry_after)
                self._rate_headers(budget, None, limited=True, retry=retry)
            return self.error_reply(
                HttpError(400, "Rate limit exceeded", body=_error_body(ratelimited("requests")))
            )
        return super().fault_reply(fault)

    def _fault(self, method: str, path: str) -> Fault | None:
        names = self._operation_names()
        for fault in self.faults:
            if fault.hits >= fault.times or fault.method != method:
                continue
            if not re.search(fault.path, path):
                continue
            wanted = getattr(fault, "operation", None)
            if wanted is not None and not any(re.search(wanted, n) for n in names):
                continue
            fault.hits += 1
            return fault
        return None

    def rate_headers(self) -> dict[str, str]:
        headers, self._headers = self._headers, {}
        return headers

    def record(self, exchange: Exchange) -> Any:
        current = self._current
        return LinearRequest(
            **self.recorded(exchange),
            user=current.get("user"),
            auth=current.get("auth"),
            operation_name=current.get("operation_name"),
            operation=current.get("operation"),
            fields=tuple(current.get("fields", ())),
            variables=dict(current.get("variables") or {}),
            complexity=current.get("complexity"),
            document=current.get("document"),
            codes=tuple(current.get("codes", ())),
        )

    # ------------------------------------------------------------------ POST /graphql

    def graphql(self, call: Incoming) -> Reply:
        body = call.body
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return self._refuse(
                LinearError(
                    "Must provide a query string in the JSON body ({query, variables, "
                    "operationName})",
                    type="graphql error",
                    code="BAD_REQUEST",
                )
            )
        variables = body.get("variables") or {}
        name = body.get("operationName")
        try:
            document = parse(body["query"])
        except GraphQLError as error:
            return self._refuse(_graphql_error(error, "GRAPHQL_PARSE_FAILED"))
        schema = served_schema()
        problems = validate(schema, document)
        if problems:
            return self._refuse(*(_graphql_error(p, "GRAPHQL_VALIDATION_FAILED") for p in problems))
        operation = _operation(document, name)
        if operation is None:
            return self._refuse(
                LinearError(
                    f"Unknown operation named {name!r}."
                    if name
                    else "Must provide operation name if query contains multiple operations.",
                    type="graphql error",
                    code="GRAPHQL_VALIDATION_FAILED",
                )
            )
        cost = complexity(
            schema, document, operation, variables if isinstance(variables, dict) else {}
        )
        self._current["complexity"] = cost
        budget: Budget = self._current["budget"]
        self._rate_headers(budget, cost)
        if cost > MAX_COMPLEXITY:
            return self._refuse(
                LinearError(
                    f"Query too complex: its complexity is {cost} points, the most one query "
                    f"may cost is {MAX_COMPLEXITY}",
                    type="invalid input",
                    code="QUERY_TOO_COMPLEX",
                    presentable="Query too complex: ask for fewer nodes a page (first/last) "
                    "or fewer fields.",
                )
            )
        if budget.complexity.remaining < cost:
            short = cost - budget.complexity.remaining
            wait = short * HOUR / budget.complexity.limit
            self._rate_headers(budget, cost, limited=True, retry=wait)
            return self._refuse(ratelimited("complexity points"))
        budget.complexity.remaining -= cost
        self._rate_headers(budget, cost)
        viewer = self.workspace.users[call.who.user_id]
        result = execute(
            schema,
            document,
            context_value=Context(self.workspace, viewer, call.who),
            variable_values=variables,
            operation_name=name,
        )
        errors = [_execution_error(e) for e in result.errors or ()]
        answer: dict[str, Any] = {"data": result.data}
        if errors:
            answer["errors"] = errors
            self._note_codes(answer)
        return Reply(400 if errors else 200, answer)

    # ------------------------------------------------------------------ helpers

    def _refuse(self, *errors: LinearError) -> Reply:
        body = _error_body(*errors)
        self._note_codes(body)
        return Reply(400, body)

    def _note_codes(self, body: Any) -> None:
        """The ``extensions.code`` of each error an answer carries, for the log."""
        errors = body.get("errors") if isinstance(body, dict) else None
        if isinstance(errors, list):
            self._current["codes"] = tuple(
                str((e.get("extensions") or {}).get("code")) for e in errors if isinstance(e, dict)
            )

    def error_reply(self, error: HttpError) -> tuple[int, dict[str, str], bytes]:
        self._note_codes(error.body)
        return super().error_reply(error)

    def _budget(self, token: str) -> Budget:
        budget = self.budgets.get(token)
        if budget is None:
            now = self.now()
            budget = Budget(
                Bucket(self.request_limit, self.request_limit, now),
                Bucket(self.complexity_limit, self.complexity_limit, now),
            )
            self.budgets[token] = budget
        return budget

    def _rate_headers(
        self,
        budget: Budget,
        cost: int | None,
        *,
        limited: bool = False,
        retry: float | None = None,
    ) -> None:
        """Linear's rate-limit headers; ``limited``: this answer is RATELIMITED (no request
        left), and with ``retry`` a request may be sent again in that many seconds
        (``Retry-After``, and the requests' reset no sooner)."""
        now = self.now()
        requests, points = budget.requests, budget.complexity
        reset_requests, reset_points = requests.reset_ms(now), points.reset_ms(now)
        self._headers = {
            "X-RateLimit-Requests-Limit": str(int(requests.limit)),
            "X-RateLimit-Requests-Remaining": str(0 if limited else int(requests.remaining)),
            "X-RateLimit-Requests-Reset": str(reset_requests),
            "X-RateLimit-Complexity-Limit": str(int(points.limit)),
            "X-RateLimit-Complexity-Remaining": str(int(points.remaining)),
            "X-RateLimit-Complexity-Reset": str(reset_points),
        }
        if retry is not None:
            again = round((now + retry) * 1000)
            self._headers["Retry-After"] = str(max(1, math.ceil(retry)))
            self._headers["X-RateLimit-Requests-Reset"] = str(max(reset_requests, again))
        if cost is not None:
            self._headers["X-Complexity"] = str(cost)

    def _operation_names(self) -> list[str]:
        """The root fields and the operation's name of the request at hand."""
        names = list(self._current.get("fields", ()))
        if self._current.get("operation_name"):
            names.append(self._current["operation_name"])
        return names


def _operation(document: DocumentNode, name: str | None) -> OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if name is not None:
        return next((o for o in operations if o.name and o.name.value == name), None)
    return operations[0] if len(operations) == 1 else None


def _graphql_error(error: GraphQLError, code: str) -> LinearError:
    wrapped = LinearError(error.message, type="graphql error", code=code)
    if error.locations:
        wrapped.extensions["locations"] = [
            {"line": loc.line, "column": loc.column} for loc in error.locations
        ]
    return wrapped


def _execution_error(error: GraphQLError) -> dict[str, Any]:
    original = error.original_error
    path = list(error.path) if error.path else None
    if isinstance(original, LinearError):
        return original.entry(path)
    if original is None or isinstance(original, GraphQLError):
        # A variable's value graphql-core refused before running anything.
        return LinearError(error.message, code="BAD_USER_INPUT").entry(path)
    # A bug in the fake: said loudly, never dressed as Linear's answer.
    return LinearError(
        f"the fake Linear failed: {original!r}",
        type="internal error",
        code="INTERNAL_SERVER_ERROR",
        status_code=500,
        user_error=False,
    ).entry(path)


__all__ = ["DROP", "LinearCore", "LinearFault", "LinearRequest"]
