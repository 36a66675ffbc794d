"""The event bus on Google Pub/Sub: a publish is confirmed before the webhook answers Stripe."""

from __future__ import annotations

import threading
from typing import Any

import google.cloud.pubsub_v1 as pubsub_v1
import grpc
from google.api_core import exceptions, retry
from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

from adapters.bus import PublishError
from config import Settings
from core import tracing
from core.events import Event

PUBLISH_TIMEOUT = 5.0

# Latency over bulk: each webhook request waits for its own message, so a batch leaves after
# a few milliseconds or as soon as it holds what the concurrent requests have handed in.
BATCH = pubsub_v1.types.BatchSettings(max_messages=16, max_bytes=1_000_000, max_latency=0.002)

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


class PubSubBus:
    """Publishes each verified event to the topic and waits until Pub/Sub has stored it."""

    def __init__(
        self,
        *,
        project: str,
        topic: str,
        emulator_host: str | None = None,
        timeout: float = PUBLISH_TIMEOUT,
        batch: pubsub_v1.types.BatchSettings = BATCH,
    ) -> None:
        self.topic_path = f"projects/{project}/topics/{topic}"
        self._emulator_host = emulator_host
        self._timeout = timeout
        self._batch = batch
        self._client: pubsub_v1.PublisherClient | None = None
        self._closed = False
        self._in_flight = 0
        self._cond = threading.Condition()

    @classmethod
    def from_settings(cls, settings: Settings) -> PubSubBus:
        """The bus for GOOGLE_CLOUD_PROJECT, PUBSUB_TOPIC and PUBSUB_EMULATOR_HOST."""
        return cls(
            project=settings.google_cloud_project,
            topic=settings.pubsub_topic,
            emulator_host=settings.pubsub_emulator_host,
        )

    def publish(self, event: Event, data: bytes) -> None:
        """Publish `data` with the event's attributes; PublishError unless Pub/Sub confirms."""
        client = self._acquire()
        try:
            future = client.publish(self.topic_path, data, **attributes(event))
            future.result(timeout=self._timeout)
        except (exceptions.GoogleAPIError, TimeoutError, RuntimeError) as exc:
            raise PublishError(f"publish to {self.topic_path} failed: {exc!r}") from exc
        finally:
            self._release()

    def drain(self, timeout: float) -> bool:
        """Each publish was confirmed before it returned: nothing is left to hand on."""
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Send what is batched, wait for the publishes in flight, close the channel."""
        with self._cond:
            self._closed = True
            client = self._client
            if client is None:
                return
            client.stop()
            self._cond.wait_for(lambda: self._in_flight == 0, timeout)
        client.transport.close()

    def _acquire(self) -> pubsub_v1.PublisherClient:
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

    def _new_client(self) -> pubsub_v1.PublisherClient:
        # Retries end before `publish` stops waiting, so a failed publish is not sent later.
        options = pubsub_v1.types.PublisherOptions(
            retry=retry.Retry(
                predicate=RETRYABLE,
                initial=0.05,
                maximum=1.0,
                multiplier=2.0,
                timeout=self._timeout * 0.8,
            ),
            timeout=min(2.0, self._timeout * 0.8),
        )
        return pubsub_v1.PublisherClient(
            batch_settings=self._batch,
            publisher_options=options,
            transport=publisher_transport(self._emulator_host),
        )


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
