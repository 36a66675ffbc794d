"""Topics and subscriptions, created or brought up to date (development and tests).

Production provisions the same shape in `cloudbuild.yaml`: one topic, one push subscription
per subscriber named `<topic>-<subscriber>` with its filter (`runtime/consumers.py`, which
the deploy reads through `flask --app main events filters`), retries with backoff, then a
dead-letter topic.
A subscriber given no endpoint gets a pull subscription of the same name and policy (read by
`adapters/bus/pull.py`).
tests/deploy/topology.py reads cloudbuild.yaml's setup, builds it on the emulator with this
module and compares; `PushPolicy()`'s defaults are checked against it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace

import google.cloud.pubsub_v1 as pubsub_v1
import grpc
from google.api_core import exceptions
from google.protobuf import duration_pb2, field_mask_pb2
from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

from adapters.bus.pubsub import publisher_transport


@dataclass(frozen=True)
class PushPolicy:
    """How a push subscription retries; the defaults are production's (cloudbuild.yaml)."""

    ack_deadline: int = 60
    min_backoff: float = 10.0
    max_backoff: float = 600.0
    max_delivery_attempts: int = 10
    # Acked messages are kept this long too, so that `subscriptions seek` can replay them.
    retention: float = 7 * 24 * 3600


# Delivery attempts before the dead-letter topic, per subscriber (PushPolicy's for the others):
# e-mail's one instance refuses pushes while it is full, each refusal an attempt.
DELIVERY_ATTEMPTS = {"emails": 50}
# The dead-letter topic keeps messages longer than a subscription can (31 days against 7).
DEAD_LETTER_TOPIC_RETENTION = 31 * 24 * 3600


def subscription_name(topic: str, subscriber: str) -> str:
    """The push subscription feeding one subscriber, as cloudbuild.yaml names it."""
    return f"{topic}-{subscriber}"


def ensure_topology(
    *,
    project: str,
    topic: str,
    push_endpoints: Mapping[str, str | None],
    dead_letter_topic: str | None = None,
    policy: PushPolicy = PushPolicy(),
    push_service_account: str | None = None,
    push_audiences: Mapping[str, str] | None = None,
    emulator_host: str | None = None,
    filters: Mapping[str, str],
) -> list[str]:
    """Create the topic and one subscription per subscriber (push to its endpoint, or pull
    where the endpoint is None), each with its filter in `filters` (the subscriber targets'
    `runtime.consumers.MESSAGE_FILTERS`); returns their paths.

    Idempotent: what exists is updated to the given endpoint (or to pull) and policy.
    """
    dead_letter = dead_letter_topic or f"{topic}-dead-letter"
    with clients(emulator_host) as (publisher, subscriber):
        topic_path = _ensure_topic(publisher, f"projects/{project}/topics/{topic}")
        dead_path = _ensure_topic(publisher, f"projects/{project}/topics/{dead_letter}")
        # Messages published to a topic without subscriptions vanish: keep the dead letters.
        dead_fields = {
            "name": f"projects/{project}/subscriptions/{dead_letter}",
            **_kept(policy, retain_acked=False),
        }
        _ensure_subscription(subscriber, dead_fields, dead_path)
        paths = []
        for name, endpoint in push_endpoints.items():
            path = f"projects/{project}/subscriptions/{subscription_name(topic, name)}"
            audience = (push_audiences or {}).get(name)
            attempts = DELIVERY_ATTEMPTS.get(name, policy.max_delivery_attempts)
            fields = _push(
                path,
                endpoint,
                dead_path,
                replace(policy, max_delivery_attempts=attempts),
                push_service_account,
                audience,
            )
            if name in filters:
                fields["filter"] = filters[name]
            _ensure_subscription(subscriber, fields, topic_path)
            paths.append(path)
        return paths


def _kept(policy: PushPolicy, *, retain_acked: bool) -> dict[str, object]:
    """Never expires; keeps messages (acked ones too when asked) for the policy's retention."""
    return {
        "ack_deadline_seconds": policy.ack_deadline,
        "expiration_policy": {},  # no ttl: never
        "retain_acked_messages": retain_acked,
        "message_retention_duration": _duration(policy.retention),
    }


def _push(
    path: str,
    endpoint: str | None,
    dead_letter: str,
    policy: PushPolicy,
    service_account: str | None,
    audience: str | None,
) -> dict[str, object]:
    # An empty push config is a pull subscription (and turns a push one into pull).
    push_config: dict[str, object] = {"push_endpoint": endpoint} if endpoint else {}
    if service_account and endpoint:  # Pub/Sub signs each push with an OIDC token of this account
        token = {"service_account_email": service_account}
        push_config["oidc_token"] = token | ({"audience": audience} if audience else {})
    return {
        "name": path,
        "push_config": push_config,
        **_kept(policy, retain_acked=True),
        "retry_policy": {
            "minimum_backoff": _duration(policy.min_backoff),
            "maximum_backoff": _duration(policy.max_backoff),
        },
        "dead_letter_policy": {
            "dead_letter_topic": dead_letter,
            "max_delivery_attempts": policy.max_delivery_attempts,
        },
    }


def _ensure_topic(publisher: pubsub_v1.PublisherClient, path: str) -> str:
    with suppress(exceptions.AlreadyExists):
        publisher.create_topic(name=path)
    return path


def _ensure_subscription(
    subscriber: pubsub_v1.SubscriberClient, fields: dict[str, object], topic: str
) -> None:
    try:
        subscriber.create_subscription(request={**fields, "topic": topic})
    except exceptions.AlreadyExists:
        # Only what differs: the emulator refuses to update some fields (expiration_policy).
        existing = subscriber.get_subscription(subscription=str(fields["name"]))._pb
        wanted = pubsub_v1.types.Subscription(**fields)._pb
        # A filter is fixed at creation: an existing subscription keeps its own.
        fixed = {"name", "filter"}
        changed = [
            n for n in fields if n not in fixed and getattr(existing, n) != getattr(wanted, n)
        ]
        if changed:
            mask = field_mask_pb2.FieldMask(paths=changed)
            subscriber.update_subscription(request={"subscription": fields, "update_mask": mask})


def _duration(seconds: float) -> duration_pb2.Duration:
    whole = int(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=round((seconds - whole) * 1e9))


@contextmanager
def clients(
    emulator_host: str | None,
) -> Iterator[tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]]:
    subscriber = subscriber_client(emulator_host)
    publisher = pubsub_v1.PublisherClient(transport=publisher_transport(emulator_host))
    try:
        yield publisher, subscriber
    finally:
        publisher.transport.close()
        subscriber.close()


def subscriber_client(emulator_host: str | None) -> pubsub_v1.SubscriberClient:
    """A subscriber client for Pub/Sub, or for the emulator at `emulator_host` (no TLS)."""
    if emulator_host:
        channel = grpc.insecure_channel(emulator_host)
        transport = SubscriberGrpcTransport(channel=channel, host=emulator_host)
        return pubsub_v1.SubscriberClient(transport=transport)
    return pubsub_v1.SubscriberClient()
