"""`flask --app main events reconcile | replay-dead-letters`, against the Stripe fake, Postgres,
the in-process bus and the real Pub/Sub emulator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google.cloud.pubsub_v1 as pubsub_v1
import pytest
from click.testing import Result

from adapters.bus.topology import ensure_topology
from adapters.db.pool import Database
from config import Settings
from dev.pubsub_emulator import free_port
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from runtime.consumers import MESSAGE_FILTERS
from runtime.container import Container
from tests.access.lifecycle_helpers import link, profile, session, subscription
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD, create_user, stripe_event
from tests.pubsub_fixtures import PROJECT, PubSub, pubsub_fixture  # noqa: F401

TOPIC = "lifecycle-events"


@pytest.fixture
def cli(settings_factory: Callable[..., Settings]) -> Iterator[Callable[..., Result]]:
    containers: list[Container] = []

    def run(*args: str, **settings: Any) -> Result:
        container = Container(settings_factory(**settings))
        containers.append(container)
        # No waiting here for the bus: the command must not return before its work is done.
        return create_app(container=container).test_cli_runner().invoke(args=["events", *args])

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
    cli: Callable[..., Result], db: Database, stripe_fake: StripeStandIn
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
    assert done.exit_code == 0, done.output
    assert "republished 1 event(s)" in done.output
    assert "applied: 1 event(s), as the ledger shows" in done.output
    assert profile(db, ada)["has_access"] is True
    assert len(stripe_fake.calls("GET", "/v1/events")) == 4  # two pages, twice
    first_page = dict(stripe_fake.calls("GET", "/v1/events")[0].query)
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


@dataclass
class Probe:
    """A subscription of its own on the topic: what a replay republishes arrives there."""

    publisher: pubsub_v1.PublisherClient
    subscriber: pubsub_v1.SubscriberClient
    path: str

    def dead_letter(self, data: bytes, **attributes: str) -> None:
        topic = self.publisher.topic_path(PROJECT, f"{TOPIC}-dead-letter")
        self.publisher.publish(topic, data, **attributes).result(timeout=HANG_GUARD)


@pytest.fixture
def probe(pubsub: PubSub, monkeypatch: pytest.MonkeyPatch) -> Iterator[Probe]:
    pubsub.ensure_running()
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=PROJECT,
        topic=TOPIC,
        push_endpoints={},
        emulator_host=pubsub.host,
    )
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub.host)
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(PROJECT, f"{TOPIC}-probe-{uuid.uuid4().hex[:8]}")
    subscriber.create_subscription(name=path, topic=publisher.topic_path(PROJECT, TOPIC))
    yield Probe(publisher, subscriber, path)
    subscriber.delete_subscription(subscription=path)
    subscriber.close()


def test_replay_republishes_the_dead_letters_once(
    cli: Callable[..., Result], pubsub: PubSub, probe: Probe
) -> None:
    body = stripe_event("invoice.paid", {"id": "in_1", "customer": "cus_1"}, event_id="evt_dead")
    probe.dead_letter(body, event_id="evt_dead")
    probe.dead_letter(b"not an event")
    settings = {"event_bus": "pubsub", "pubsub_topic": TOPIC, "pubsub_emulator_host": pubsub.host}
    dry = cli("replay-dead-letters", "--dry-run", **settings)
    assert "dead letter: evt_dead invoice.paid" in dry.output
    assert "would replay 1 of 2 dead letter(s)" in dry.output

    done = cli("replay-dead-letters", **settings)
    assert done.exit_code == 0, done.output
    assert "replayed 1 of 2 dead letter(s)" in done.output
    assert "unreadable" in done.output
    [received] = probe.subscriber.pull(
        subscription=probe.path, max_messages=10, timeout=HANG_GUARD
    ).received_messages
    assert received.message.data == body
    assert received.message.attributes["event_id"] == "evt_dead"

    again = cli("replay-dead-letters", **settings)
    assert "replayed 0 of 1 dead letter(s)" in again.output  # the unreadable one stays


def test_replay_republishes_each_event_of_a_dead_letter_that_carried_several(
    cli: Callable[..., Result], pubsub: PubSub, probe: Probe
) -> None:
    bodies = [
        stripe_event("invoice.paid", {"id": f"in_{n}", "customer": "cus_1"}, event_id=f"evt_d{n}")
        for n in range(2)
    ]
    probe.dead_letter(b"[" + b",".join(bodies) + b"]", event_ids="evt_d0 evt_d1")
    settings = {"event_bus": "pubsub", "pubsub_topic": TOPIC, "pubsub_emulator_host": pubsub.host}
    done = cli("replay-dead-letters", **settings)
    assert done.exit_code == 0, done.output
    # (an unreadable letter another test left may be there too: it stays)
    assert "dead letter: evt_d0 invoice.paid" in done.output
    assert "dead letter: evt_d1 invoice.paid" in done.output
    assert re.search(r"replayed 1 of \d dead letter\(s\), 2 event\(s\)", done.output)
    received: list[dict[str, Any]] = []
    while len(received) < 2:
        response = probe.subscriber.pull(
            subscription=probe.path, max_messages=10, timeout=HANG_GUARD
        )
        received += [json.loads(r.message.data) for r in response.received_messages]
    assert sorted(received, key=lambda e: e["id"]) == [json.loads(b) for b in bodies]
    again = cli("replay-dead-letters", **settings)
    assert "replayed 0 of" in again.output
    assert "evt_d0" not in again.output


def test_reconcile_fails_naming_an_event_that_was_not_applied(
    cli: Callable[..., Result], stripe_fake: StripeStandIn
) -> None:
    # A renewal for a customer no checkout linked: access retries it, then gives up.
    orphan = stripe_event(
        "customer.subscription.updated",
        subscription(customer="cus_orphan", id="sub_orphan"),
        event_id="evt_orphan",
    )
    stripe_fake.events[:] = [stripe_listed(orphan)]

    result = cli("reconcile", "--since", "72h", "--wait", "1")

    assert result.exit_code == 1, result.output
    assert "republished 1 event(s)" in result.output
    assert "republished but not applied in time: evt_orphan" in result.output


def test_reconcile_fails_naming_what_the_bus_refused(
    cli: Callable[..., Result], stripe_fake: StripeStandIn
) -> None:
    lost = stripe_event("invoice.paid", {"id": "in_x", "customer": "cus_x"}, event_id="evt_x")
    stripe_fake.events[:] = [stripe_listed(lost)]
    nowhere = f"127.0.0.1:{free_port()}"  # no emulator listens there

    result = cli("reconcile", "--since", "72h", event_bus="pubsub", pubsub_emulator_host=nowhere)

    assert result.exit_code == 1, result.output
    assert "could not republish evt_x" in result.output
    assert "not republished (the bus refused): evt_x" in result.output


def test_the_flask_command_applies_a_missed_event_once_before_it_exits(
    database_url: str, db: Database, stripe_fake: StripeStandIn, tmp_path: Path
) -> None:
    """As an operator runs it: a process of its own that exits when the command returns."""
    seed_demo_products(db)
    bea = create_user(db, "bea@example.com")
    link(db, bea, "cus_bea")
    missed = stripe_event("checkout.session.completed", session(bea), event_id="evt_missed")
    stripe_fake.events[:] = [stripe_listed(missed)]
    env = {
        **{k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES},
        "APP_ENV": "test",
        "DATABASE_URL": database_url,
        "STRIPE_SECRET_KEY": "sk_test_fake",
        "STRIPE_API_BASE": stripe_fake.url,
        "EMAIL_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DATA_DIR": str(tmp_path / "data"),
    }
    command = [str(Path(sys.executable).parent / "flask"), "--app", "main", "events", "reconcile"]

    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "applied: 1 event(s)" in first.stdout
    assert profile(db, bea)["has_access"] is True

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "republished 0 event(s)" in second.stdout


def test_reconcile_does_not_republish_an_event_of_a_version_it_does_not_read(
    cli: Callable[..., Result], stripe_fake: StripeStandIn, db: Database
) -> None:
    old = stripe_event(
        "invoice.paid",
        {"id": "in_v", "customer": "cus_v"},
        event_id="evt_old_version",
        api_version="2019-02-19",
    )
    stripe_fake.events[:] = [stripe_listed(old)]

    result = cli("reconcile", "--since", "72h")

    assert result.exit_code == 1, result.output
    assert "not republished: evt_old_version is at API version 2019-02-19" in result.output
    assert db.fetch_all("select 1 from public.processed_events") == []
