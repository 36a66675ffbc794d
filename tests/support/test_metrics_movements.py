"""The revenue metrics over HTTP: MRR movements per currency and cancellation reasons, recorded
as signed subscription events are applied, read by an admin from `GET /api/admin/metrics`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.access.lifecycle_helpers import MONTHLY, ONE_TIME, link, post_event, session, settle
from tests.conftest import Api
from tests.helpers import create_user, stripe_event, wait_for
from tests.support.test_routes import REASON, bearer, call, make_admin, token
from tests.teams.test_routes import Person, join, new_team
from tests.teams.test_team_billing import seat_product, team_checkout, team_subscription

DAY = 86400
# A price the catalogue does not know, as Stripe's events carry it (the amount comes with it).
PLUS = {
    "id": "price_team_plus",
    "object": "price",
    "unit_amount": 2900,
    "currency": "usd",
    "recurring": {"interval": "month", "interval_count": 1},
}
YEARLY_EUR = {
    "id": "price_team_yearly_eur",
    "object": "price",
    "unit_amount": 24000,
    "currency": "eur",
    "recurring": {"interval": "year", "interval_count": 1},
}


def sub(
    sub_id: str,
    customer: str,
    *,
    price: dict[str, Any] | str = MONTHLY,
    quantity: int = 1,
    status: str = "active",
    **extra: Any,
) -> dict[str, Any]:
    """A subscription as Stripe's events carry it; a price named by id only is read from the
    catalogue."""
    shown = {"id": price} if isinstance(price, str) else price
    return {
        "id": sub_id,
        "object": "subscription",
        "customer": customer,
        "status": status,
        "cancel_at_period_end": False,
        "current_period_end": int(time.time()) + 20 * DAY,
        "items": {
            "object": "list",
            "data": [{"id": f"si_{sub_id}", "price": shown, "quantity": quantity}],
        },
        **extra,
    }


def customer(db: Database, name: str) -> str:
    user = create_user(db, f"{name}@example.com")
    link(db, user, f"cus_{name}")
    return user


def metrics(api: Api, admin: str) -> dict[str, Any]:
    answer = api.get("/api/admin/metrics", headers=bearer(token(api, admin, "founder@example.com")))
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def send(api: Api, kind: str, obj: dict[str, Any], at: int, **extra: Any) -> bytes:
    body = stripe_event(f"customer.subscription.{kind}", obj, created=at, **extra)
    post_event(api, body)
    settle(api)
    assert api.container.bus.dead_letters == []  # type: ignore[attr-defined]
    return body


def movements(answer: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {m.pop("currency"): m for m in answer["mrrMovements"]}


def test_a_subscriptions_life_moves_mrr_once_per_event(api: Api, db: Database) -> None:
    seed_demo_products(db)
    admin = make_admin(db)
    customer(db, "ada")
    t = int(time.time()) - 3600
    # Started paying: the catalogue's monthly price, its amount read from the catalogue.
    send(api, "created", sub("sub_ada", "cus_ada"), t)
    assert movements(metrics(api, admin)) == {
        "usd": {"new": 1900, "expansion": 0, "contraction": 0, "churn": 0, "net": 1900}
    }
    # An upgrade: the price changed (its previous item said so).
    upgrade = send(
        api,
        "updated",
        sub("sub_ada", "cus_ada", price=PLUS),
        t + 10,
        previous={"items": sub("sub_ada", "cus_ada")["items"]},
    )
    # More seats, then fewer, then a coupon of half.
    send(api, "updated", sub("sub_ada", "cus_ada", price=PLUS, quantity=3), t + 20)
    send(api, "updated", sub("sub_ada", "cus_ada", price=PLUS, quantity=2), t + 30)
    half = {"object": "discount", "coupon": {"object": "coupon", "percent_off": 50}}
    send(api, "updated", sub("sub_ada", "cus_ada", price=PLUS, quantity=2, discount=half), t + 40)
    # The upgrade delivered again (Stripe's retry, the same event): counted once.
    post_event(api, upgrade)
    settle(api)
    assert movements(metrics(api, admin)) == {
        "usd": {"new": 1900, "expansion": 1000 + 5800, "contraction": -2900 - 2900, "churn": 0,
                "net": 1900 + 1000 + 5800 - 5800}
    }  # fmt: skip
    # Set to cancel at the period's end, with feedback and a comment: MRR stays until it ends.
    details = {"feedback": "too_expensive", "comment": "Too dear for us", "reason": None}
    cancelling = sub(
        "sub_ada", "cus_ada", price=PLUS, quantity=2, discount=half,
        cancel_at_period_end=True, cancellation_details=details,
    )  # fmt: skip
    send(api, "updated", cancelling, t + 50)
    answer = metrics(api, admin)
    assert answer["cancellationReasons"] == [
        {"reason": "too_expensive", "count": 1, "withComment": 1}
    ]
    assert movements(answer)["usd"]["churn"] == 0
    # It ends: its MRR churns; the cancellation is the same one, counted once.
    ended = {**cancelling, "status": "canceled", "ended_at": t + 60}
    send(api, "deleted", ended, t + 60)
    answer = metrics(api, admin)
    assert movements(answer) == {
        "usd": {"new": 1900, "expansion": 6800, "contraction": -5800, "churn": -2900, "net": 0}
    }
    assert answer["cancellationReasons"] == [
        {"reason": "too_expensive", "count": 1, "withComment": 1}
    ]
    # What was there before stays as it was.
    assert (answer["mrr"], answer["activeSubscriptions"]) == ({}, 0)
    assert answer["churnedLast30Days"] == 1
    rows = db.fetch_all("select kind, delta from public.mrr_movements order by at")
    assert [(r["kind"], r["delta"]) for r in rows] == [
        ("new", 1900), ("expansion", 1000), ("expansion", 5800), ("contraction", -2900),
        ("contraction", -2900), ("churn", -2900),
    ]  # fmt: skip


def test_late_and_old_events_move_nothing_they_should_not(api: Api, db: Database) -> None:
    seed_demo_products(db)
    admin = make_admin(db)
    for name in ("bob", "carl", "dora"):
        customer(db, name)
    now = int(time.time())
    # Out of order: the update (two seats) arrives before the creation (one seat), which is
    # older and moves nothing: the subscription started paying for two seats.
    send(api, "updated", sub("sub_carl", "cus_carl", quantity=2), now - 100)
    send(api, "created", sub("sub_carl", "cus_carl"), now - 200)
    # An invoice newer than an upgrade, delivered first, does not make the upgrade stale.
    send(api, "created", sub("sub_dora", "cus_dora"), now - 300)
    invoice = {
        "id": "in_dora", "object": "invoice", "customer": "cus_dora", "subscription": "sub_dora",
        "billing_reason": "subscription_update", "status": "paid",
    }  # fmt: skip
    post_event(api, stripe_event("invoice.paid", invoice, created=now - 50))
    settle(api)
    send(api, "updated", sub("sub_dora", "cus_dora", price=PLUS), now - 60)
    # Same state again under a new event id (an update of something else): no movement.
    send(api, "updated", sub("sub_dora", "cus_dora", price=PLUS), now - 40)
    # Bob's subscription began and grew more than 30 days ago: not in the window.
    send(api, "created", sub("sub_bob", "cus_bob"), now - 40 * DAY)
    send(api, "updated", sub("sub_bob", "cus_bob", quantity=4), now - 35 * DAY)
    # A euro price billed yearly: its MRR is a twelfth, in its own currency.
    customer(db, "emil")
    send(api, "created", sub("sub_emil", "cus_emil", price=YEARLY_EUR), now - 30)
    assert movements(metrics(api, admin)) == {
        "eur": {"new": 2000, "expansion": 0, "contraction": 0, "churn": 0, "net": 2000},
        "usd": {"new": 3800 + 1900, "expansion": 1000, "contraction": 0, "churn": 0,
                "net": 3800 + 1900 + 1000},
    }  # fmt: skip
    # Bob's older movements are recorded, just not in the window; his churn today is.
    send(api, "deleted", sub("sub_bob", "cus_bob", quantity=4, status="canceled"), now - 20)
    answer = metrics(api, admin)
    assert movements(answer)["usd"]["churn"] == -7600
    # Ended by Stripe (no customer feedback): a cancellation without a reason given.
    assert answer["cancellationReasons"] == [{"reason": None, "count": 1, "withComment": 0}]


def test_a_trial_pays_nothing_until_it_converts_and_other_grants_move_nothing(
    api: Api, db: Database
) -> None:
    seed_demo_products(db)
    admin = make_admin(db)
    fay = customer(db, "fay")
    customer(db, "gus")
    now = int(time.time())
    send(api, "created", sub("sub_fay", "cus_fay", status="trialing"), now - 500)
    assert metrics(api, admin)["mrrMovements"] == []
    # A trial cancelled during it: a cancellation, no revenue lost.
    trial = sub("sub_gus", "cus_gus", status="trialing")
    send(api, "created", trial, now - 450)
    left = {"feedback": "unused", "comment": "", "reason": "cancellation_requested"}
    gone = {**trial, "status": "canceled", "cancellation_details": left}
    send(api, "deleted", gone, now - 400)
    answer = metrics(api, admin)
    assert answer["mrrMovements"] == []
    assert answer["cancellationReasons"] == [{"reason": "unused", "count": 1, "withComment": 0}]
    # The trial converts: now it pays.
    send(api, "updated", sub("sub_fay", "cus_fay"), now - 300)
    assert movements(metrics(api, admin))["usd"] == {
        "new": 1900, "expansion": 0, "contraction": 0, "churn": 0, "net": 1900
    }  # fmt: skip
    # A pack bought once and a comp given: access, not recurring revenue.
    pack = session(
        fay, price=ONE_TIME, id="cs_fay_pack", customer="cus_fay", payment_intent="pi_fay"
    )
    post_event(api, stripe_event("checkout.session.completed", pack))
    settle(api)
    comp = call(
        api, "POST", f"/api/admin/customers/{fay}/grants",
        json={"reason": REASON, "priceId": MONTHLY, "until": None},
        headers=bearer(token(api, admin, "founder@example.com")),
    )  # fmt: skip
    assert comp.status_code == 201, comp.text
    assert movements(metrics(api, admin))["usd"]["net"] == 1900
    assert db.fetch_all("select count(*) as n from public.mrr_movements")[0]["n"] == 1


def test_a_withdrawn_cancellation_is_no_longer_counted(api: Api, db: Database) -> None:
    seed_demo_products(db)
    admin = make_admin(db)
    customer(db, "hal")
    now = int(time.time())
    send(api, "created", sub("sub_hal", "cus_hal"), now - 300)
    details = {"feedback": "missing_features", "comment": None, "reason": "cancellation_requested"}
    send(
        api, "updated",
        sub("sub_hal", "cus_hal", cancel_at_period_end=True, cancellation_details=details),
        now - 200,
    )  # fmt: skip
    assert metrics(api, admin)["cancellationReasons"] == [
        {"reason": "missing_features", "count": 1, "withComment": 0}
    ]
    send(api, "updated", sub("sub_hal", "cus_hal"), now - 100)
    assert metrics(api, admin)["cancellationReasons"] == []


def test_strangers_and_members_without_the_admin_role_read_no_metrics(
    api: Api, db: Database
) -> None:
    member = create_user(db, "ivy@example.com")
    for headers in ({}, bearer(token(api, member, "ivy@example.com"))):
        refused = api.get("/api/admin/metrics", headers=headers)
        assert refused.status_code == 404
        assert "mrrMovements" not in refused.text


def test_subscriptions_paying_at_the_migration_start_from_their_mrr(api: Api, db: Database) -> None:
    """The migration's baseline: a subscription paying before the tables were made moves from
    its MRR on its next event, and is not counted as new then."""
    seed_demo_products(db)
    admin = make_admin(db)
    customer(db, "kim")
    now = int(time.time())
    send(api, "created", sub("sub_kim", "cus_kim"), now - 300)
    with db.transaction() as conn:  # as it stood before the tables
        conn.execute("delete from public.mrr_levels")
        conn.execute("delete from public.mrr_movements")
    migrations = Path(__file__).resolve().parents[2] / "supabase" / "migrations"
    migration = (migrations / "20261216000000_revenue_metrics.sql").read_text()
    baseline = migration[migration.index("insert into public.mrr_levels") :]
    with db.transaction() as conn:
        conn.execute(baseline)
    [level] = db.fetch_all("select currency, amount, event_id from public.mrr_levels")
    assert (level["currency"], level["amount"], level["event_id"]) == ("usd", 1900, "baseline")
    send(api, "updated", sub("sub_kim", "cus_kim", quantity=2), now - 200)
    assert movements(metrics(api, admin))["usd"] == {
        "new": 0, "expansion": 1900, "contraction": 0, "churn": 0, "net": 1900
    }  # fmt: skip


def test_a_level_written_while_the_cycle_waited_for_the_account_is_moved_from(
    api: Api, db: Database
) -> None:
    """Another transaction holding the account (another batch of its events) writes the
    subscription's MRR; the cycle, waiting for that lock, reads the level once it has it: the
    movement is from that level, not from a snapshot taken before the wait."""
    seed_demo_products(db)
    admin = make_admin(db)
    lea = customer(db, "lea")
    now = int(time.time())
    waiting = (
        "select count(*) as n from pg_stat_activity where wait_event_type = 'Lock'"
        " and datname = current_database()"
    )
    with db.transaction() as conn:
        conn.execute(
            "select 1 from public.accounts where owner_id = %s and kind = 'personal' for update",
            (lea,),
        )
        conn.execute(
            "insert into public.mrr_levels (subscription_id, account_id, currency, amount, at,"
            " rank, event_id) values ('sub_lea', null, 'usd', 1900, to_timestamp(%s), 0,"
            " 'evt_other')",
            (now - 300,),
        )
        body = stripe_event(
            "customer.subscription.updated", sub("sub_lea", "cus_lea", quantity=3), created=now
        )
        post_event(api, body)
        wait_for(lambda: db.fetch_all(waiting)[0]["n"] > 0)
    settle(api)
    assert movements(metrics(api, admin))["usd"] == {
        "new": 0, "expansion": 3800, "contraction": 0, "churn": 0, "net": 3800
    }  # fmt: skip


def test_a_teams_seats_move_mrr_and_a_seat_given_moves_nothing(api: Api, db: Database) -> None:
    """A per-seat team plan whose price the catalogue keeps without a currency (synced before
    prices kept one): its currency is its purchase's, as `mrr` reads it. Seats bought and sold
    back in Stripe move MRR; a seat an owner gives a member is access, not revenue. The net
    equals the MRR the metrics count from the local state."""
    seat_product(db)
    admin = make_admin(db)
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    now = int(time.time())
    checkout = {**team_checkout(ada.id, team), "created": now - 100}
    post_event(api, stripe_event("checkout.session.completed", checkout, created=now - 100))
    send(api, "created", team_subscription(3), now - 90)
    join(api, team, ada, Person(api, db, "grace@example.com"))
    assert movements(metrics(api, admin))["usd"]["new"] == 3600
    send(api, "updated", team_subscription(2), now - 80)
    answer = metrics(api, admin)
    assert movements(answer) == {
        "usd": {"new": 3600, "expansion": 0, "contraction": -1200, "churn": 0, "net": 2400}
    }
    assert answer["mrr"] == {"usd": "24.00"}
