"""Resend's POST /emails as documented, with its idempotency-key semantics."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from tests.fakes.http import FakeServer, json_response


@dataclass
class FakeResend:
    server: FakeServer = field(default_factory=FakeServer)
    delivered: list[dict[str, Any]] = field(default_factory=list)
    failures_left: int = 0
    _by_key: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.server.route("/emails", ("POST",), self._send)

    def reset(self) -> None:
        self.server.reset()
        self.delivered.clear()
        self._by_key.clear()
        self.failures_left = 0

    def _send(self, request: Request) -> Response:
        with self._lock:
            if self.failures_left > 0:
                self.failures_left -= 1
                return json_response(
                    {"statusCode": 500, "name": "application_error", "message": "Unavailable"}, 500
                )
            key = request.headers.get("Idempotency-Key")
            if key and key in self._by_key:
                return json_response(self._by_key[key])  # same answer, nothing sent again
            result = {"id": str(uuid.uuid4())}
            self.delivered.append(request.get_json())
            if key:
                self._by_key[key] = result
            return json_response(result)
