"""Fan-out through the real Pub/Sub emulator, across processes: the API under gunicorn
publishes, the emulator pushes, the access target under functions-framework writes Postgres."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import google.cloud.pubsub_v1 as pubsub_v1
import pytest

from adapters.bus import MESSAGE_EVENTS, PublishError
from adapters.bus.pubsub import PubSubBus
from adapters.db.pool import Database
from config import Settings
from core.events import parse_event
from dev import pubsub_emulator
from dev.samples.catalogue import seed_demo_products
from runtime.container import Container
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for
from tests.pubsub_fixtures import (  # noqa: F401  # fixtures: pytest finds them by name
    PROJECT,
    Pipeline,
    PubSub,
    access_target_fixture,
    api_server_fixture,
    pipeline_fixture,
    post_event,
    pubsub_fixture,
    service_env_fixture,
    spawn,
)

PRICE = "price_demo_team_monthly"


def completed(user_id: str, session: str = "cs_ps_1") -> dict[str, Any]:
    return {
        "id": session,
        "object": "checkout.session",
        "client_reference_id": user_id,
        "customer": "cus_ps",
        "subscription": "sub_ps",
        "mode": "subscription",
        "metadata": {"price_id": PRICE},
        "payment_status": "paid",
        "amount_total": 1900,
        "currency": "usd",
        "customer_details": {"email": "ps@example.com", "name": "Ada"},
    }


def has_access(db: Database, user_id: str) -> bool:
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (user_id,))
    return bool(row["has_access"])


def outcomes(db: Database) -> list[str]:
    rows = db.fetch_all(
        "select outcome from public.processed_events where consumer = 'access'"
        " and outcome <> 'pending' order by processed_at"
    )
    return [row["outcome"] for row in rows]


def emulator_processes(port: int) -> list[str]:
    """Command lines of live processes serving an emulator on `port` (the Java server too)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(
            w in (f"--port={port}".encode(), f"--host-port=127.0.0.1:{port}".encode())
            for w in words
        ):
            found.append(b" ".join(words).decode(errors="replace"))
    return found


@pytest.fixture
def buyer(db: Database) -> str:
    seed_demo_products(db)
    return create_user(db, "ps@example.com")


@pytest.fixture
def profiles_refuse_writes(db: Database) -> Iterator[Callable[[], None]]:
    """A trigger that fails every profile update (counting attempts); call the result to lift it."""
    with db.transaction() as conn:
        conn.execute("create sequence if not exists public.test_refused_writes")
        conn.execute(
            "create or replace function public.test_refuse_profile_writes() returns trigger"
            " language plpgsql as $$ begin perform nextval('public.test_refused_writes');"
            " raise exception 'profiles are read-only in this test'; end $$"
        )
        conn.execute(
            "create trigger test_refuse_writes before update on public.profiles"
            " for each row execute function public.test_refuse_profile_writes()"
        )

    def lift() -> None:
        with db.transaction() as conn:
            conn.execute("drop trigger if exists test_refuse_writes on public.profiles")
            conn.execute("drop function if exists public.test_refuse_profile_writes()")

    yield lift
    lift()
    with db.transaction() as conn:
        conn.execute("drop sequence if exists public.test_refused_writes")


def refused_writes(db: Database) -> int:
    [row] = db.fetch_all("select last_value, is_called from public.test_refused_writes")
    return int(row["last_value"]) if row["is_called"] else 0


def test_publish_carries_the_raw_body_and_the_event_attributes(
    pubsub: PubSub, settings_factory: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    pubsub.ensure_running()
    topic = "bus-contract"
    pubsub.ensure_topology({})  # the topic the pipeline uses exists; this one is ours alone
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub.host)  # the client library's own switch
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic_path = publisher.topic_path(PROJECT, topic)
    sub_path = subscriber.subscription_path(PROJECT, "bus-contract-pull")
    publisher.create_topic(name=topic_path)
    subscriber.create_subscription(name=sub_path, topic=topic_path)
    container = Container(
        settings_factory(event_bus="pubsub", pubsub_topic=topic, pubsub_emulator_host=pubsub.host)
    )
    body = stripe_event("invoice.paid", {"id": "in_1", "customer": "cus_1"}, event_id="evt_attr")
    container.bus.publish(parse_event(json.loads(body)), body)
    container.close()
    [received] = subscriber.pull(
        subscription=sub_path, max_messages=10, timeout=HANG_GUARD
    ).received_messages
    assert received.message.data == body
    assert dict(received.message.attributes) == parse_event(json.loads(body)).attributes
    with pytest.raises(PublishError, match="closed"):
        container.bus.publish(parse_event(json.loads(body)), body)
    subscriber.delete_subscription(subscription=sub_path)
    publisher.delete_topic(topic=topic_path)


