"""Access changes applied in batches (as the in-process bus hands a burst over) end exactly where
the same events applied one at a time do, on real Postgres."""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import psycopg
import pytest

from access.decide import ProfileNotLinked, PurchaseNotRecorded
from access.subscriber import AccessSubscriber
from adapters.bus import PublishError
from adapters.db.pool import Database
from config import Settings
from core.events import Event, parse_event
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from runtime.container import Container
from tests.access.lifecycle_helpers import GITHUB, link, post_event, session, settle
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for

T0 = 1_700_000_000
PRICES = ("price_a", "price_b")
# What a step of a customer's life is, and whether it calls for an access change.
KINDS = ("paid", "active", "canceled", "deleted", "past_due", "incomplete")


@dataclass
class Bus:
    """The bus port: keeps what the subscriber publishes; refuses while `refusing` is set."""

    refusing: bool = False
    published: list[Event] = field(default_factory=list)

    def publish(self, event: Event, data: bytes) -> None:
        if self.refusing:
            raise PublishError("unavailable")
        self.published.append(event)


@pytest.fixture
def bus() -> Bus:
    return Bus()


@pytest.fixture
def access(
    settings_factory: Callable[..., Settings], db: Database, bus: Bus
) -> Iterator[AccessSubscriber]:
    container = Container(settings_factory())
    yield replace(container.access_subscriber, publish=bus.publish)
    container.close()


def event(kind: str, customer: str, *, created: int, event_id: str, price: str = "") -> Event:
    subscription = {
        "id": f"sub_{customer}",
        "object": "subscription",
        "customer": customer,
        "status": {"deleted": "canceled"}.get(kind, kind),
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": price}}]},
    }
    if kind == "paid":
        invoice = {"id": f"in_{event_id}", "customer": customer, "subscription": subscription["id"]}
        body = stripe_event("invoice.paid", invoice, created=created, event_id=event_id)
    else:
        kind_type = "deleted" if kind == "deleted" else "updated"
        body = stripe_event(
            f"customer.subscription.{kind_type}", subscription, created=created, event_id=event_id
        )
    return parse_event(json.loads(body))


def customers(db: Database, prefix: str, count: int) -> list[str]:
    """`count` linked customers `cus_<prefix><n>`, each with a profile."""
    found = []
    for n in range(count):
        customer = f"cus_{prefix}{n}"
        link(db, create_user(db, f"{prefix}{n}@example.com", name=f"N{n}"), customer)
        found.append(customer)
    return found


def states(db: Database, prefix: str) -> dict[str, tuple[Any, ...]]:
    """Each customer's access and plan, by customer without the prefix."""
    rows = db.fetch_all(
        "select customer_id, has_access, access_changed_at, access_event_id, price_id,"
        " price_changed_at from public.profiles where customer_id like %s",
        (f"cus_{prefix}%",),
    )
    return {
        r["customer_id"].removeprefix(f"cus_{prefix}"): (
            r["has_access"],
            r["access_changed_at"],
            (r["access_event_id"] or "").removeprefix(f"evt_{prefix}"),
            r["price_id"],
            r["price_changed_at"],
        )
        for r in rows
    }


def recorded(db: Database, prefix: str) -> dict[str, str]:
    rows = db.fetch_all(
        "select event_id, outcome from public.processed_events"
        " where consumer = 'access' and event_id like %s",
        (f"evt_{prefix}%",),
    )
    return {r["event_id"]: r["outcome"] for r in rows}


def lives(rng: random.Random, count: int, steps: int) -> list[tuple[int, str, int, str]]:
    """Random lives: (customer, kind, created, price), each customer's seconds all distinct."""
    script = []
    for customer in range(count):
        for created in rng.sample(range(T0, T0 + 60), steps):
            script.append((customer, rng.choice(KINDS), created, rng.choice(PRICES)))
    return script


