"""Knowing when the pipeline has settled: every message the webhook accepted has been handled
by each subscriber (its log says so) or has reached the dead-letter subscription."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import google.cloud.pubsub_v1 as pubsub_v1
import grpc
from google.api_core import exceptions
from google.protobuf import timestamp_pb2
from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

from runtime.consumers import subscription_of
from tests.faultrun.targets import SUBSCRIBERS, Log

SOURCE = "CloudPubSubDeadLetterSourceSubscription"


@dataclass
class DeadLetters:
    """Pulls (and acknowledges) the dead-letter subscription; keeps (source, event id) counts,
    and each message's events (a message carries the events published together)."""

    project: str
    subscription: str
    found: Counter[tuple[str, str]] = field(default_factory=Counter)
    messages: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def pull(self, emulator_host: str) -> None:
        channel = grpc.insecure_channel(emulator_host)
        transport = SubscriberGrpcTransport(channel=channel, host=emulator_host)
        path = f"projects/{self.project}/subscriptions/{self.subscription}"
        with pubsub_v1.SubscriberClient(transport=transport) as subscriber:
            while True:
                try:
                    got = subscriber.pull(subscription=path, max_messages=500, timeout=2)
                except exceptions.DeadlineExceeded:
                    return
                received = got.received_messages
                if not received:
                    return
                for item in received:
                    data = json.loads(item.message.data)
                    ids = tuple(e["id"] for e in (data if isinstance(data, list) else [data]))
                    source = item.message.attributes.get(SOURCE, "?")
                    self.messages.append((source, ids))
                    for event_id in ids:
                        self.found[(source, event_id)] += 1
                subscriber.acknowledge(subscription=path, ack_ids=[r.ack_id for r in received])


def missing(
    accepted: Counter[str],
    logs: dict[str, Log],
    dead: DeadLetters,
    topic: str,
    announced: set[str],
) -> dict[str, int]:
    """Per subscriber, how many accepted messages are neither handled nor dead-lettered, and
    how many announcements access made the e-mails subscriber has yet to handle once."""
    short = {}
    for name in SUBSCRIBERS:
        source = subscription_of(topic, name)
        handled = logs[name].handled
        short[name] = sum(
            max(0, n - handled[e] - dead.found[(source, e)]) for e, n in accepted.items()
        )
    emails = subscription_of(topic, "emails")
    short["emails"] += sum(
        1 for a in announced if not logs["emails"].handled[a] and not dead.found[(emails, a)]
    )
    return short


def replay(emulator_host: str, subscriptions: list[str], since: float) -> None:
    """`gcloud pubsub subscriptions seek --time`: redeliver what was published since then.

    Needed for the emulator only: when several pushes to one endpoint fail together, it stops
    retrying some of them (seen with 10 messages failing at once: two or three attempts each,
    then nothing for minutes, whatever the retry policy), where Pub/Sub retries until the
    dead-letter limit. A seek is how an operator replays; the subscribers are idempotent.
    """
    when = timestamp_pb2.Timestamp()
    when.FromNanoseconds(int(since * 1e9))
    channel = grpc.insecure_channel(emulator_host)
    transport = SubscriberGrpcTransport(channel=channel, host=emulator_host)
    with pubsub_v1.SubscriberClient(transport=transport) as subscriber:
        for path in subscriptions:
            subscriber.seek(request={"subscription": path, "time": when})


@dataclass
class Settler:
    """Waits until nothing accepted is in flight; replays a subscription that stalls."""

    project: str
    topic: str
    logs: dict[str, Log]
    dead: DeadLetters
    # The announcements access has made so far (it publishes them after each commit).
    announced: Callable[[], set[str]] = set
    # Seconds without a push reaching any subscriber before a subscription counts as stalled.
    # The emulator retries a message that fails alone every few seconds, but on a loaded machine
    # it was seen waiting 16 to 38 s between attempts; a seek restarts its count of attempts, so
    # a replay sooner than that would keep a message bound for the dead letters from ever
    # reaching them.
    stall: float = 45.0
    replays: int = 0

    def settle(
        self, accepted: Counter[str], *, emulator_host: str, since: float, timeout: float
    ) -> None:
        """AssertionError naming what is still in flight after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last, moved, pushes = None, time.monotonic(), -1
        while True:
            for log in self.logs.values():
                log.read()
            short = missing(accepted, self.logs, self.dead, self.topic, self.announced())
            if not any(short.values()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"messages still in flight after {timeout:.0f} s: {short}")
            # Progress, or the emulator still pushing (a failed push is an attempt counted
            # towards the dead letters): not stalled.
            seen = sum(sum(log.handled.values()) + log.failures for log in self.logs.values())
            if short != last or seen != pushes:
                last, moved, pushes = short, time.monotonic(), seen
            elif time.monotonic() - moved > self.stall:
                stalled = [
                    f"projects/{self.project}/subscriptions/{subscription_of(self.topic, n)}"
                    for n, count in short.items()
                    if count
                ]
                replay(emulator_host, stalled, since)
                self.replays += 1
                moved = time.monotonic()
            self.dead.pull(emulator_host)
            time.sleep(0.2)
