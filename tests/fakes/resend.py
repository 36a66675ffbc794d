"""Resend's POST /emails as documented: idempotency keys, its error shapes, its rate limit; and
GET /emails/{id}, a sent e-mail as Resend keeps it. Every exchange is held against Resend's
published OpenAPI document (tests/fakes/resend_openapi.py): what either side says that the
document refuses is kept in `nonconforming`, and the fixtures serving the fake fail on it."""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

from werkzeug.wrappers import Request, Response

from tests.fakes.http import FakeServer, json_response


@dataclass
class FakeResend:
    server: FakeServer = field(default_factory=FakeServer)
    delivered: list[dict[str, Any]] = field(default_factory=list)
    # The Idempotency-Key of each delivered message (None when sent without one), in order.
    delivered_keys: list[str | None] = field(default_factory=list)
    failures_left: int = 0
    # Answers given before any real work, in order: (status, body, headers).
    scripted: list[tuple[int, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    # Requests per second allowed, as Resend enforces per team (None: no limit).
    rate_limit: float | None = None
    rate_limited: int = 0
    # Seconds each answer takes (Resend is an internet hop away), and the most requests seen
    # in flight at once.
    latency: float = 0.0
    max_in_flight: int = 0
    _in_flight: int = 0
    # Cleared, Resend answers nothing until it is set again (a stuck API, as seen from here);
    # `reset` sets it.
    responding: threading.Event = field(default_factory=threading.Event)
    _recent: deque[float] = field(default_factory=deque)
    _by_key: dict[str, dict[str, Any]] = field(default_factory=dict)
    _by_id: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Each exchange checked against Resend's OpenAPI document (off only where the checks' own
    # cost would distort a measurement: the bench's sink). What the document refuses, one line
    # each, kept through `reset` so that a fixture serving the fake across tests still sees it.
    conformance: bool = True
    nonconforming: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.responding.set()
        # Every route through the check: a route added here is held against the document too.
        routes = (("/emails", "POST", self._send), ("/emails/<email_id>", "GET", self._get))
        for rule, method, handler in routes:
            self.server.route(rule, (method,), self._checked(handler))

    def _checked(self, handler: Callable[..., Response]) -> Callable[..., Response]:
        @wraps(handler)
        def answer(request: Request, **args: str) -> Response:
            response = handler(request, **args)
            if self.conformance:
                from tests.fakes.resend_openapi import nonconformities  # a second to import

                found = nonconformities(request, response)
                with self._lock:
                    self.nonconforming.extend(found)
            return response

        return answer

    def sent_ids(self) -> list[str]:
        """The ids Resend gave the e-mails it took, in order."""
        with self._lock:
            return list(self._by_id)

    def assert_conforms(self) -> None:
        """Fail when anything the product sent or the fake answered broke Resend's document."""
        assert self.nonconforming == [], "Resend's OpenAPI document refuses:\n" + "\n".join(
            self.nonconforming
        )

    def reset(self) -> None:
        self.server.reset()
        self.delivered.clear()
        self.delivered_keys.clear()
        self._by_key.clear()
        self._by_id.clear()
        self.scripted.clear()
        self._recent.clear()
        self.failures_left = 0
        self.rate_limit = None
        self.rate_limited = 0
        self.latency = 0.0
        self.max_in_flight = self._in_flight = 0
        self.responding.set()

    def fail_next(self, count: int) -> None:
        """Answer 500 to the next `count` requests (added to those already due)."""
        with self._lock:
            self.failures_left += count

    def recover(self) -> None:
        """Answer normally again: the failures still due are dropped (Resend is back)."""
        with self._lock:
            self.failures_left = 0

    def _send(self, request: Request) -> Response:
        self.responding.wait()  # until the test lets Resend answer again
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            time.sleep(self.latency)
            response = self._answer(request)
        finally:
            with self._lock:
                self._in_flight -= 1
        with self._lock:
            response.headers.update(self._rate_headers())
        return response

    def _get(self, request: Request, email_id: str) -> Response:
        """Resend's retrieve-email answer: the e-mail object, or its 404 error shape."""
        with self._lock:
            sent = self._by_id.get(email_id)
        if sent is None:
            body = {"statusCode": 404, "name": "not_found", "message": "Email not found"}
            return json_response(body, 404)
        kept = {
            "object": "email",
            "id": email_id,
            "to": _listed(sent["to"]),
            "from": sent["from"],
            "created_at": "2026-11-28 12:00:00.000000+00",
            "subject": sent["subject"],
            # Lists, empty when none were sent: the document types the three as arrays.
            "bcc": _listed(sent.get("bcc")),
            "cc": _listed(sent.get("cc")),
            "reply_to": _listed(sent.get("reply_to")),
            "last_event": "delivered",
        }
        # A body sent without its HTML or text part has none to give back (the document types
        # both as strings, never null).
        kept.update({part: sent[part] for part in ("html", "text") if part in sent})
        return json_response(kept)

    def _rate_headers(self) -> dict[str, str]:
        """Resend's `ratelimit-*` headers on every answer, while a limit is set."""
        if self.rate_limit is None:
            return {}
        now = time.monotonic()
        used = sum(1 for t in self._recent if now - t < 1.0)
        reset = 1.0 - (now - self._recent[0]) if self._recent else 1.0
        return {
            "ratelimit-limit": str(int(self.rate_limit)),
            "ratelimit-remaining": str(max(0, int(self.rate_limit) - used)),
            "ratelimit-reset": str(max(1, math.ceil(reset))),
        }

    def _answer(self, request: Request) -> Response:
        with self._lock:
            if self._over_rate():
                self.rate_limited += 1
                body = {"statusCode": 429, "name": "rate_limit_exceeded", "message": "Too many"}
                return json_response(body, 429, headers={"retry-after": "1"})
            if self.scripted:
                status, body, headers = self.scripted.pop(0)
                return json_response(body, status, headers=headers)
            if self.failures_left > 0:
                self.failures_left -= 1
                return json_response(
                    {"statusCode": 500, "name": "application_error", "message": "Unavailable"}, 500
                )
            key = request.headers.get("Idempotency-Key")
            if key and key in self._by_key:
                return json_response(self._by_key[key])  # same answer, nothing sent again
            result = {"id": str(uuid.uuid4())}
            self._by_id[result["id"]] = request.get_json()
            self.delivered.append(request.get_json())
            self.delivered_keys.append(key)
            if key:
                self._by_key[key] = result
            return json_response(result)

    def _over_rate(self) -> bool:
        if self.rate_limit is None:
            return False
        now = time.monotonic()
        while self._recent and now - self._recent[0] >= 1.0:
            self._recent.popleft()
        if len(self._recent) >= self.rate_limit:
            return True
        self._recent.append(now)
        return False


def _listed(addresses: str | list[str] | None) -> list[str]:
    """A request's address field (one address or a list; absent) as Resend's e-mail object
    lists it."""
    if addresses is None:
        return []
    return [addresses] if isinstance(addresses, str) else list(addresses)
