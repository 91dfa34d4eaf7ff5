"""Repository webhooks of the fake GitHub: hooks (``FakeGitHub.hooks.add`` or the REST API's
``POST /repos/{owner}/{repo}/hooks``) and the deliveries GitHub sends them when the repository
changes.

As GitHub documents it (webhook events and payloads; validating deliveries; redelivering): a
delivery is a POST of the event's JSON (or, for a hook whose content type is ``form``,
``payload=<urlencoded JSON>``) with ``X-GitHub-Event``, ``X-GitHub-Delivery`` (a GUID, shared by
every hook the event goes to, and kept by a redelivery), ``X-GitHub-Hook-ID``,
``X-GitHub-Hook-Installation-Target-Type``/``-ID``, ``User-Agent: GitHub-Hookshot/…`` and, for a
hook with a secret, ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the exact body>`` (and the
legacy SHA-1 ``X-Hub-Signature``). GitHub gives the receiver 10 s and does not retry; a
delivery's attempts are kept (``deliveries``) and ``redeliver(guid)`` sends one again.

Payloads are rendered on the sender's thread under the fake's lock, from the state as it is
then (``tests/fakes/deliveries.py``), and POSTed outside it. A repository with no hook renders
and sends nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from tests.fakes.deliveries import DEFAULT_TIMEOUT, Delivery, Sender
from tests.fakes.github import hook_payloads
from tests.fakes.github.payloads import REPOSITORY_ID, Json, user
from tests.fakes.github.records import CheckRunRecord, ReviewRecord
from tests.fakes.http import HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub
    from tests.fakes.github.server import Call

HOOKSHOT = "GitHub-Hookshot/" + secrets.token_hex(4)[:7]
CONTENT_TYPES = {"json": "application/json", "form": "application/x-www-form-urlencoded"}


def signature_256(secret: str, body: bytes) -> str:
    """GitHub's ``X-Hub-Signature-256`` value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class RepoHook:
    """A repository webhook: where deliveries go, its secret (None: unsigned deliveries), the
    events it subscribes to (``"*"``: all), ``json`` or ``form`` content, active or not."""

    id: int
    url: str
    secret: str | None = None
    events: tuple[str, ...] = ("*",)
    content_type: str = "json"
    active: bool = True
    created_at: int = 0

    def wants(self, event: str) -> bool:
        return self.active and (event == "ping" or "*" in self.events or event in self.events)