def as_events(script: list[tuple[int, str, int, str]], prefix: str) -> list[Event]:
    return [
        event(kind, f"cus_{prefix}{c}", created=created, event_id=f"evt_{prefix}{n}", price=price)
        for n, (c, kind, created, price) in enumerate(script)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3, 20261123])
def test_batches_end_where_one_at_a_time_ends(
    access: AccessSubscriber, db: Database, seed: int
) -> None:
    rng = random.Random(seed)
    script = lives(rng, count=4, steps=8)
    customers(db, "one", 4)
    customers(db, "many", 4)

    one = as_events(script, "one")
    rng.shuffle(one)
    for e in one:
        access(e)

    many = as_events(script, "many")
    rng.shuffle(many)
    # Uneven batches, some events twice in one batch, some redelivered in a later one.
    many += rng.sample(many, 6)
    results = []
    while many:
        size = rng.randint(1, 12)
        batch, many = many[:size], many[size:]
        batch += rng.sample(batch, min(2, len(batch)))
        results += access.apply_many(batch)

    assert [r for r in results if isinstance(r, Exception)] == []
    assert states(db, "many") == states(db, "one")
    assert len(recorded(db, "many")) == len(script)
    assert "pending" not in recorded(db, "many").values()


def test_a_redelivered_batch_changes_nothing(access: AccessSubscriber, db: Database) -> None:
    [a, b] = customers(db, "r", 2)
    batch = [
        event("paid", a, created=T0, event_id="evt_r1"),
        event("active", b, created=T0, event_id="evt_r2", price="price_b"),
    ]
    assert access.apply_many(batch) == ["granted", "granted"]
    before = states(db, "r")
    assert access.apply_many(batch) == ["duplicate", "duplicate"]
    assert states(db, "r") == before
    assert recorded(db, "r") == {"evt_r1": "granted", "evt_r2": "granted"}


def test_the_same_event_twice_in_a_batch_is_applied_once(
    access: AccessSubscriber, db: Database
) -> None:
    [a] = customers(db, "t", 1)
    paid = event("paid", a, created=T0, event_id="evt_t1")
    assert access.apply_many([paid, paid]) == ["granted", "duplicate"]
    assert recorded(db, "t") == {"evt_t1": "granted"}


def test_an_unlinked_customer_waits_and_the_rest_of_its_batch_applies(
    access: AccessSubscriber, db: Database
) -> None:
    [a] = customers(db, "u", 1)
    early = event("paid", "cus_u9", created=T0, event_id="evt_u9")
    results = access.apply_many([event("paid", a, created=T0, event_id="evt_u1"), early])
    assert results[0] == "granted"
    assert isinstance(results[1], ProfileNotLinked)
    assert recorded(db, "u") == {"evt_u1": "granted"}  # the claim was undone: it can come back

    link(db, create_user(db, "late@example.com"), "cus_u9")
    assert access.apply_many([early, early]) == ["granted", "duplicate"]
    assert states(db, "u")["9"][0] is True


@pytest.mark.parametrize(("status", "has_access"), [("active", True), ("canceled", False)])
def test_a_tie_in_a_batch_is_settled_by_stripe(
    access: AccessSubscriber,
    db: Database,
    stripe_fake: StripeStandIn,
    status: str,
    has_access: bool,
) -> None:
    [a] = customers(db, "tie", 1)
    stripe_fake.subscribe(f"sub_{a}", status=status)
    batch = [
        event("paid", a, created=T0, event_id="evt_tie1"),
        event("canceled", a, created=T0, event_id="evt_tie2"),
    ]
    # Oldest (then lowest id) first: the grant applies, the cancellation ties and asks Stripe.
    assert access.apply_many(batch) == ["granted", "granted" if has_access else "revoked"]
    assert states(db, "tie")["0"][0] is has_access


