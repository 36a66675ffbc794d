"""Subscribers fed by StreamingPull from the real Pub/Sub emulator: access in batches, e-mail one
event a thread, each message acknowledged once handled and refused (redelivered) when it failed;
`bin/serve` with SUBSCRIBER_DELIVERY=pull as a process, stopped by SIGTERM."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from email import policy
from email.parser import BytesParser
from functools import partial
from pathlib import Path

import pytest
import requests
from google.api_core import exceptions

from adapters.bus.pubsub import PubSubBus
from adapters.bus.pull import PullConsumer
from adapters.bus.topology import clients, ensure_topology
from adapters.db.pool import Database
from config import Settings
from core.events import Event, parse_event
from dev import pubsub_emulator
from dev.samples.catalogue import seed_demo_products
from runtime.consumers import MESSAGE_FILTERS, subscription_of
from runtime.container import Container
from tests.access.lifecycle_helpers import MONTHLY, link
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for
from tests.pubsub_fixtures import (  # noqa: F401  # fixtures: pytest finds them by name
    PROJECT,
    ROOT,
    TEST_POLICY,
    PubSub,
    pubsub_fixture,
)

T0 = 1_700_000_000


@pytest.fixture
def topic(pubsub: PubSub) -> str:
    """A topic of its own, with pull subscriptions for both subscribers."""
    pubsub.ensure_running()
    name = f"pull-{uuid.uuid4().hex[:8]}"
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=PROJECT,
        topic=name,
        push_endpoints={"access": None, "emails": None},
        policy=TEST_POLICY,
        emulator_host=pubsub.host,
    )
    return name


@pytest.fixture
def pulling(
    settings_factory: Callable[..., Settings], pubsub: PubSub, topic: str
) -> Iterator[Callable[[str], Container]]:
    """Start the pull consumer of a target (its container built as `bin/serve` builds it)."""
    started: list[Container] = []

    def start(target: str) -> Container:
        container = Container(
            settings_factory(
                event_bus="pubsub",
                google_cloud_project=PROJECT,
                pubsub_topic=topic,
                pubsub_emulator_host=pubsub.host,
                function_target=target,
                subscriber_delivery="pull",
            )
        )
        started.append(container)
        container.pull_consumer.start()
        return container

    yield start
    for container in started:
        container.close()


@pytest.fixture
def publisher(pubsub: PubSub, topic: str) -> Iterator[Callable[[bytes], None]]:
    """Publish a Stripe event body as the webhook does (the publisher adapter, its attributes)."""
    bus = PubSubBus(project=PROJECT, topic=topic, emulator_host=pubsub.host)

    def publish(body: bytes) -> None:
        bus.publish(parse_event(json.loads(body)), body)

    yield publish
    bus.close()


def renewal(customer: str, n: int, *, reason: str = "subscription_create") -> bytes:
    invoice = {
        "id": f"in_{customer}_{n}",
        "customer": customer,
        "subscription": f"sub_{customer}",
        "billing_reason": reason,
        "amount_paid": 1900,
        "currency": "usd",
        "customer_email": f"{customer}@example.com",
        "lines": {"data": [{"price": {"id": MONTHLY}, "period": {"start": T0, "end": T0 + 1}}]},
    }
    return stripe_event("invoice.paid", invoice, created=T0 + n, event_id=f"evt_{customer}_{n}")


def applied(db: Database, prefix: str) -> dict[str, str]:
    rows = db.fetch_all(
        "select event_id, outcome from public.processed_events where consumer = 'access'"
        " and event_id like %s and outcome <> 'pending'",
        (f"evt_{prefix}%",),
    )
    return {r["event_id"]: r["outcome"] for r in rows}


def leftover(pubsub: PubSub, topic: str, target: str) -> list[str]:
    """Message ids the subscription still holds for anyone (none once all were acknowledged).
    Asked once the consumer has stopped: a message it leased and never acknowledged is then
    free again, and would be found."""
    path = f"projects/{PROJECT}/subscriptions/{subscription_of(topic, target)}"
    with clients(pubsub.host) as (_, subscriber):
        try:
            found = subscriber.pull(request={"subscription": path, "max_messages": 100}, timeout=2)
        except exceptions.DeadlineExceeded:
            return []
        ids = [m.message.message_id for m in found.received_messages]
        if ids:  # leave them as they were for whoever asks next
            subscriber.modify_ack_deadline(
                request={
                    "subscription": path,
                    "ack_ids": [m.ack_id for m in found.received_messages],
                    "ack_deadline_seconds": 0,
                }
            )
        return ids


def all_applied(db: Database, prefix: str, count: int) -> bool:
    return len(applied(db, prefix)) == count


def linked(db: Database, customer: str) -> str:
    user = create_user(db, f"{customer}@example.com", name="Ada")
    link(db, user, customer)
    return user


def test_a_burst_is_applied_in_batches_and_every_message_acknowledged(
    db: Database,
    pubsub: PubSub,
    topic: str,
    publisher: Callable[[bytes], None],
    pulling: Callable[[str], Container],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="access.subscriber")
    # Messages that reach the consumer within its linger go in one batch: on a busy machine a
    # burst may reach it one message at a time, so a burst is queued again (new customers)
    # until one was batched, a few times at most.
    for attempt in range(5):
        prefix = f"cus_pb{attempt}x"
        customers = [f"{prefix}{n}" for n in range(4)]
        for customer in customers:
            linked(db, customer)
        for n in range(10):  # queued before the consumer starts: it leases them together
            for customer in customers:
                publisher(renewal(customer, n))
        container = pulling("access")
        wait_for(partial(all_applied, db, prefix, 40))
        # Two workers apply two batches at once: an event older than one the other applied
        # first is stale; either way each customer ends at its newest renewal.
        assert set(applied(db, prefix).values()) <= {"granted", "stale"}
        rows = db.fetch_all(
            "select customer_id, has_access, access_event_id from public.profiles"
            " where customer_id like %s order by customer_id",
            (f"{prefix}%",),
        )
        assert [(r["has_access"], r["access_event_id"]) for r in rows] == [
            (True, f"evt_{c}_9") for c in customers
        ]
        container.pull_consumer.stop()
        assert leftover(pubsub, topic, "access") == []
        batches = [r.getMessage() for r in caplog.records if "in one transaction" in r.getMessage()]
        if batches:
            break
    assert batches, "no batch of several events was applied in one transaction"
    assert max(int(m.split("access: ")[1].split(" events")[0]) for m in batches) > 1


def test_a_failed_event_is_refused_then_applied_when_redelivered(
    db: Database,
    topic: str,
    publisher: Callable[[bytes], None],
    pulling: Callable[[str], Container],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.bus.pull")
    publisher(renewal("cus_pf", 1))  # no profile has this customer yet
    pulling("access")
    wait_for(lambda: "failed, redelivered" in caplog.text)
    assert applied(db, "cus_pf") == {}
    user = linked(db, "cus_pf")
    wait_for(lambda: applied(db, "cus_pf") == {"evt_cus_pf_1": "granted"})
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (user,))
    assert row["has_access"] is True


def test_a_message_of_several_events_is_acknowledged_once_each_is_applied(
    db: Database,
    pubsub: PubSub,
    topic: str,
    pulling: Callable[[str], Container],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A message carrying the events published together: one failing sends the message back
    whole; its other events are then duplicates, each applied once."""
    caplog.set_level(logging.WARNING, logger="adapters.bus.pull")
    linked(db, "cus_pg")
    carried = [renewal("cus_pg", 1), renewal("cus_ph", 1)]  # cus_ph has no profile yet
    with clients(pubsub.host) as (raw, _):
        path = f"projects/{PROJECT}/topics/{topic}"
        data = b"[" + b",".join(carried) + b"]"
        raw.publish(path, data, event_type="invoice.paid").result(timeout=HANG_GUARD)
    container = pulling("access")
    wait_for(lambda: "evt_cus_ph_1 failed, redelivered" in caplog.text)
    assert applied(db, "cus_pg") == {"evt_cus_pg_1": "granted"}
    linked(db, "cus_ph")
    wait_for(lambda: applied(db, "cus_ph") == {"evt_cus_ph_1": "granted"})
    container.pull_consumer.stop()
    assert leftover(pubsub, topic, "access") == []
    assert applied(db, "cus_pg") == {"evt_cus_pg_1": "granted"}  # its redelivery: a duplicate


