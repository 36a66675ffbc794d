"""`flask --app main events reconcile | replay-dead-letters`, against the Stripe fake, Postgres,
the in-process bus and the real Pub/Sub emulator."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import google.cloud.pubsub_v1 as pubsub_v1
import pytest
from click.testing import Result

from adapters.bus.topology import ensure_topology
from adapters.db.pool import Database
from adapters.db.products import seed_demo_products
from config import Settings
from main import create_app
from runtime.container import Container
from tests.fakes.stripe import FakeStripe
from tests.helpers import create_user, stripe_event
from tests.pubsub_fixtures import PROJECT, PubSub, pubsub_fixture  # noqa: F401
from tests.subscribers.lifecycle_helpers import link, profile, session

TOPIC = "lifecycle-events"


@pytest.fixture
def cli(settings_factory: Callable[..., Settings]) -> Iterator[Callable[..., Result]]:
    containers: list[Container] = []

    def run(*args: str, **settings: Any) -> Result:
        container = Container(settings_factory(**settings))
        containers.append(container)
        result = create_app(container=container).test_cli_runner().invoke(args=["events", *args])
        if "bus" in container.__dict__ and hasattr(container.bus, "wait_idle"):
            assert container.bus.wait_idle(15)
        return result

    yield run
    for container in containers:
        container.close()


def stripe_listed(body: bytes) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(body)
    return event


def record(db: Database, event_id: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "insert into public.processed_events (consumer, event_id, event_type, event_created,"
            " outcome) values ('access', %s, 'invoice.paid', now(), 'granted')",
            (event_id,),
        )


def test_reconcile_republishes_what_the_ledger_lacks_once(
    cli: Callable[..., Result], db: Database, stripe_fake: FakeStripe
) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    now = int(time.time())
    lost = stripe_event("checkout.session.completed", session(ada), event_id="evt_lost")
    old = stripe_event(
        "invoice.paid", {"id": "in_0", "customer": "cus_ada"}, created=now - 80 * 3600
    )
    # Over a hundred already applied: the listing takes two pages.
    applied = [
        stripe_event(
            "invoice.paid", {"id": f"in_{n}", "customer": "cus_ada"}, event_id=f"evt_{n:03}"
        )
        for n in range(120)
    ]
    for body in applied:
        record(db, stripe_listed(body)["id"])
    stripe_fake.events[:] = [stripe_listed(b) for b in [lost, *applied, old]]

    dry = cli("reconcile", "--since", "72h", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Stripe lists 121 event(s)" in dry.output
    assert "missing: evt_lost checkout.session.completed" in dry.output
    assert "would republish 1 event(s)" in dry.output
    assert profile(db, ada)["has_access"] is False

    done = cli("reconcile", "--since", "72h")
    assert "republished 1 event(s)" in done.output
    assert profile(db, ada)["has_access"] is True
    assert len(stripe_fake.server.calls("GET", "/v1/events")) == 4  # two pages, twice
    first_page = dict(stripe_fake.server.calls("GET", "/v1/events")[0].query)
    assert abs(int(first_page["created[gte]"]) - (now - 72 * 3600)) < 60
    assert "charge.refunded" in first_page.values()

    again = cli("reconcile", "--since", "72h")
    assert "republished 0 event(s)" in again.output


@pytest.mark.parametrize("since", ["72", "0m", "31d", "yesterday"])
def test_reconcile_refuses_a_bad_since(cli: Callable[..., Result], since: str) -> None:
    result = cli("reconcile", "--since", since)
    assert result.exit_code == 2
    assert "--since" in result.output


def test_replay_needs_pubsub(cli: Callable[..., Result]) -> None:
    result = cli("replay-dead-letters")
    assert result.exit_code == 2
    assert "EVENT_BUS=pubsub" in result.output


def test_replay_republishes_the_dead_letters_once(
    cli: Callable[..., Result], pubsub: PubSub, monkeypatch: pytest.MonkeyPatch
) -> None:
    pubsub.ensure_running()
    ensure_topology(project=PROJECT, topic=TOPIC, push_endpoints={}, emulator_host=pubsub.host)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub.host)
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    probe = subscriber.subscription_path(PROJECT, f"{TOPIC}-probe")
    subscriber.create_subscription(name=probe, topic=publisher.topic_path(PROJECT, TOPIC))
    body = stripe_event("invoice.paid", {"id": "in_1", "customer": "cus_1"}, event_id="evt_dead")
    dead_topic = publisher.topic_path(PROJECT, f"{TOPIC}-dead-letter")
    publisher.publish(dead_topic, body, event_id="evt_dead").result(timeout=10)
    publisher.publish(dead_topic, b"not an event").result(timeout=10)
    settings = {"event_bus": "pubsub", "pubsub_topic": TOPIC, "pubsub_emulator_host": pubsub.host}
    try:
        dry = cli("replay-dead-letters", "--dry-run", **settings)
        assert "dead letter: evt_dead invoice.paid" in dry.output
        assert "would replay 1 of 2 dead letter(s)" in dry.output

        done = cli("replay-dead-letters", **settings)
        assert done.exit_code == 0, done.output
        assert "replayed 1 of 2 dead letter(s)" in done.output
        assert "unreadable" in done.output
        [received] = subscriber.pull(
            subscription=probe, max_messages=10, timeout=10
        ).received_messages
        assert received.message.data == body
        assert received.message.attributes["event_id"] == "evt_dead"

        again = cli("replay-dead-letters", **settings)
        assert "replayed 0 of 1 dead letter(s)" in again.output  # the unreadable one stays
    finally:
        subscriber.delete_subscription(subscription=probe)
        subscriber.close()