class RepoHooks:
    """The repository's hooks and its delivery log (``FakeGitHub.hooks``)."""

    def __init__(self, gh: FakeGitHub, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.gh = gh
        self.hooks: dict[int, RepoHook] = {}
        self.sender = Sender("fake-github", timeout)

    # ------------------------------------------------------------------ for tests

    def add(
        self,
        url: str,
        secret: str | None = None,
        events: Iterable[str] = ("*",),
        *,
        content_type: str = "json",
        active: bool = True,
    ) -> RepoHook:
        """A new hook; GitHub pings it at once (``X-GitHub-Event: ping``)."""
        if content_type not in CONTENT_TYPES:
            raise ValueError(f"content_type: one of {sorted(CONTENT_TYPES)}, not {content_type!r}")
        with self.gh.lock:
            hook = RepoHook(
                self.gh.next_id(), url, secret, tuple(events), content_type, active, self.gh.clock
            )
            self.hooks[hook.id] = hook
            if active:
                self.ping(hook, self.gh.owner)
            return hook

    def ping(self, hook: RepoHook, actor: str) -> None:
        """``ping`` to this hook only (on creation, or ``POST .../hooks/{id}/pings``)."""
        self._queue("ping", None, actor, lambda: hook_payloads.ping(self.gh, hook), only=hook.id)

    def remove(self, hook_id: int) -> None:
        with self.gh.lock:
            self.hooks.pop(hook_id, None)

    @property
    def deliveries(self) -> list[Delivery]:
        """Every delivery so far (one per hook per event), oldest first."""
        return self.sender.deliveries()

    def redeliver(self, guid: str) -> list[Delivery]:
        """Send the delivery ``guid`` again: the same body, headers and GUID (GitHub's
        "Redeliver"), signed with the hook's secret as it is now."""
        return self.sender.redeliver(guid)

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until every change so far has been delivered (each attempt answered or failed)."""
        self.sender.wait_idle(timeout)

    def close(self) -> None:
        self.sender.close()

    # ------------------------------------------------------------------ used by the fake

    @property
    def listening(self) -> bool:
        return any(hook.active for hook in self.hooks.values())

    def issues(self, action: str, number: int, actor: str, **extra: Any) -> None:
        """An issue changed (or, for ``pull_request`` actions, a pull request read as one)."""
        if not self.listening:
            return
        if self.gh.issues[number].is_pull:
            self.pull_request(action, number, actor, **extra)
            return
        self._queue(
            "issues", action, actor, lambda: hook_payloads.issues(self.gh, action, number, **extra)
        )

    def pull_request(self, action: str, number: int, actor: str, **extra: Any) -> None:
        if self.listening:
            self._queue(
                "pull_request",
                action,
                actor,
                lambda: hook_payloads.pull_request(self.gh, action, number, **extra),
            )

    def review(self, review: ReviewRecord) -> None:
        if self.listening:
            self._queue("pull_request_review", "submitted", review.user,
                        lambda: hook_payloads.pull_request_review(self.gh, review))  # fmt: skip

    def check_run(self, run: CheckRunRecord) -> None:
        """A check run was created: ``check_run`` created and, when it comes finished (the
        fake's runs do), ``check_run`` completed and its suite's ``check_suite`` completed."""
        if not self.listening:
            return
        actions = ["created"] + (["completed"] if run.status == "completed" else [])
        for action in actions:
            self._queue("check_run", action, "github-actions[bot]", self._check_run(action, run))
        if run.status == "completed":
            self._queue("check_suite", "completed", "github-actions[bot]",
                        lambda: hook_payloads.check_suite_completed(self.gh, run))  # fmt: skip

    def _check_run(self, action: str, run: CheckRunRecord) -> Callable[[], Json]:
        return lambda: hook_payloads.check_run(self.gh, action, run)

    def send(self, event: str, action: str | None, actor: str, render: Callable[[], Json]) -> None:
        """Any other event: ``render`` builds its fields when it is sent."""
        if self.listening:
            self._queue(event, action, actor, render)

    def _queue(
        self,
        event: str,
        action: str | None,
        actor: str,
        render: Callable[[], Json],
        only: int | None = None,
    ) -> None:
        guid = str(uuid.uuid1())  # GitHub's GUIDs look time-based

        def build() -> list[Delivery]:
            with self.gh.lock:
                hooks = [h for h in self.hooks.values() if h.wants(event)]
                hooks = [h for h in hooks if only is None or h.id == only]
                if not hooks:
                    return []
                data = render()  # a push brings its own repository and sender
                data.setdefault("repository", hook_payloads.repository(self.gh))
                data.setdefault("sender", user(self.gh.urls, actor))
            return [self._delivery(h, guid, event, action, data) for h in hooks]

        self.sender.queue(build)

    def _delivery(
        self, hook: RepoHook, guid: str, event: str, action: str | None, data: Json
    ) -> Delivery:
        text = json.dumps(data)
        body = (text if hook.content_type == "json" else urlencode({"payload": text})).encode()
        headers = {
            "Content-Type": CONTENT_TYPES[hook.content_type],
            "User-Agent": HOOKSHOT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": guid,
            "X-GitHub-Hook-ID": str(hook.id),
            "X-GitHub-Hook-Installation-Target-Type": "repository",
            "X-GitHub-Hook-Installation-Target-ID": str(REPOSITORY_ID),
        }
        signed = {**headers, **_signatures(hook.secret, body)}
        return Delivery(
            guid, hook.url, event, action, body, signed, hook.id, resend_headers=self._resigned
        )

    def _resigned(self, delivery: Delivery) -> dict[str, str]:
        """A redelivery's headers: signed with the hook's secret as it is now (a person who
        fixed a wrong secret and redelivers gets a delivery that verifies)."""
        with self.gh.lock:
            hook = self.hooks.get(int(delivery.hook_id))
            secret = hook.secret if hook is not None else None
        headers = {k: v for k, v in delivery.headers.items() if not k.startswith("X-Hub-")}
        return {**headers, **_signatures(secret, delivery.body)}


def _signatures(secret: str | None, body: bytes) -> dict[str, str]:
    """``X-Hub-Signature-256`` and the legacy SHA-1 ``X-Hub-Signature`` (none without a
    secret)."""
    if not secret:
        return {}
    sha1 = hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
    return {"X-Hub-Signature": f"sha1={sha1}", "X-Hub-Signature-256": signature_256(secret, body)}


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    """``GET/POST {prefix}/hooks``, ``GET/DELETE {prefix}/hooks/{id}``, ``POST .../pings``: the
    REST API for repository hooks (admins only; GitHub answers others 404). A hook created
    without ``events`` gets ``["push"]``, as on GitHub."""

    def admin(call: Call) -> None:
        access = call.access
        if access is None:
            return
        allowed = (
            access.role == "admin"
            if access.kind == "classic"
            else access.level("repository_hooks") == "write"
        )
        if not allowed:
            raise HttpError(404, "Not Found")

    def found(call: Call) -> RepoHook:
        hook = gh.hooks.hooks.get(int(call.params["hook_id"]))
        if hook is None:
            raise HttpError(404, "Not Found")
        return hook

    def create(call: Call) -> Reply:
        admin(call)
        body = call.body or {}
        config = body.get("config") or {}
        url = config.get("url")
        if not isinstance(url, str) or not url:
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "Hook", "code": "custom", "message": "Config must contain URL"}],
            )
        content_type = str(config.get("content_type") or "form")
        if content_type not in CONTENT_TYPES:
            raise HttpError(422, "Validation Failed", [{"resource": "Hook", "code": "invalid"}])
        hook = gh.hooks.add(
            url,
            config.get("secret") or None,
            body.get("events") or ["push"],
            content_type=content_type,
            active=bool(body.get("active", True)),
        )
        return Reply(201, hook_payloads.hook_object(gh, hook))

    def listing(call: Call) -> Reply:
        admin(call)
        hooks = [hook_payloads.hook_object(gh, h) for h in gh.hooks.hooks.values()]
        return Reply(body=hooks, paginate="")

    def get(call: Call) -> Reply:
        admin(call)
        return Reply(body=hook_payloads.hook_object(gh, found(call)))

    def delete(call: Call) -> Reply:
        admin(call)
        gh.hooks.remove(found(call).id)
        return Reply(204)

    def ping(call: Call) -> Reply:
        admin(call)
        hook = found(call)
        gh.hooks.ping(hook, call.login)
        return Reply(204)

    hook_path = f"{prefix}/hooks/(?P<hook_id>[0-9]+)"
    router.add("GET", f"{prefix}/hooks", listing, "repos/list-webhooks")
    router.add("POST", f"{prefix}/hooks", create, "repos/create-webhook")
    router.add("GET", hook_path, get, "repos/get-webhook")
    router.add("DELETE", hook_path, delete, "repos/delete-webhook")
    router.add("POST", f"{hook_path}/pings", ping, "repos/ping-webhook")
