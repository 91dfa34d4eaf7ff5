"""``POST /hooks/{github,gitlab,linear,jira}``: a delivery checked, then at most a poll asked for.

In order: a vendor with no secret configured is 404 (naming the key to set); a body over
``max_body_bytes`` is 413 (its ``Content-Length`` first, then the bytes read, never more than the
cap and one); a content type other than JSON is 415; then the vendor's check (``verify``): 401 for
a missing or wrong signature or a stale Linear timestamp, 400 for a delivery without its id or
event. An accepted delivery's id already seen is ``200 {"ignored": "already delivered"}`` and
polls nothing (a 4xx would make GitLab disable the hook); a new one asks the ``Refresher`` for
its pollers and is answered at once: 202 (Linear: 200, it counts anything else as a failure)
``{"accepted": ID, "polls": [...]}``; one that names nothing to poll (GitHub's ``ping``, an
event cpe does not read) is ``200 {"ignored": why}``.

Each delivery is logged with its vendor, id, event and outcome; never its body, never a header
that carries a secret. Nothing is written: a kill mid-delivery loses only latency.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapters.host.webhooks.memory import DeliveryMemory
from adapters.host.webhooks.settings import MIB, SECRET_KEYS
from adapters.host.webhooks.stats import WebhookStats
from adapters.host.webhooks.verify import VENDORS, Accepted, Refused, Role, Vendor, verify

log = structlog.get_logger("cpe.webhooks")

PATHS = frozenset(f"/hooks/{vendor}" for vendor in VENDORS)
_SHOWN = 120  # characters of a stranger's header value a log line keeps


class WebhookReceiver:
    def __init__(
        self,
        secrets: Mapping[Vendor, str],
        roles: Mapping[Vendor, frozenset[Role]],
        request: Callable[[Iterable[str]], None],
        *,
        max_body_bytes: int = MIB,
        stats: WebhookStats | None = None,
        memory: DeliveryMemory | None = None,
        clock: Callable[[], float] = time.time,
        pollers: Iterable[str] | None = None,
    ):
        """``secrets``: the configured vendors' secrets; ``roles``: what each vendor keeps here
        (``work_items``, ``revisions``); ``request(names)``: the refresher's (never blocks);
        ``pollers``: the engine's (None: any), a delivery asks for no other."""
        self._secrets = dict(secrets)
        self.roles = {vendor: frozenset(roles.get(vendor, ())) for vendor in VENDORS}
        self.request = request
        self.max_body_bytes = max_body_bytes
        self.stats = stats or WebhookStats()
        self.memory = memory or DeliveryMemory()
        self.clock = clock
        self.pollers = None if pollers is None else frozenset(pollers)

    @classmethod
    def unconfigured(cls) -> WebhookReceiver:
        """A receiver taking nothing: every hook answers 404, saying which key to set."""
        return cls({}, {}, lambda names: None)

    @property
    def vendors(self) -> tuple[Vendor, ...]:
        return tuple(vendor for vendor in VENDORS if vendor in self._secrets)

    def routes(self) -> list[Route]:
        return [
            Route(f"/hooks/{vendor}", self._endpoint(vendor), methods=["POST"])
            for vendor in VENDORS
        ]

    def _endpoint(self, vendor: Vendor) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self.receive(vendor, request)

        endpoint.__name__ = f"hooks_{vendor}"
        return endpoint

    async def receive(self, vendor: Vendor, request: Request) -> Response:
        secret = self._secrets.get(vendor)
        if secret is None:
            return self._refused(
                vendor,
                request,
                Refused(
                    404,
                    "unconfigured",
                    f"cpe takes no {vendor} deliveries: set [webhooks] {SECRET_KEYS[vendor]} "
                    "in supervisor.toml to the environment variable holding the hook's secret",
                ),
            )
        too_big = Refused(
            413,
            "size",
            f"the body is over [webhooks] max_body_bytes ({self.max_body_bytes} bytes)",
        )
        length = request.headers.get("content-length")
        if length is not None and (not length.isdecimal() or int(length) > self.max_body_bytes):
            return self._refused(vendor, request, too_big)
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/json":
            return self._refused(
                vendor,
                request,
                Refused(
                    415,
                    "type",
                    f"content type {media or 'none'!r}: expected application/json (set the "
                    "hook's content type to JSON)",
                ),
            )
        body = await _read(request, self.max_body_bytes)
        if body is None:
            return self._refused(vendor, request, too_big)
        verdict = verify(
            vendor,
            request.headers,
            body,
            secret,
            roles=self.roles[vendor],
            now=self.clock(),
        )
        if isinstance(verdict, Refused):
            return self._refused(vendor, request, verdict)
        if self.pollers is not None:
            kept = tuple(name for name in verdict.pollers if name in self.pollers)
            verdict = Accepted(verdict.delivery, verdict.event, kept)
        return self._accepted(vendor, verdict)

    def _accepted(self, vendor: Vendor, delivery: Accepted) -> Response:
        said = {
            "vendor": vendor,
            "delivery": _shown(delivery.delivery),
            "hook_event": _shown(delivery.event),
        }
        if not self.memory.remember(vendor, delivery.delivery):
            self.stats.delivered(vendor, "duplicate")
            log.info("webhook delivery", **said, outcome="duplicate")
            return JSONResponse({"ignored": "already delivered"})
        if not delivery.pollers:
            self.stats.delivered(vendor, "ignored")
            log.info("webhook delivery", **said, outcome="ignored")
            why = f"{delivery.event or 'this event'}: nothing cpe polls"
            return JSONResponse({"ignored": why})
        self.request(delivery.pollers)
        self.stats.delivered(vendor, "accepted")
        log.info("webhook delivery", **said, outcome="accepted", polls=list(delivery.pollers))
        status = 200 if vendor == "linear" else 202
        return JSONResponse(
            {"accepted": delivery.delivery, "polls": list(delivery.pollers)}, status_code=status
        )

    def _refused(self, vendor: Vendor, request: Request, refused: Refused) -> Response:
        self.stats.delivered(vendor, "refused", refused.reason)
        log.warning(
            "webhook delivery refused",
            vendor=vendor,
            delivery=_shown(_header(request, _ID_HEADERS)),
            hook_event=_shown(_header(request, _EVENT_HEADERS)),
            reason=refused.reason,
            status=refused.status,
        )
        return JSONResponse({"error": refused.message}, status_code=refused.status)


async def _read(request: Request, cap: int) -> bytes | None:
    """The body, or None once it is over ``cap`` bytes (what is over is never kept)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


_ID_HEADERS = (
    "x-github-delivery",
    "idempotency-key",
    "x-gitlab-event-uuid",
    "linear-delivery",
    "x-atlassian-webhook-identifier",
)
_EVENT_HEADERS = ("x-github-event", "x-gitlab-event", "linear-event")


def _header(request: Request, names: tuple[str, ...]) -> str:
    """The first of ``names`` the request carries (as a stranger sent it: shown, never used)."""
    for name in names:
        if name in request.headers:
            return request.headers[name]
    return ""


def _shown(value: Any) -> str:
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text[:_SHOWN]
