"""The in-process event bus, with Pub/Sub's delivery semantics (local runs and tests)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from adapters.bus import Handler, PublishError
from core.events import Event, InvalidEvent

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Delivery:
    due: float
    seq: int
    subscriber: str = field(compare=False)
    event: Event = field(compare=False)
    attempt: int = field(compare=False, default=1)


class InlineBus:
    """Delivers in background threads: publish returns before subscribers run, a failing
    subscriber is retried with exponential backoff, and after `max_attempts` the event is
    dead-lettered (logged at ERROR and kept in `dead_letters`), as a Pub/Sub push subscription
    with a dead-letter topic would.

    Each subscriber has its own queue and `workers` threads, as each push subscription is
    delivered on its own: access never waits behind e-mail. Past `max_pending` queued
    deliveries for any subscriber, publish raises PublishError (the webhook answers 503 and
    Stripe retries later) instead of the queue, and the process, growing without end.
    """

    def __init__(
        self,
        subscribers: Mapping[str, Handler],
        *,
        max_attempts: int = 5,
        min_backoff: float = 0.5,
        max_backoff: float = 60.0,
        workers: int = 2,
        max_pending: int = 2000,
    ) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self._subscribers = dict(subscribers)
        self._max_attempts = max_attempts
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._max_pending = max_pending
        self._queues: dict[str, list[_Delivery]] = {name: [] for name in self._subscribers}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._busy = 0
        self._closed = False
        self.dead_letters: list[tuple[str, Event]] = []
        self._threads = [
            threading.Thread(
                target=self._work, args=(name,), name=f"inline-{name}-{n}", daemon=True
            )
            for name in self._subscribers
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def publish(self, event: Event, data: bytes) -> None:
        with self._cond:
            if self._closed:
                raise PublishError("the in-process bus is closed")
            if any(len(queue) >= self._max_pending for queue in self._queues.values()):
                raise PublishError(f"the in-process bus is full ({self._max_pending} pending)")
            now = time.monotonic()
            for name, queue in self._queues.items():
                heapq.heappush(queue, _Delivery(now, next(self._seq), name, event))
            self._cond.notify_all()

    def pending(self) -> int:
        """Deliveries queued and not started, over all subscribers."""
        with self._cond:
            return sum(len(queue) for queue in self._queues.values())

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is queued or running; True if that happened in time."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(self._queues.values()) or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def close(self, timeout: float = 5.0) -> None:
        self.wait_idle(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def _work(self, name: str) -> None:
        while (delivery := self._next(self._queues[name])) is not None:
            try:
                self._deliver(delivery)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _next(self, queue: list[_Delivery]) -> _Delivery | None:
        with self._cond:
            while not self._closed:
                if queue and queue[0].due <= time.monotonic():
                    self._busy += 1
                    return heapq.heappop(queue)
                wait = queue[0].due - time.monotonic() if queue else None
                self._cond.wait(wait)
            return None

    def _deliver(self, delivery: _Delivery) -> None:
        try:
            self._subscribers[delivery.subscriber](delivery.event)
        except InvalidEvent as exc:
            log.error("dropping event %s for %s: %s", delivery.event.id, delivery.subscriber, exc)
        except Exception as exc:
            self._retry_or_dead_letter(delivery, exc)

    def _retry_or_dead_letter(self, delivery: _Delivery, exc: Exception) -> None:
        name, event = delivery.subscriber, delivery.event
        if delivery.attempt >= self._max_attempts:
            log.error(
                "dead-lettering event %s for %s after %d attempts: %s",
                event.id,
                name,
                delivery.attempt,
                exc,
            )
            with self._cond:
                self.dead_letters.append((name, event))
            return
        backoff = min(self._max_backoff, self._min_backoff * 2 ** (delivery.attempt - 1))
        log.warning(
            "subscriber %s failed on event %s (attempt %d), retrying in %.1fs: %s",
            name,
            event.id,
            delivery.attempt,
            backoff,
            exc,
        )
        retry = _Delivery(
            time.monotonic() + backoff, next(self._seq), name, event, delivery.attempt + 1
        )
        with self._cond:
            heapq.heappush(self._queues[name], retry)
            self._cond.notify_all()
