"""A team that pays, end to end over HTTP with Stripe's signed events: its owner buys 3 seats,
two invited colleagues accept and have access, a fourth invitation is refused, removing a
member ends their access at once, fewer seats (from the period's end) leave the newest member
without access (and tell them), more seats give it back, and the subscription's end takes the
team's access from every member while their own purchases stay."""

from __future__ import annotations

import time
from typing import Any

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import ONE_TIME, post_event, session, settle
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import stripe_event
from tests.teams.test_routes import Person, join, new_team

SEAT_PRICE = "price_team_seat_monthly"
T0 = 1_790_000_000


def seat_product(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, per_seat, features) values ('Team plan', 12, %s, 'link',"
            " 'subscription', 'month', true, '{pro}')",
            (SEAT_PRICE,),
        )


def team_subscription(quantity: int, *, status: str = "active") -> dict[str, Any]:
    return {
        "id": "sub_team",
        "object": "subscription",
        "customer": "cus_team",
        "status": status,
        "cancel_at_period_end": False,
        "current_period_end": 1798675200,
        "items": {
            "object": "list",
            "data": [{"id": "si_sub_team", "price": {"id": SEAT_PRICE}, "quantity": quantity}],
        },
    }


def team_checkout(owner: str, team: str) -> dict[str, Any]:
    return {
        "id": "cs_test_team0001",
        "object": "checkout.session",
        "client_reference_id": owner,
        "customer": "cus_team",
        "subscription": "sub_team",
        "mode": "subscription",
        "metadata": {"price_id": SEAT_PRICE, "user_id": owner, "team_id": team},
        "payment_status": "paid",
        "amount_total": 3600,
        "currency": "usd",
        "created": int(time.time()),
        "customer_details": {"email": "ada@example.com", "name": "Ada Lovelace"},
    }


def access(db: Database, person: Person) -> bool:
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (person.id,))
    return bool(row["has_access"])


def test_a_team_buys_seats_and_its_members_share_the_access(
    api: Api, db: Database, stripe_fake: StripeStandIn
) -> None:
    seed_demo_products(db)
    seat_product(db)
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    grace, bob = Person(api, db, "grace@example.com"), Person(api, db, "bob@example.com")

    bought = ada.call(
        "POST",
        "/api/payments/create-checkout",
        {
            "priceId": SEAT_PRICE,
            "mode": "subscription",
            "successUrl": "https://app.example.com/ok",
            "cancelUrl": "https://app.example.com/no",
            "teamId": team,
            "quantity": 3,
        },
    )
    assert bought.status_code == 200, bought.text
    [params] = stripe_fake.checkout_params()
    assert params["line_items"] == [
        {
            "price": SEAT_PRICE,
            "quantity": "3",
            "adjustable_quantity": {"enabled": "true", "minimum": "1", "maximum": "10000"},
        }
    ]
    assert params["metadata"]["team_id"] == team
    assert (
        grace.call(  # not a member: the team does not exist for them
            "POST",
            "/api/payments/create-checkout",
            {
                **{"priceId": SEAT_PRICE, "mode": "subscription", "teamId": team},
                "successUrl": "https://app.example.com/ok",
                "cancelUrl": "https://app.example.com/no",
            },
        ).status_code
        == 404
    )

    post_event(
        api, stripe_event("checkout.session.completed", team_checkout(ada.id, team), created=T0)
    )
    post_event(
        api, stripe_event("customer.subscription.created", team_subscription(3), created=T0 + 1)
    )
    settle(api)
    assert access(db, ada)
    assert ada.call("GET", f"/api/teams/{team}").json()["seats"] == {"total": 3, "used": 1}

    join(api, team, ada, grace)
    join(api, team, ada, bob)
    assert access(db, grace)
    assert access(db, bob)
    me = grace.call("GET", "/api/me").json()
    assert me["hasAccess"] is True
    assert me["teams"] == [
        {
            "id": team,
            "name": "Analytical Engines",
            "role": "member",
            "hasAccess": True,
            "hasSeat": True,
        }
    ]
    assert [(e["teamId"], e["priceId"]) for e in me["entitlements"]] == [(team, SEAT_PRICE)]
    # The team plan's features are a seated member's too.
    assert me["features"] == ["pro"]

    fourth = ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "carl@example.com", "role": "member"}
    )
    assert fourth.status_code == 409
    assert "All 3 seats" in fourth.json()["error"]
    assert "/api/" not in fourth.json()["error"]

    # Removing a member ends their access at once; their seat is free again.
    assert ada.call("DELETE", f"/api/teams/{team}/members/{bob.id}").status_code == 204
    assert not access(db, bob)
    assert bob.call("GET", "/api/me").json()["entitlements"] == []
    assert bob.call("GET", "/api/me").json()["features"] == []
    join(api, team, ada, bob)
    assert access(db, bob)

    # Fewer seats: Stripe is asked to change them at the period's end (a schedule), and until
    # then every member keeps their seat.
    stripe_fake.subscribe("sub_team", quantity=3)
    lowered = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 2})
    assert lowered.status_code == 200, lowered.text
    assert lowered.json() == {"total": 3, "used": 3}
    assert stripe_fake.calls("POST", "/v1/subscriptions/sub_team") == []
    [schedule] = stripe_fake.schedules.values()
    assert schedule["subscription"] == "sub_team"
    assert [p["items"][0]["quantity"] for p in schedule["phases"]] == [3, 2]
    assert access(db, bob)
    # The period ends: Stripe's schedule starts the next phase with 2 seats, and the newest
    # member loses theirs and is told.
    post_event(
        api, stripe_event("customer.subscription.updated", team_subscription(2), created=T0 + 45)
    )
    settle(api)
    assert access(db, grace)
    assert not access(db, bob)
    seats = {
        m["userId"]: m["hasSeat"] for m in ada.call("GET", f"/api/teams/{team}").json()["members"]
    }
    assert seats == {ada.id: True, grace.id: True, bob.id: False}
    [lost] = [m for m in outbox(api) if m["To"] == "bob@example.com" and "ended" in m["Subject"]]
    assert "now has 2 seats" in text_of(lost)
    # Stripe's event says the same quantity: nothing changes.
    post_event(
        api, stripe_event("customer.subscription.updated", team_subscription(2), created=T0 + 50)
    )
    settle(api)
    assert not access(db, bob)

    # More seats in the portal: Stripe's event gives the seat back.
    post_event(
        api, stripe_event("customer.subscription.updated", team_subscription(3), created=T0 + 60)
    )
    settle(api)
    assert access(db, bob)

    # Grace buys something herself; the team's subscription ends: only her own access stays.
    own = session(
        grace.id,
        price=ONE_TIME,
        id="cs_test_grace",
        customer="cus_grace",
        payment_intent="pi_grace",
        customer_details={"email": "grace@example.com"},
    )
    post_event(api, stripe_event("checkout.session.completed", own, created=T0 + 70))
    ended = team_subscription(3, status="canceled")
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=T0 + 80))
    settle(api)
    assert not access(db, ada)
    assert not access(db, bob)
    assert access(db, grace)
    assert grace.call("GET", "/api/me").json()["teams"][0]["hasAccess"] is False
