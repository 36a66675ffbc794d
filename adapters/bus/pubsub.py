"""The event bus on Google Pub/Sub: a publish is confirmed before the webhook answers Stripe."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import google.pubsub_v1 as pubsub_gapic
import grpc
from google.api_core import exceptions, retry
from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

from adapters.bus import MESSAGE_EVENTS, PublishError
from config import Settings
from core import tracing
from core.events import Event, message_body

PUBLISH_TIMEOUT = 5.0

# Events published while a message of their type is on its way go together in the next one
# (up to MESSAGE_EVENTS, and this many bytes): each push then carries them all to a subscriber,
# which applies them in one transaction (a request, a transaction and its round trips per
# message instead of per event).
MESSAGE_BYTES = 1_000_000
# Messages of one type on their way at once (a worker's): the next takes the events of that
# type that came meanwhile.
IN_FLIGHT_PER_TYPE = 1
# In a burst, a message that is not full leaves once its oldest event has waited this long for
# company (Google's client libraries hold every batch up to 10 ms by default). A type is in a
# burst while a message of it is on its way or events of it wait, and for this long after one
# left with company; an event of a calm type goes at once, so webhooks that come one at a time
# never wait. With Pub/Sub tens of ms away, the publish before has mostly outlasted the wait.
LINGER_SECONDS = 0.025
ATTRIBUTE_BYTES = 1024

# gRPC waits up to 120 s between reconnection attempts by default: after a Pub/Sub (or
# emulator) outage the API would keep answering 503 long after Pub/Sub is back.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
)

RETRYABLE = retry.if_exception_type(
    exceptions.Aborted,
    exceptions.Cancelled,
    exceptions.DeadlineExceeded,
    exceptions.InternalServerError,
    exceptions.ResourceExhausted,
    exceptions.ServiceUnavailable,
    exceptions.Unknown,
)


class _Transport(PublisherGrpcTransport):
    """The library's transport (TLS, credentials), with the channel options above."""

    @classmethod
    def create_channel(cls, *args: Any, **kwargs: Any) -> grpc.Channel:
        kwargs["options"] = [*kwargs.get("options", ()), *CHANNEL_OPTIONS]
        return super().create_channel(*args, **kwargs)


@dataclass(eq=False)
class _Waiting:
    event: Event
    data: bytes
    since: float  # time.monotonic() when published
    alone: bool = False  # found its type calm: goes at once
    taken: bool = False  # in a message on its way
    done: bool = False
    error: PublishError | None = None