def test_a_message_that_is_not_an_event_is_dropped_and_the_rest_applied(
    db: Database,
    pubsub: PubSub,
    topic: str,
    publisher: Callable[[bytes], None],
    pulling: Callable[[str], Container],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="adapters.bus.pull")
    linked(db, "cus_pn")
    with clients(pubsub.host) as (raw, _):
        path = f"projects/{PROJECT}/topics/{topic}"
        raw.publish(path, b"{not json", event_type="invoice.paid").result(timeout=HANG_GUARD)
    publisher(renewal("cus_pn", 1))
    container = pulling("access")
    wait_for(lambda: applied(db, "cus_pn") == {"evt_cus_pn_1": "granted"})
    wait_for(lambda: "not an event" in caplog.text)
    container.pull_consumer.stop()
    assert leftover(pubsub, topic, "access") == []


def test_e_mail_by_pull_sends_a_renewal_once_for_two_deliveries(
    db: Database,
    pubsub: PubSub,
    topic: str,
    publisher: Callable[[bytes], None],
    pulling: Callable[[str], Container],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="emails.subscriber")
    seed_demo_products(db)
    linked(db, "cus_pm")
    body = renewal("cus_pm", 2, reason="subscription_cycle")
    publisher(body)
    publisher(body)  # Stripe delivered it twice; the webhook published it twice
    container = pulling("emails")
    outbox = Path(container.settings.email_outbox_dir)
    wait_for(
        lambda: db.fetch_all("select 1 from public.sent_emails where event_id = 'evt_cus_pm_2'"),
    )
    # Both deliveries handled (the second a duplicate) before the consumer lets go.
    wait_for(lambda: "evt_cus_pm_2 -> duplicate" in caplog.text)
    container.pull_consumer.stop()
    assert leftover(pubsub, topic, "emails") == []
    [eml] = sorted(outbox.glob("*.eml"))
    message = BytesParser(policy=policy.default).parsebytes(eml.read_bytes())
    assert "cus_pm@example.com" in message["To"]


