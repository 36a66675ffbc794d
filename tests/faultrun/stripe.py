"""Stripe's side of the fault run: it posts each delivery, signed, and sends again whatever was
not answered 200, as Stripe keeps retrying an endpoint until it acknowledges."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from tests.faultrun.faults import Outage
from tests.faultrun.steps import Planned
from tests.helpers import stripe_signature


@dataclass
class Stripe:
    webhook: str
    clients: int = 8
    accepted: Counter[str] = field(default_factory=Counter)  # 200s per event id
    refused: Counter[int] = field(default_factory=Counter)  # other answers, by status
    dropped: int = 0  # requests that got no answer at all (sent again)
    resent: int = 0
    _total: int = 0
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def traffic(self) -> int:
        """Deliveries answered 200 so far."""
        return self._total

    def deliver(self, batch: list[Planned], *, outage: Outage | None = None) -> None:
        """Post every delivery until each has been answered 200."""
        pending = batch
        with ThreadPoolExecutor(self.clients) as pool:
            while pending:
                answers = list(pool.map(self._post, pending, [outage] * len(pending)))
                if outage is not None:
                    outage.end()
                    outage = None
                pending = [e for e, ok in zip(pending, answers, strict=True) if not ok]
                self.resent += len(pending)

    def _post(self, event: Planned, outage: Outage | None) -> bool:
        if outage is None:
            return self._send(event, outage)
        with outage.gate():
            return self._send(event, outage)

    def _send(self, event: Planned, outage: Outage | None) -> bool:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.trust_env = False  # loopback: no proxy from the environment
        try:
            response = session.post(
                self.webhook,
                data=event.body,
                headers={
                    "Stripe-Signature": stripe_signature(event.body),  # signed at each attempt
                    "Content-Type": "application/json",
                },
                timeout=30,
            )
        except requests.ConnectionError:
            # A kept-alive connection the server closed as it was reused: no answer is a
            # failed delivery, which Stripe sends again, as here.
            with self._lock:
                self.dropped += 1
            return False
        with self._lock:
            if response.status_code == 200:
                self.accepted[event.event_id] += 1
                self._total += 1
                return True
            self.refused[response.status_code] += 1
        if outage is not None:
            outage.refused()
        return False