# A message as a subscriber reads it: its attributes and the events it carries.
Message = tuple[dict[str, str], list[dict[str, Any]]]


@pytest.fixture
def grouping_topic(
    pubsub: PubSub, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Callable[[int], list[Message]]]]:
    """A topic of this test's own, and a reader of what reached it: the messages (attributes,
    events) that carried `count` events."""
    pubsub.ensure_running()
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub.host)
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic_path = publisher.topic_path(PROJECT, "bus-groups")
    sub_path = subscriber.subscription_path(PROJECT, "bus-groups-pull")
    publisher.create_topic(name=topic_path)
    subscriber.create_subscription(name=sub_path, topic=topic_path)

    def received(count: int) -> list[Message]:
        messages: list[Message] = []
        while sum(len(events) for _, events in messages) < count:
            response = subscriber.pull(subscription=sub_path, max_messages=50, timeout=HANG_GUARD)
            for message in response.received_messages:
                data = json.loads(message.message.data)
                events = data if isinstance(data, list) else [data]
                messages.append((dict(message.message.attributes), events))
            subscriber.acknowledge(
                subscription=sub_path, ack_ids=[r.ack_id for r in response.received_messages]
            )
        return messages

    yield "bus-groups", received
    subscriber.delete_subscription(subscription=sub_path)
    publisher.delete_topic(topic=topic_path)


def renewals(prefix: str, count: int) -> list[bytes]:
    invoices = [{"id": f"in_{prefix}{n}", "customer": "cus_1"} for n in range(count)]
    return [
        stripe_event("invoice.paid", invoice, event_id=f"evt_{prefix}{n}")
        for n, invoice in enumerate(invoices)
    ]


def publish_all(bus: PubSubBus, bodies: list[bytes]) -> list[Future[None]]:
    # Every thread is started before the first publish: while the emulator is paused, a
    # message on its way gives up after the bus's publish deadline, so the events meant to wait
    # behind it must reach the bus well within it, machine load or not.
    pool = ThreadPoolExecutor(max_workers=len(bodies))
    started = threading.Barrier(len(bodies) + 1)
    for _ in bodies:
        pool.submit(started.wait)
    started.wait(timeout=HANG_GUARD)
    futures = [pool.submit(bus.publish, parse_event(json.loads(b)), b) for b in bodies]
    pool.shutdown(wait=False)
    return futures


def test_events_of_a_type_published_while_it_is_on_its_way_share_the_next_message(
    pubsub: PubSub, grouping_topic: tuple[str, Callable[[int], list[Message]]]
) -> None:
    """Group commit: one message of a type on its way at a time; the events of that type
    published meanwhile go together in the next (at most MESSAGE_EVENTS a message), as a JSON
    array of their bodies with their ids; another type is never held by them."""
    topic, received = grouping_topic
    # No linger: a message leaves as soon as none of its type is on its way (the linger has
    # its own test below).
    bus = PubSubBus(project=PROJECT, topic=topic, emulator_host=pubsub.host, timeout=30, linger=0)
    bodies = renewals("g", 2 * MESSAGE_EVENTS + 4)
    refund = stripe_event("charge.refunded", {"id": "ch_1"}, event_id="evt_refund")
    [warm] = renewals("w", 1)
    bus.publish(parse_event(json.loads(warm)), warm)  # the channel is up before the pause
    with pubsub.paused():
        futures = publish_all(bus, bodies)
        # All but the one on its way wait for it; a message that gave up instead ends this wait
        # at once (its future then raises below).
        wait_for(lambda: bus.waiting == len(bodies) - 1 or any(f.done() for f in futures))
        futures += publish_all(bus, [refund])
    for future in futures:
        future.result(timeout=HANG_GUARD)
    bus.close()
    messages = received(len(bodies) + 2)
    ids = sorted(event["id"] for _, events in messages for event in events)
    assert ids == sorted(["evt_w0", "evt_refund", *(f"evt_g{n}" for n in range(len(bodies)))])
    renewal_sizes = sorted(
        len(events) for attributes, events in messages if attributes["event_type"] == "invoice.paid"
    )
    # The warm one, one alone, then two full messages and the 3 left.
    assert renewal_sizes == [1, 1, 3, MESSAGE_EVENTS, MESSAGE_EVENTS]
    [(refund_attributes, [refund_event])] = [
        m for m in messages if m[0]["event_type"] == "charge.refunded"
    ]
    assert refund_attributes == parse_event(refund_event).attributes
    sent = {json.loads(b)["id"]: json.loads(b) for b in bodies}
    for attributes, events in messages:
        if len(events) > 1:
            assert set(attributes) == {"event_type", "livemode", "event_ids"}  # no one trace
            assert attributes["event_ids"].split(" ") == [event["id"] for event in events]
            assert events == [sent[event["id"]] for event in events]