def test_a_batch_that_fails_is_applied_one_by_one(
    access: AccessSubscriber, db: Database, stripe_fake: StripeStandIn
) -> None:
    [a, b] = customers(db, "f", 2)
    assert access.apply_many([event("paid", a, created=T0, event_id="evt_f0")]) == ["granted"]
    stripe_fake.outage = True
    # A tie asks Stripe, which is down: that change fails, and with it the batch's transaction.
    tie = event("canceled", a, created=T0, event_id="evt_f1")
    results = access.apply_many([tie, event("paid", b, created=T0, event_id="evt_f2")])
    assert isinstance(results[0], Exception)
    assert results[1] == "granted"
    assert recorded(db, "f") == {"evt_f0": "granted", "evt_f2": "granted"}

    stripe_fake.outage = False
    stripe_fake.subscribe(f"sub_{a}", status="canceled")
    assert access.apply_many([tie]) == ["revoked"]


def test_ends_of_subscriptions_are_announced_after_the_commit_and_again_on_redelivery(
    access: AccessSubscriber, db: Database, bus: Bus
) -> None:
    [a, b] = customers(db, "d", 2)
    access.apply_many([event("paid", c, created=T0, event_id=f"evt_d{c}") for c in (a, b)])
    ended = [event("deleted", c, created=T0 + 1, event_id=f"evt_dx{c[-1]}") for c in (a, b)]

    bus.refusing = True
    results = access.apply_many(ended)
    assert all(isinstance(r, PublishError) for r in results)
    assert [s[0] for s in states(db, "d").values()] == [False, False]  # committed all the same

    bus.refusing = False
    assert access.apply_many(ended) == ["duplicate", "duplicate"]
    announced = [(e.type, e.id, e.object["email"]) for e in bus.published]
    assert announced == [
        ("app.access.revoked", "revoked_evt_dx0", "d0@example.com"),
        ("app.access.revoked", "revoked_evt_dx1", "d1@example.com"),
    ]


def test_other_events_in_a_batch_take_their_own_path(
    access: AccessSubscriber, db: Database
) -> None:
    [a] = customers(db, "o", 1)
    batch = [
        event("incomplete", a, created=T0, event_id="evt_o1"),  # no access change: recorded only
        event("paid", a, created=T0 + 1, event_id="evt_o2"),
    ]
    assert access.apply_many(batch) == ["ignored", "granted"]
    assert recorded(db, "o") == {"evt_o1": "ignored", "evt_o2": "granted"}


def test_the_app_applies_a_burst_queued_behind_busy_workers_in_one_transaction(
    api: Api, db: Database, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="access.subscriber")
    [a] = customers(db, "h", 1)
    # First invoices: no e-mail, access only.
    invoice = {"customer": a, "subscription": f"sub_{a}", "billing_reason": "subscription_create"}
    bodies = [
        stripe_event("invoice.paid", invoice, created=T0 + n, event_id=f"evt_h{n}")
        for n in range(12)
    ]
    with psycopg.connect(database_url) as holder:
        # The test holds the account's row lock: both access workers block on it, one event
        # each, and the ten published next queue behind them.
        holder.execute("select 1 from public.accounts where customer_id = %s for update", (a,))
        for n, body in enumerate(bodies[:2], start=1):
            post_event(api, body)
            wait_for(partial(waiting_on_locks, db, n))
        for body in bodies[2:]:
            post_event(api, body)
    settle(api)
    assert states(db, "h")["0"][:3] == (True, datetime.fromtimestamp(T0 + 11, tz=UTC), "11")
    assert len(recorded(db, "h")) == 12
    assert "pending" not in recorded(db, "h").values()
    batches = [r.getMessage() for r in caplog.records if "in one transaction" in r.getMessage()]
    assert [m.split(" events")[0] for m in batches] == ["access: 10"]


def waiting_on_locks(db: Database, count: int) -> bool:
    """Whether `count` sessions wait on a lock."""
    [row] = db.fetch_all(
        "select count(*) as n from pg_stat_activity where wait_event_type = 'Lock'"
    )
    return int(row["n"]) == count