class PubSubBus:
    """Publishes each verified event to the topic and waits until Pub/Sub has stored it: alone,
    or in one message with the events of its type published meanwhile (group commit)."""

    def __init__(
        self,
        *,
        project: str,
        topic: str,
        emulator_host: str | None = None,
        timeout: float = PUBLISH_TIMEOUT,
        linger: float = LINGER_SECONDS,
    ) -> None:
        self.topic_path = f"projects/{project}/topics/{topic}"
        self._emulator_host = emulator_host
        self._timeout = timeout
        self._linger = linger
        # Retries end before `publish` stops waiting, so a failed publish is not sent later.
        self._retry = retry.Retry(
            predicate=RETRYABLE, initial=0.05, maximum=1.0, multiplier=2.0, timeout=timeout * 0.8
        )
        self._client: pubsub_gapic.PublisherClient | None = None
        self._closed = False
        self._in_flight = 0
        self._cond = threading.Condition()
        self._waiting: dict[tuple[str, bool], deque[_Waiting]] = {}
        self._sending: dict[tuple[str, bool], int] = {}
        # When a message of each type last left with company or with others waiting.
        self._crowded_at: dict[tuple[str, bool], float] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> PubSubBus:
        """The bus for GOOGLE_CLOUD_PROJECT, PUBSUB_TOPIC and PUBSUB_EMULATOR_HOST."""
        return cls(
            project=settings.google_cloud_project,
            topic=settings.pubsub_topic,
            emulator_host=settings.pubsub_emulator_host,
        )

    @property
    def waiting(self) -> int:
        """Events waiting for a message of their type to carry them."""
        with self._cond:
            return sum(len(waiting) for waiting in self._waiting.values())

    def publish(self, event: Event, data: bytes) -> None:
        """Publish `data` with the event's attributes; PublishError unless Pub/Sub confirms the
        message that carries it."""
        slot = _Waiting(event, data, since=time.monotonic())
        key = (event.type, event.livemode)  # the subscriptions' filters read the type
        with self._cond:
            waiting = self._waiting.setdefault(key, deque())
            calm = slot.since - self._crowded_at.get(key, float("-inf")) >= self._linger
            slot.alone = calm and not waiting and not self._sending.get(key, 0)
            waiting.append(slot)
            while not slot.done:
                delay = None if slot.taken else self._delay(key, waiting)
                if delay == 0:
                    self._lead(key, waiting)
                else:
                    self._cond.wait(delay)
        if slot.error is not None:
            raise slot.error

    def _delay(self, key: tuple[str, bool], waiting: deque[_Waiting]) -> float | None:
        """Seconds until the oldest waiting events of a type may leave (0: now); None while
        its messages on their way are as many as may be (called with the lock held)."""
        if self._sending.get(key, 0) >= IN_FLIGHT_PER_TYPE:
            return None
        oldest = waiting[0]
        if oldest.alone or len(waiting) >= MESSAGE_EVENTS:
            return 0
        return max(0.0, oldest.since + self._linger - time.monotonic())

    def _lead(self, key: tuple[str, bool], waiting: deque[_Waiting]) -> None:
        """Send the oldest waiting events of one type as one message (called and returning
        with the lock held)."""
        batch = [waiting.popleft()]
        size, ids = len(batch[0].data), len(batch[0].event.id)
        while waiting and len(batch) < MESSAGE_EVENTS:
            nxt = waiting[0]
            too_long = ids + 1 + len(nxt.event.id) > ATTRIBUTE_BYTES
            if too_long or size + len(nxt.data) > MESSAGE_BYTES:
                break
            batch.append(waiting.popleft())
            size, ids = size + len(nxt.data) + 1, ids + 1 + len(nxt.event.id)
        for slot in batch:
            slot.taken = True
        self._sending[key] = self._sending.get(key, 0) + 1
        if len(batch) > 1 or waiting:
            self._crowded_at[key] = time.monotonic()
        self._cond.release()
        # Unconfirmed unless the send returns: whatever else ends it (the worker stopping), the
        # webhooks waiting on this message must not answer Stripe as if it were stored.
        error: PublishError | None = PublishError(f"publish to {self.topic_path} did not end")
        try:
            self._send(batch)
            error = None
        except PublishError as exc:
            error = exc
        finally:
            self._cond.acquire()
            self._sending[key] -= 1
            for slot in batch:
                slot.done, slot.error = True, error
            self._cond.notify_all()

    def _send(self, batch: Sequence[_Waiting]) -> None:
        client = self._acquire_client()
        try:
            # The Publish call itself, on this thread: the library's batching (a thread and a
            # future per batch) would only repeat the grouping done here.
            message = pubsub_gapic.PubsubMessage(
                data=message_body([slot.data for slot in batch]),
                attributes=message_attributes([slot.event for slot in batch]),
            )
            client.publish(
                topic=self.topic_path,
                messages=[message],
                retry=self._retry,
                timeout=min(2.0, self._timeout * 0.8),
            )
        except (exceptions.GoogleAPIError, TimeoutError, RuntimeError) as exc:
            raise PublishError(f"publish to {self.topic_path} failed: {exc!r}") from exc
        finally:
            self._release()

    def drain(self, timeout: float) -> bool:
        """Each publish was confirmed before it returned: nothing is left to hand on."""
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Refuse new publishes, wait for those in flight, close the channel."""
        with self._cond:
            self._closed = True
            client = self._client
            if client is None:
                return
            self._cond.wait_for(lambda: self._in_flight == 0, timeout)
        client.transport.close()  # type: ignore[no-untyped-call]

    def _acquire_client(self) -> pubsub_gapic.PublisherClient:
        with self._cond:
            if self._closed:
                raise PublishError("the Pub/Sub bus is closed")
            if self._client is None:
                self._client = self._new_client()
            self._in_flight += 1
            return self._client

    def _release(self) -> None:
        with self._cond:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._cond.notify_all()

    def _new_client(self) -> pubsub_gapic.PublisherClient:
        # The generated client: Publish as one call (pubsub_v1's would batch it again).
        return pubsub_gapic.PublisherClient(transport=publisher_transport(self._emulator_host))


def message_attributes(events: Sequence[Event]) -> dict[str, str]:
    """A message's attributes: a lone event's (`attributes`); for several, their shared type
    and mode and their ids, space-separated, and no trace (the webhook requests that published
    them were as many traces: the subscribers' lines name each event instead)."""
    if len(events) == 1:
        return attributes(events[0])
    return {
        "event_type": events[0].type,
        "livemode": events[0].attributes["livemode"],
        "event_ids": " ".join(event.id for event in events),
    }


def attributes(event: Event) -> dict[str, str]:
    """The message's attributes: the event's, and the trace it is published under (so that
    the subscribers' lines join the webhook request's trace)."""
    found = dict(event.attributes)
    if (trace := tracing.current()) is not None:
        found[tracing.ATTRIBUTE] = trace.traceparent()
    return found


def publisher_transport(emulator_host: str | None) -> Any:
    """A plain-text channel to the emulator when one is named, else Google's (TLS)."""
    if emulator_host:
        channel = grpc.insecure_channel(emulator_host, options=CHANNEL_OPTIONS)
        return _Transport(channel=channel, host=emulator_host)
    # The class, not an instance: the client builds it with its own credentials and endpoint.
    return _Transport
