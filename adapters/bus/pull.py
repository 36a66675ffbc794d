"""A subscriber fed by Pub/Sub StreamingPull rather than push, for bursts that need batches.

The client library leases up to `max_messages` at a time (flow control, enforced by Pub/Sub
too) and extends their deadlines while they are held. Workers take what has arrived, up to
`batch_size` messages, and hand their events to the batch handler at once; each message is
then acknowledged, or refused (nack) when its event failed, so that Pub/Sub redelivers it with
the subscription's backoff and dead-letters it after the last attempt, as it does a push.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress

import google.cloud.pubsub_v1 as pubsub_v1
from google.cloud.pubsub_v1.subscriber.futures import StreamingPullFuture
from google.cloud.pubsub_v1.subscriber.message import Message
from google.cloud.pubsub_v1.subscriber.scheduler import Scheduler

from adapters.bus import BatchHandler
from adapters.bus.topology import subscriber_client
from core import tracing
from core.events import Event, InvalidEvent, events_in

log = logging.getLogger(__name__)

# How long a worker waits for more messages once it holds one: a burst fills its batch, a
# lone event waits no longer than this.
LINGER_SECONDS = 0.005


class PullConsumer:
    """Leases messages from one subscription and hands them, in batches, to a handler."""

    def __init__(
        self,
        *,
        subscription: str,
        handle: BatchHandler,
        batch_size: int,
        max_messages: int,
        workers: int,
        linger: float = LINGER_SECONDS,
        emulator_host: str | None = None,
    ) -> None:
        self.subscription = subscription
        self._handle = handle
        self._batch_size = batch_size
        self._max_messages = max_messages
        self._workers = workers
        self._linger = linger
        self._emulator_host = emulator_host
        self._queue: queue.SimpleQueue[Message | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._client: pubsub_v1.SubscriberClient | None = None
        self._stream: StreamingPullFuture | None = None
        self._stopped = False

    def start(self) -> None:
        """Open the stream and start the workers."""
        self._client = subscriber_client(self._emulator_host)
        flow = pubsub_v1.types.FlowControl(max_messages=self._max_messages)
        self._threads = [
            threading.Thread(target=self._work, name=f"pull-{n}", daemon=True)
            for n in range(self._workers)
        ]
        for thread in self._threads:
            thread.start()
        self._stream = self._client.subscribe(
            self.subscription,
            self._queue.put,
            flow_control=flow,
            scheduler=_Inline(),
            await_callbacks_on_shutdown=True,
        )
        log.info("pulling %s (%d leased at most)", self.subscription, self._max_messages)

    def running(self) -> bool:
        return self._stream is not None and self._stream.running()

    def wait(self) -> None:
        """Until the stream ends: stopped, or failed for good (the error is raised)."""
        if self._stream is None:
            raise RuntimeError("the consumer was not started")
        self._stream.result()

    def stop(self, timeout: float = 8.0) -> None:
        """Stop leasing, finish the messages already held, then close (Cloud Run allows 10 s).

        Messages still held when the time is up are neither acknowledged nor refused: their
        leases lapse and Pub/Sub redelivers them.
        """
        if self._stopped:
            return
        self._stopped = True
        deadline = time.monotonic() + timeout
        if self._stream is not None:
            self._stream.cancel()
            with suppress(Exception):  # a stream that failed has said so in wait()
                self._stream.result(timeout=timeout)
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._client is not None:
            self._client.close()

    def _work(self) -> None:
        while (batch := self._next()) is not None:
            self._deliver(batch)

    def _next(self) -> list[Message] | None:
        """The first message to arrive and those within the linger, up to batch_size events
        (a message's events are never split: the last one may carry the batch past it)."""
        first = self._queue.get()
        if first is None:
            return None
        batch, until = [first], time.monotonic() + self._linger
        events = _carried(first)
        while events < self._batch_size:
            try:
                message = self._queue.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if message is None:  # stopping: put it back for this worker's next turn
                self._queue.put(None)
                break
            batch.append(message)
            events += _carried(message)
        return batch

    def _deliver(self, batch: Sequence[Message]) -> None:
        # A message may carry several events (published together): acknowledged once each of
        # them is handled, redelivered whole when one failed (the others are then duplicates).
        carried: list[tuple[Message, list[Event]]] = []
        for message in batch:
            try:
                found = events_in(message.data)
            except ValueError as exc:  # not JSON, or not an event (InvalidEvent)
                log.error("pull: dropping message %s, not an event (%s)", message.message_id, exc)
                message.ack()
                continue
            for item in found:
                if isinstance(item, InvalidEvent):
                    log.error("pull: dropping a non-event in %s (%s)", message.message_id, item)
            if readable := [item for item in found if isinstance(item, Event)]:
                carried.append((message, readable))
            else:
                message.ack()
        if not carried:
            return
        events = [event for _, taken in carried for event in taken]
        token = tracing.begin(_trace(carried[0][0]) if len(carried) == 1 else None)
        try:
            outcomes: Sequence[object] = self._handle(events)
            if len(outcomes) != len(events):
                raise RuntimeError(f"{len(outcomes)} outcomes for {len(events)} events")
        except Exception as exc:
            log.exception("pull: a batch of %d failed; all redelivered", len(events))
            outcomes = [exc] * len(events)
        finally:
            tracing.end(token)
        each = iter(zip(events, outcomes, strict=True))
        for message, taken in carried:
            failed = False
            for event, outcome in (next(each) for _ in taken):
                if isinstance(outcome, Exception):
                    log.warning(
                        "pull: %s %s failed, redelivered: %s", event.type, event.id, outcome
                    )
                    failed = True
            if failed:  # redelivered whole: its other events are then duplicates
                message.nack()
            else:
                message.ack()


class _Inline(Scheduler):  # type: ignore[misc]  # the library is untyped here
    """Hands each message to the callback (a put on the workers' queue) on the stream's own
    thread. The library's default runs every callback through a thread pool, a Future per
    message: a tenth of a mail's CPU, for a call that never blocks."""

    def __init__(self) -> None:
        self._queue: queue.Queue[object] = queue.Queue()

    @property
    def queue(self) -> queue.Queue[object]:
        """Where the library's dispatcher takes its requests from (acks, leases)."""
        return self._queue

    def schedule(self, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        callback(*args, **kwargs)

    def shutdown(self, await_msg_callbacks: bool = False) -> list[Message]:
        return []  # nothing is ever pending here: each message is on the workers' queue


def _carried(message: Message) -> int:
    """How many events a message carries, as its attributes say (`event_ids` when several)."""
    ids = message.attributes.get("event_ids")
    return len(ids.split()) if ids else 1


def _trace(message: Message) -> tracing.Trace | None:
    """The trace the message was published in (the webhook request's), as a push joins it."""
    value = message.attributes.get(tracing.ATTRIBUTE)
    trace = tracing.from_traceparent(value) if value else None
    return trace.child() if trace is not None else None
