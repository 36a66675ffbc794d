"""The in-process event bus, with Pub/Sub's delivery semantics (local runs and tests)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from adapters.bus import BatchHandler, Handler, PublishError
from core import tracing
from core.events import Event, InvalidEvent, event_from_json
from core.tracing import Trace

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Delivery:
    due: float
    seq: int
    subscriber: str = field(compare=False)
    event_id: str = field(compare=False)
    # The published bytes, parsed again for each delivery as a push subscriber would: a few
    # KB per queued event instead of the tens of KB its parsed form holds.
    data: bytes = field(compare=False, repr=False)
    attempt: int = field(compare=False, default=1)
    # The trace it was published under: its subscriber logs under it, as a push target does.
    trace: Trace | None = field(compare=False, default=None)


class InlineBus:
    """Delivers in background threads: publish returns before subscribers run, a failing
    subscriber is retried with exponential backoff, and after `max_attempts` the event is
    dead-lettered (logged at ERROR and kept in `dead_letters`), as a Pub/Sub push subscription
    with a dead-letter topic would. Each delivery parses the published bytes anew.

    Each subscriber has its own queue and `workers` threads, as each push subscription is
    delivered on its own: access never waits behind e-mail. Past its bound of queued
    deliveries for any subscriber, publish raises PublishError (the webhook answers 503 and
    Stripe retries later) instead of the queue, and the process, growing without end.

    In production each subscriber is a service of its own; here they share one process's CPU.
    A `background` subscriber (e-mail: a receipt may wait, access may not) therefore yields:
    while its queue is under half of its bound it runs only when no event was published for
    `quiet` seconds and no other subscriber has work due, so a burst is acknowledged and
    applied first and mailed after; past half, it runs flat out to keep room. The bound is
    `max_pending` for the others, which the webhook waits on, and `max_backlog` for it.

    A subscriber with a handler in `batches` gets up to `batch_size` due deliveries at a time,
    as a pull subscriber would, on `batch_workers` threads: while one applies a batch, the
    deliveries published meanwhile wait to be taken together. Each event's own result decides
    its retry.
    """

    def __init__(
        self,
        subscribers: Mapping[str, Handler],
        *,
        max_attempts: int = 5,
        min_backoff: float = 0.5,
        max_backoff: float = 60.0,
        workers: int = 8,
        max_pending: int = 2000,
        max_backlog: int | None = None,
        background: Collection[str] = (),
        quiet: float = 0.02,
        batches: Mapping[str, BatchHandler] | None = None,
        batch_size: int = 64,
        batch_workers: int = 2,
    ) -> None:
        max_backlog = max_pending if max_backlog is None else max_backlog
        if min(max_pending, max_backlog) < 1:
            raise ValueError("max_pending and max_backlog must be at least 1")
        if unknown := set(background) - set(subscribers):
            raise ValueError(f"background subscribers {sorted(unknown)} are not subscribers")
        self._subscribers = dict(subscribers)
        self._batches = dict(batches or {})
        if unknown := set(self._batches) - set(subscribers):
            raise ValueError(f"batch handlers {sorted(unknown)} are not subscribers")
        self._batch_size = max(1, batch_size)
        self._background = frozenset(background)
        self._quiet = quiet
        self._max_attempts = max_attempts
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._bounds = {
            name: max_backlog if name in self._background else max_pending
            for name in self._subscribers
        }
        self._queues: dict[str, list[_Delivery]] = {name: [] for name in self._subscribers}
        self._running = dict.fromkeys(self._subscribers, 0)
        self._last_publish = 0.0
        self._seq = itertools.count()
        # One lock; a condition per subscriber, so a publish wakes one of its workers, not all.
        self._lock = threading.Lock()
        self._ready = {name: threading.Condition(self._lock) for name in self._subscribers}
        self._idle = threading.Condition(self._lock)
        self._closed = False
        self.dead_letters: list[tuple[str, Event]] = []
        self._threads = [
            threading.Thread(
                target=self._work, args=(name,), name=f"inline-{name}-{n}", daemon=True
            )
            for name in self._subscribers
            for n in range(batch_workers if name in self._batches else workers)
        ]
        for thread in self._threads:
            thread.start()

    def publish(self, event: Event, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise PublishError("the in-process bus is closed")
            for name, queue in self._queues.items():
                if len(queue) >= self._bounds[name]:
                    raise PublishError(f"the in-process bus is full ({len(queue)} for {name})")
            now = self._last_publish = time.monotonic()
            trace = tracing.current()
            for name, queue in self._queues.items():
                delivery = _Delivery(now, next(self._seq), name, event.id, data, trace=trace)
                heapq.heappush(queue, delivery)
                if self._wakes_on_publish(name, queue):
                    self._ready[name].notify()

    def _wakes_on_publish(self, name: str, queue: list[_Delivery]) -> bool:
        """Whether a publish wakes one of `name`'s workers (the lock is held). A background
        subscriber under half its bound would only go back to waiting: the end of a foreground
        delivery of the same event wakes it (`_done`)."""
        if name not in self._background or len(self._background) == len(self._queues):
            return True
        return len(queue) * 2 >= self._bounds[name]

    def pending(self) -> int:
        """Deliveries queued and not started, over all subscribers."""
        with self._lock:
            return sum(len(queue) for queue in self._queues.values())

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is queued or running; True if that happened in time."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._is_idle():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
            return True

    def drain(self, timeout: float) -> bool:
        """Wait until every delivery, retries included, was handled or dead-lettered."""
        return self.wait_idle(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self.wait_idle(timeout)
        with self._lock:
            self._closed = True
            for ready in (*self._ready.values(), self._idle):
                ready.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def _work(self, name: str) -> None:
        batch = self._batches.get(name)
        limit = self._batch_size if batch else 1
        while deliveries := self._next(name, limit):
            try:
                if batch is None:
                    self._deliver(deliveries[0])
                else:
                    self._deliver_many(batch, deliveries)
            finally:
                with self._lock:
                    self._running[name] -= 1
                    self._done(name)

    def _done(self, name: str) -> None:
        """Wake who may go on now that a delivery of `name` ended (the lock is held)."""
        if name not in self._background:
            for waiting in self._background:
                if self._queues[waiting]:
                    self._ready[waiting].notify()
        if self._is_idle():
            self._idle.notify_all()

    def _is_idle(self) -> bool:
        return not any(self._queues.values()) and not any(self._running.values())

    def _next(self, name: str, limit: int) -> list[_Delivery]:
        """Up to `limit` deliveries due now (at least one), or none once the bus is closed."""
        queue = self._queues[name]
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                wait = self._wait_before(name, queue, now)
                if wait == 0:
                    self._running[name] += 1
                    taken = [heapq.heappop(queue)]
                    while queue and len(taken) < limit and queue[0].due <= now:
                        taken.append(heapq.heappop(queue))
                    if queue:  # more work: pass the word to another of this subscriber's workers
                        self._ready[name].notify()
                    return taken
                self._ready[name].wait(wait)
            return []

    def _wait_before(self, name: str, queue: list[_Delivery], now: float) -> float | None:
        """0 if `name` may take its next delivery now, else how long to wait (None: a notify)."""
        if not queue:
            return None
        if queue[0].due > now:
            return queue[0].due - now
        if name not in self._background or len(queue) * 2 >= self._bounds[name]:
            return 0
        if now - self._last_publish < self._quiet:
            return self._last_publish + self._quiet - now
        return None if self._foreground_due(now) else 0

    def _foreground_due(self, now: float) -> bool:
        return any(
            self._running[name] or (queue and queue[0].due <= now)
            for name, queue in self._queues.items()
            if name not in self._background
        )

    def _deliver(self, delivery: _Delivery) -> None:
        if (event := _parsed(delivery)) is None:
            return
        trace = delivery.trace.child() if delivery.trace else None
        try:
            with tracing.active(trace):
                self._subscribers[delivery.subscriber](event)
        except Exception as exc:
            self._failed(delivery, event, exc)

    def _deliver_many(self, handler: BatchHandler, deliveries: Sequence[_Delivery]) -> None:
        parsed = [(d, event) for d in deliveries if (event := _parsed(d)) is not None]
        try:
            results = list(handler([event for _, event in parsed]))
            if len(results) != len(parsed):
                raise RuntimeError(f"{len(results)} results for {len(parsed)} events")
        except Exception as exc:  # the whole batch failed: each delivery is retried
            results = [exc] * len(parsed)
        for (delivery, event), result in zip(parsed, results, strict=True):
            if isinstance(result, Exception):
                self._failed(delivery, event, result)

    def _failed(self, delivery: _Delivery, event: Event, exc: Exception) -> None:
        if isinstance(exc, InvalidEvent):
            log.error("dropping event %s for %s: %s", event.id, delivery.subscriber, exc)
        else:
            self._retry_or_dead_letter(delivery, event, exc)

    def _retry_or_dead_letter(self, delivery: _Delivery, event: Event, exc: Exception) -> None:
        name = delivery.subscriber
        if delivery.attempt >= self._max_attempts:
            log.error(
                "dead-lettering event %s for %s after %d attempts: %s",
                event.id,
                name,
                delivery.attempt,
                exc,
            )
            with self._lock:
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
            time.monotonic() + backoff,
            next(self._seq),
            name,
            delivery.event_id,
            delivery.data,
            delivery.attempt + 1,
            delivery.trace,
        )
        with self._lock:
            heapq.heappush(self._queues[name], retry)
            self._ready[name].notify()


def _parsed(delivery: _Delivery) -> Event | None:
    """The delivery's event, parsed from the published bytes; None (logged) if it is not one."""
    try:
        return event_from_json(delivery.data)
    except (ValueError, RecursionError) as exc:  # InvalidEvent is a ValueError
        log.error(
            "dropping %s for %s: not an event: %s", delivery.event_id, delivery.subscriber, exc
        )
        return None
