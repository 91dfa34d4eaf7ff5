"""Webhook deliveries for the vendor fakes: what GitHub, GitLab and Linear do when their state
changes and a hook is configured — POST a JSON body with the vendor's headers to the hook's URL,
from a background thread, with a short timeout, and keep a log of each attempt.

A vendor fake queues a *build* (``Sender.queue``): a function that, run on the sender's thread,
takes the fake's lock, renders the payloads from the state as it is then and returns the
``Delivery`` objects to send (one per hook, already signed). The POSTs themselves are made after
the lock is released, so a receiver that is slow, hangs or is down never holds up the fake's API;
like the vendors, the fake does not retry on its own (``redeliver`` sends one again, as a person
clicking "Redeliver" does). Tests wait for the queue to drain (``Sender.wait_idle``) instead of
sleeping.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_TIMEOUT = 10.0  # GitHub and GitLab.com give a receiver 10 s (Linear 5 s)


@dataclass(frozen=True)
class Attempt:
    """One POST of a delivery: the answer's ``status`` (None: no answer — refused, reset or
    timed out, ``error`` says which) and body, the headers sent, when it started
    (``time.time()``) and how long it took."""

    status: int | None
    error: str | None
    headers: Mapping[str, str]
    started: float
    seconds: float
    redelivery: bool = False
    answer: bytes = b""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class Delivery:
    """A delivery to one hook: its id (GitHub's ``X-GitHub-Delivery``, GitLab's
    ``Idempotency-Key``, Linear's ``Linear-Delivery``), the vendor's event name (and action, when
    the payload has one), the exact body bytes and headers, and each attempt so far.
    ``resend_headers``: the headers a redelivery carries instead (GitLab gives each attempt a
    new ``X-Gitlab-Webhook-UUID``); None sends the same headers again."""

    id: str
    url: str
    event: str
    action: str | None
    body: bytes
    headers: dict[str, str]
    hook_id: int | str = 0
    attempts: list[Attempt] = field(default_factory=list)
    resend_headers: Callable[[Delivery], dict[str, str]] | None = field(default=None, repr=False)

    @property
    def status(self) -> int | None:
        """The last attempt's answer (None: not sent yet, or no answer)."""
        return self.attempts[-1].status if self.attempts else None


Build = Callable[[], list[Delivery]]


class Sender:
    """One background thread POSTing deliveries in order; ``log`` holds every delivery sent or
    being sent, oldest first. ``timeout`` bounds each POST (connect and answer)."""

    def __init__(self, name: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self.log: list[Delivery] = []
        self._work: deque[tuple[Build | None, Delivery | None]] = deque()
        self._busy = 0  # items taken off the queue and not finished yet
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-hooks", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ used by the fakes

    def queue(self, build: Build) -> None:
        """Render and send on the sender's thread (see the module's docstring)."""
        with self._cond:
            if not self._closed:
                self._work.append((build, None))
                self._cond.notify_all()

    def redeliver(self, delivery_id: str) -> list[Delivery]:
        """Send the deliveries with this id again (each hook's), same body: GitHub's and
        GitLab's "Redeliver". A KeyError when no delivery has that id."""
        with self._cond:
            found = [d for d in self.log if d.id == delivery_id]
            if not found:
                raise KeyError(f"no delivery {delivery_id!r} was sent")
            for delivery in found:
                self._work.append((None, delivery))
            self._cond.notify_all()
        return found

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until every queued delivery has had its attempt (a condition, not a sleep); a
        TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._work or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._work) + self._busy} deliveries still pending")
                self._cond.wait(left)

    def deliveries(self, event: str | None = None) -> list[Delivery]:
        """The log (a copy), only ``event``'s deliveries if named."""
        with self._cond:
            return [d for d in self.log if event is None or d.event == event]

    def close(self) -> None:
        """Stop: what is still queued is dropped, an attempt under way ends by its timeout."""
        with self._cond:
            self._closed = True
            self._work.clear()
            self._cond.notify_all()
        self._thread.join(timeout=self.timeout + 1)

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._work and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                build, again = self._work.popleft()
                self._busy += 1
            try:
                if build is not None:
                    fresh = build()  # takes the fake's lock itself, releases it before we post
                    with self._cond:
                        self.log.extend(fresh)
                    for delivery in fresh:
                        self._attempt(delivery, redelivery=False)
                elif again is not None:
                    self._attempt(again, redelivery=True)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _attempt(self, delivery: Delivery, *, redelivery: bool) -> None:
        headers = delivery.headers
        if redelivery and delivery.resend_headers is not None:
            headers = delivery.resend_headers(delivery)
        started, clock = time.time(), time.monotonic()
        status, error, answer = post(delivery.url, headers, delivery.body, self.timeout)
        attempt = Attempt(
            status, error, dict(headers), started, time.monotonic() - clock, redelivery, answer
        )
        with self._cond:
            delivery.attempts.append(attempt)


def post(
    url: str, headers: Mapping[str, str], body: bytes, timeout: float
) -> tuple[int | None, str | None, bytes]:
    """POST ``body`` to ``url``: the status and the answer's body, or None and what went
    wrong."""
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        return None, f"not an http(s) URL: {url!r}", b""
    connection_class = (
        http.client.HTTPSConnection if split.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(split.hostname, split.port, timeout=timeout)
    target = split.path or "/"
    if split.query:
        target += "?" + split.query
    try:
        connection.request("POST", target, body=body, headers=dict(headers))
        response = connection.getresponse()
        return response.status, None, response.read()
    except (OSError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {exc}", b""
    finally:
        connection.close()