def test_in_a_burst_a_message_waits_for_company_until_full_or_the_linger_ends(
    pubsub: PubSub, grouping_topic: tuple[str, Callable[[int], list[Message]]]
) -> None:
    """An event that finds its type calm goes at once. Those that come while a message of their
    type is on its way wait for it, then for company: until a full message's worth
    (MESSAGE_EVENTS) are waiting, or until the oldest has waited the linger; and so, for one
    linger, does an event that comes just after a message left with company."""
    topic, received = grouping_topic
    patient = PubSubBus(project=PROJECT, topic=topic, emulator_host=pubsub.host, linger=60)
    [calm] = publish_all(patient, renewals("alone", 1))
    calm.result(timeout=20)  # not the linger's 60 s
    with pubsub.paused():
        full = publish_all(patient, renewals("full", MESSAGE_EVENTS + 1))
        wait_for(lambda: patient.waiting == MESSAGE_EVENTS)  # the first is on its way, alone
    for future in full:
        future.result(timeout=20)  # a full message waiting leaves: not the linger's 60 s
    patient.close()
    brief = PubSubBus(project=PROJECT, topic=topic, emulator_host=pubsub.host, linger=1)
    with pubsub.paused():
        few = publish_all(brief, renewals("few", 4))
        wait_for(lambda: brief.waiting == 3)
    for future in few:
        future.result(timeout=20)  # the 3 waiting leave once the oldest has waited 1 s
    for future in publish_all(brief, renewals("after", 2)):
        future.result(timeout=20)
    brief.close()
    sizes = sorted(
        (events[0]["id"][4:].rstrip("0123456789"), len(events))
        for _, events in received(MESSAGE_EVENTS + 8)
    )
    few_and_full = [("few", 1), ("few", 3), ("full", 1), ("full", MESSAGE_EVENTS)]
    assert sizes == [("after", 2), ("alone", 1), *few_and_full]


def bus_to_nowhere() -> PubSubBus:
    """A bus whose emulator is not there: each publish fails within a second."""
    return PubSubBus(
        project=PROJECT,
        topic="payment-events",
        emulator_host=f"127.0.0.1:{pubsub_emulator.free_port()}",
        timeout=1.0,
    )


def test_every_event_of_a_message_that_failed_is_refused() -> None:
    bus = bus_to_nowhere()
    bodies = [stripe_event("invoice.paid", {"id": f"in_{n}"}) for n in range(6)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(bus.publish, parse_event(json.loads(b)), b) for b in bodies]
        for future in futures:
            assert isinstance(future.exception(timeout=HANG_GUARD), PublishError)
    bus.close()


def test_a_publish_nobody_receives_fails_within_the_timeout() -> None:
    bus = bus_to_nowhere()
    body = stripe_event("invoice.paid", {"id": "in_1", "customer": "cus_1"})
    started = time.monotonic()
    with pytest.raises(PublishError):
        bus.publish(parse_event(json.loads(body)), body)
    # Its own timeout (a second), not the client library's minute: the bound is far from both.
    assert time.monotonic() - started < 20
    bus.close()