def test_a_change_waiting_on_the_account_sees_the_grant_committed_while_it_waited(
    access: AccessSubscriber, db: Database, database_url: str
) -> None:
    """The first change to a subscription inserts its entitlement while another change of the
    same customer waits for the account's lock: the waiting one must read that new row (not the
    snapshot from before it waited) and, being older, change nothing."""
    [a] = customers(db, "w", 1)
    [account] = [
        r["id"] for r in db.fetch_all("select id from public.accounts where customer_id = %s", (a,))
    ]
    older = event("paid", a, created=T0, event_id="evt_w0")
    outcome: list[list[str | Exception]] = []
    with psycopg.connect(database_url) as holder:
        # As the newer event's transaction does: account locked, its grant inserted.
        holder.execute("select 1 from public.accounts where id = %s for update", (account,))
        holder.execute(
            "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
            " active, changed_at, event_id) values (%s, %s, 'subscription', 'price_a', 'active',"
            " true, to_timestamp(%s), 'evt_w9')",
            (account, f"sub_{a}", T0 + 9),
        )
        worker = threading.Thread(target=lambda: outcome.append(access.apply_many([older])))
        worker.start()
        wait_for(partial(waiting_on_locks, db, 1))
        holder.commit()
    worker.join(timeout=HANG_GUARD)
    assert outcome == [["stale"]]
    [row] = db.fetch_all(
        "select event_id, changed_at from public.entitlements where source_id = %s", (f"sub_{a}",)
    )
    assert (row["event_id"], row["changed_at"]) == (
        "evt_w9",
        datetime.fromtimestamp(T0 + 9, tz=UTC),
    )


def test_a_refund_whose_checkout_commits_while_its_claim_waits_ends_the_access(
    access: AccessSubscriber, db: Database, database_url: str, stripe_fake: StripeStandIn
) -> None:
    """A refund shares its batch with another customer's change, whose account another
    transaction holds; while the claim waits on that lock, the refunded checkout commits. The
    claim looked for the purchase before the commit (and so locked no account of it) and reads
    it after: the refund must not be settled over an account it neither locked nor read."""
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com", name="Ada Lovelace")
    [other] = customers(db, "x", 1)
    stripe_fake.hold_session({"id": "cs_test_life0001", "payment_intent": "pi_ada"})
    checkout = as_event(
        stripe_event("checkout.session.completed", session(ada, price=GITHUB), created=T0)
    )
    refund = as_event(stripe_event("charge.refunded", FULL_REFUND, created=T0 + 60))
    outcome: list[list[str | Exception]] = []
    with psycopg.connect(database_url) as holder:
        holder.execute("select 1 from public.accounts where customer_id = %s for update", (other,))
        batch = [refund, event("paid", other, created=T0, event_id="evt_x1")]
        worker = threading.Thread(target=lambda: outcome.append(access.apply_many(batch)))
        worker.start()
        wait_for(partial(waiting_on_locks, db, 1))
        assert access.apply_many([checkout]) == ["granted"]
        holder.commit()
    worker.join(timeout=HANG_GUARD)
    [[waited, paid]] = outcome
    assert paid == "granted"
    assert isinstance(waited, PurchaseNotRecorded)  # its claim undone: retried, not settled
    assert refunded(db) == {"refunded": False, "has_access": True}

    assert access.apply_many([refund]) == ["refunded, access revoked"]
    assert refunded(db) == {"refunded": True, "has_access": False}


FULL_REFUND = {
    "id": "ch_ada",
    "object": "charge",
    "amount": 4900,
    "amount_refunded": 4900,
    "refunded": True,
    "currency": "usd",
    "customer": "cus_ada",
    "payment_intent": "pi_ada",
    "invoice": None,
}


def as_event(body: bytes) -> Event:
    return parse_event(json.loads(body))


def refunded(db: Database) -> dict[str, Any]:
    [row] = db.fetch_all(
        "select pu.refunded_at is not null as refunded, p.has_access from public.purchases pu"
        " join public.profiles p on p.id = pu.user_id"
    )
    return row
