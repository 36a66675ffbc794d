"""A changed filter on the emulator: `ensure_topology` makes the new subscription beside the old
one and deletes the old one only after, as cloudbuild.yaml does in production.

The emulator takes snapshots and seeks to them but does not carry a backlog into a subscription
made after the snapshot (Pub/Sub does: its replay documentation copies one subscription's
acknowledgement state to another this way), so this test holds the order and the shape; the
cloudbuild.yaml dry run (tests/deploy/test_topology.py) holds production's order of calls.
"""

from __future__ import annotations

import uuid

import pytest
from google.api_core import exceptions

from adapters.bus.filters import subscription_name
from adapters.bus.topology import clients, ensure_topology
from runtime.consumers import MESSAGE_FILTERS, subscription_of
from tests.helpers import wait_for
from tests.pubsub_fixtures import (  # noqa: F401  # fixtures: pytest finds them by name
    PROJECT,
    PubSub,
    pubsub_fixture,
)

OLD_FILTER = 'hasPrefix(attributes.event_type, "invoice.")'


def names(pubsub: PubSub) -> set[str]:
    with clients(pubsub.host) as (_, subscriber):
        listed = subscriber.list_subscriptions(request={"project": f"projects/{PROJECT}"})
        return {sub.name.rsplit("/", 1)[-1] for sub in listed}


def test_a_new_filter_replaces_the_old_subscription_after_it_is_made(pubsub: PubSub) -> None:
    topic = f"rollover-{uuid.uuid4().hex[:8]}"
    endpoints: dict[str, str | None] = {"access": None}
    old = subscription_name(topic, "access", OLD_FILTER)
    [made] = ensure_topology(
        project=PROJECT,
        topic=topic,
        push_endpoints=endpoints,
        emulator_host=pubsub.host,
        filters={"access": OLD_FILTER},
    )
    assert made.endswith(f"/{old}")
    assert old in names(pubsub)

    [replaced] = ensure_topology(
        project=PROJECT,
        topic=topic,
        push_endpoints=endpoints,
        emulator_host=pubsub.host,
        filters=MESSAGE_FILTERS,
    )
    new = subscription_of(topic, "access")
    assert new != old
    assert replaced.endswith(f"/{new}")
    mine = {n for n in names(pubsub) if n.startswith(f"{topic}-access")}
    assert mine == {new}, "the old subscription is gone, the new one holds the new filter"
    with clients(pubsub.host) as (publisher, subscriber):
        assert (
            subscriber.get_subscription(subscription=replaced).filter == MESSAGE_FILTERS["access"]
        )
        with pytest.raises(exceptions.NotFound):
            subscriber.get_snapshot(snapshot=f"projects/{PROJECT}/snapshots/{old}-to-{new[-8:]}")
        # The new subscription receives: a Stripe event access acts on.
        topic_path = f"projects/{PROJECT}/topics/{topic}"
        publisher.publish(topic_path, b"{}", event_type="invoice.paid").result()
        received: list[bytes] = []

        def pulled() -> bool:
            answer = subscriber.pull(request={"subscription": replaced, "max_messages": 10})
            received.extend(m.message.data for m in answer.received_messages)
            return bool(received)

        wait_for(pulled)
    assert received == [b"{}"]


def test_an_unversioned_subscription_from_an_older_build_is_replaced(pubsub: PubSub) -> None:
    topic = f"rollover-{uuid.uuid4().hex[:8]}"
    with clients(pubsub.host) as (publisher, subscriber):
        topic_path = publisher.create_topic(name=f"projects/{PROJECT}/topics/{topic}").name
        subscriber.create_subscription(
            request={
                "name": f"projects/{PROJECT}/subscriptions/{topic}-access",
                "topic": topic_path,
            }
        )
    ensure_topology(
        project=PROJECT,
        topic=topic,
        push_endpoints={"access": None},
        emulator_host=pubsub.host,
        filters=MESSAGE_FILTERS,
    )
    assert {n for n in names(pubsub) if n.startswith(f"{topic}-access")} == {
        subscription_of(topic, "access")
    }


def test_two_old_subscriptions_are_left_for_a_person(pubsub: PubSub) -> None:
    topic = f"rollover-{uuid.uuid4().hex[:8]}"
    for expression in (OLD_FILTER, 'hasPrefix(attributes.event_type, "customer.")'):
        ensure_topology(
            project=PROJECT,
            topic=topic,
            push_endpoints={"access": None},
            emulator_host=pubsub.host,
            filters={"access": expression},
        )
    # The second call replaced the first: one old subscription, as expected.
    with clients(pubsub.host) as (_publisher, subscriber):
        subscriber.create_subscription(
            request={
                "name": f"projects/{PROJECT}/subscriptions/{topic}-access",
                "topic": f"projects/{PROJECT}/topics/{topic}",
            }
        )
    before = names(pubsub)
    with pytest.raises(RuntimeError, match="several subscriptions besides"):
        ensure_topology(
            project=PROJECT,
            topic=topic,
            push_endpoints={"access": None},
            emulator_host=pubsub.host,
            filters=MESSAGE_FILTERS,
        )
    assert names(pubsub) == before, "nothing was made or deleted"