def test_topology_is_idempotent_and_follows_a_new_endpoint(
    pubsub: PubSub, monkeypatch: pytest.MonkeyPatch
) -> None:
    pubsub.ensure_running()
    pubsub.ensure_topology({"probe": "http://127.0.0.1:9/first/"})
    pubsub.ensure_topology({"probe": "http://127.0.0.1:9/second/"})
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub.host)
    with pubsub_v1.SubscriberClient() as subscriber:
        found = subscriber.get_subscription(
            subscription=f"projects/{PROJECT}/subscriptions/payment-events-probe"
        )
        subscriber.delete_subscription(subscription=found.name)
    assert found.push_config.push_endpoint == "http://127.0.0.1:9/second/"
    assert found.retry_policy.minimum_backoff.total_seconds() == pytest.approx(0.1)
    assert found.dead_letter_policy.dead_letter_topic.endswith("/payment-events-dead-letter")
    assert found.dead_letter_policy.max_delivery_attempts == 5


def test_a_signed_webhook_travels_through_pubsub_to_postgres(
    pipeline: Pipeline, buyer: str
) -> None:
    response = pipeline.post_event(stripe_event("checkout.session.completed", completed(buyer)))
    assert (response.status_code, response.json()) == (200, {})
    wait_for(lambda: has_access(pipeline.db, buyer))
    assert outcomes(pipeline.db) == ["granted"]


def test_the_same_event_delivered_three_times_has_one_effect(
    pipeline: Pipeline, buyer: str
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer), event_id="evt_ps_dup")
    for _ in range(3):
        assert pipeline.post_event(body).status_code == 200
    # Three messages, three pushes: the first applies, the other two find the ledger entry.
    wait_for(lambda: pipeline.access_log_count("evt_ps_dup", "duplicate") == 2)
    assert pipeline.access_log_count("evt_ps_dup", "-> granted") == 1
    assert outcomes(pipeline.db) == ["granted"]
    assert len(pipeline.db.fetch_all("select id from public.purchases")) == 1
    assert has_access(pipeline.db, buyer)


def test_events_delivered_newest_first_end_in_the_newest_state(
    pipeline: Pipeline, buyer: str
) -> None:
    with pipeline.db.transaction() as conn:
        conn.execute("update public.profiles set customer_id = 'cus_ps' where id = %s", (buyer,))
        conn.execute(
            "update public.accounts set customer_id = 'cus_ps' where owner_id = %s", (buyer,)
        )
    now = int(time.time())
    deleted = {"id": "sub_ps", "customer": "cus_ps", "status": "canceled"}
    pipeline.post_event(stripe_event("customer.subscription.deleted", deleted, created=now))
    wait_for(lambda: outcomes(pipeline.db))
    paid = {"id": "in_ps", "customer": "cus_ps", "subscription": "sub_ps"}
    pipeline.post_event(stripe_event("invoice.paid", paid, created=now - 60))
    wait_for(lambda: len(outcomes(pipeline.db)) == 2)
    assert outcomes(pipeline.db) == ["revoked", "stale"]
    assert not has_access(pipeline.db, buyer)


def test_with_pubsub_down_the_webhook_answers_5xx_and_stripes_retry_lands(
    pipeline: Pipeline, buyer: str
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer), event_id="evt_ps_down")
    port = pipeline.pubsub.emulator.port
    pipeline.pubsub.stop()
    assert emulator_processes(port) == [], "the Java server outlived the stop"
    refused = pipeline.post_event(body)
    assert refused.status_code == 503
    assert "retry" in refused.json()["error"]
    pipeline.connect()  # the emulator back on the same port, empty: topology created again
    assert pipeline.post_event(body).status_code == 200  # Stripe's retry: same body, new signature
    wait_for(lambda: has_access(pipeline.db, buyer))
    assert outcomes(pipeline.db) == ["granted"]


def test_a_failed_database_write_is_retried_by_pubsub_and_lands_once(
    pipeline: Pipeline, buyer: str, profiles_refuse_writes: Callable[[], None]
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer), event_id="evt_ps_retry")
    assert pipeline.post_event(body).status_code == 200
    wait_for(lambda: refused_writes(pipeline.db) >= 1)
    assert outcomes(pipeline.db) == []  # the claim rolled back with the failed write
    profiles_refuse_writes()
    wait_for(lambda: has_access(pipeline.db, buyer))
    assert outcomes(pipeline.db) == ["granted"]
    assert len(pipeline.db.fetch_all("select id from public.purchases")) == 1