def test_a_push_subscription_becomes_pull_and_back(pubsub: PubSub) -> None:
    pubsub.ensure_running()
    name = f"flip-{uuid.uuid4().hex[:8]}"
    path = f"projects/{PROJECT}/subscriptions/{subscription_of(name, 'access')}"

    def endpoint() -> str:
        with clients(pubsub.host) as (_, subscriber):
            return str(subscriber.get_subscription(subscription=path).push_config.push_endpoint)

    for wanted in ("http://127.0.0.1:9/", None, "http://127.0.0.1:9/"):
        ensure_topology(
            filters=MESSAGE_FILTERS,
            project=PROJECT,
            topic=name,
            push_endpoints={"access": wanted},
            policy=TEST_POLICY,
            emulator_host=pubsub.host,
        )
        assert endpoint() == (wanted or "")


def serve_env(
    pubsub: PubSub, database_url: str, topic: str, tmp_path: Path, **more: str
) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    return inherited | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "APP_ENV": "test",
        "DATABASE_URL": database_url,
        "EMAIL_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DATA_DIR": str(tmp_path / "data"),
        "EVENT_BUS": "pubsub",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "PUBSUB_TOPIC": topic,
        "PUBSUB_EMULATOR_HOST": pubsub.host,
        "FUNCTION_TARGET": "access",
        "SUBSCRIBER_DELIVERY": "pull",
        **more,
    }


def healthz(port: int) -> int:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code
    except requests.RequestException:  # not answering yet (or too slowly): asked again
        return 0


def test_bin_serve_pulls_answers_its_probe_and_stops_on_sigterm(
    db: Database,
    database_url: str,
    pubsub: PubSub,
    topic: str,
    publisher: Callable[[bytes], None],
    tmp_path: Path,
) -> None:
    linked(db, "cus_ps")
    port = pubsub_emulator.free_port()
    env = serve_env(pubsub, database_url, topic, tmp_path, PORT=str(port))
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen([str(ROOT / "bin" / "serve")], env=env, stdout=log, stderr=log)
    try:
        wait_for(lambda: healthz(port) == 200)
        publisher(renewal("cus_ps", 1))
        wait_for(lambda: applied(db, "cus_ps") == {"evt_cus_ps_1": "granted"})
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=HANG_GUARD) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert leftover(pubsub, topic, "access") == []


def test_bin_serve_exits_non_zero_when_its_subscription_is_missing(
    database_url: str, pubsub: PubSub, tmp_path: Path
) -> None:
    pubsub.ensure_running()
    port = pubsub_emulator.free_port()
    env = serve_env(
        pubsub, database_url, f"absent-{uuid.uuid4().hex[:8]}", tmp_path, PORT=str(port)
    )
    done = subprocess.run(
        [str(ROOT / "bin" / "serve")], env=env, capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert done.returncode == 1
    assert "the stream ended" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"FUNCTION_TARGET": "api"}, "SUBSCRIBER_DELIVERY=pull is for a subscriber target"),
        ({"EVENT_BUS": "inline"}, "SUBSCRIBER_DELIVERY=pull reads Pub/Sub"),
    ],
)
def test_bin_serve_refuses_pull_where_it_cannot_work(
    database_url: str,
    pubsub: PubSub,
    tmp_path: Path,
    settings: dict[str, str],
    message: str,
) -> None:
    env = serve_env(pubsub, database_url, "unused", tmp_path, **settings)
    done = subprocess.run(
        [str(ROOT / "bin" / "serve")], env=env, capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert done.returncode == 1
    assert message in done.stderr


def test_a_batch_holds_whole_messages_up_to_its_size_in_events(pubsub: PubSub, topic: str) -> None:
    """Messages of three events each, a batch of four: two messages (six events) go together,
    never a message split, never a third."""
    batches: list[list[str]] = []

    def handle(events: Sequence[Event]) -> list[object]:
        batches.append([event.id for event in events])
        return ["ignored"] * len(events)

    with clients(pubsub.host) as (raw, _):
        path = f"projects/{PROJECT}/topics/{topic}"
        for m in range(3):
            bodies = [renewal(f"cus_pb{m}", n) for n in range(3)]
            ids = " ".join(f"evt_cus_pb{m}_{n}" for n in range(3))
            data = b"[" + b",".join(bodies) + b"]"
            raw.publish(path, data, event_type="invoice.paid", event_ids=ids).result(
                timeout=HANG_GUARD
            )
    consumer = PullConsumer(
        subscription=f"projects/{PROJECT}/subscriptions/{subscription_of(topic, 'access')}",
        handle=handle,
        batch_size=4,
        max_messages=10,
        workers=1,
        linger=2.0,
        emulator_host=pubsub.host,
    )
    consumer.start()
    try:
        wait_for(lambda: sum(len(b) for b in batches) == 9)
    finally:
        consumer.stop()
    assert sorted(len(b) for b in batches) == [3, 6]
    for batch in batches:  # each message's three events together, in order
        assert {tuple(batch[n : n + 3]) for n in range(0, len(batch), 3)} <= {
            tuple(f"evt_cus_pb{m}_{n}" for n in range(3)) for m in range(3)
        }
