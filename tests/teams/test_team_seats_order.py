"""A team's seats when Stripe's events come out of order, over HTTP with signed events: the
newest quantity wins whenever it arrives, and a renewal delivered before its subscription's
checkout still leaves a per-seat subscription (its price told by the late checkout)."""

from __future__ import annotations

from typing import Any

from adapters.db.pool import Database
from tests.access.lifecycle_helpers import post_event, settle
from tests.conftest import Api
from tests.helpers import stripe_event
from tests.teams.test_routes import Person, new_team
from tests.teams.test_team_billing import SEAT_PRICE, T0, seat_product, team_subscription


def deliver(api: Api, event_type: str, obj: dict[str, Any], *, created: int) -> None:
    post_event(api, stripe_event(event_type, obj, created=created))
    settle(api)


def checkout(owner: Person, team: str, subscription: str) -> dict[str, Any]:
    return {
        "id": f"cs_test_{subscription}",
        "object": "checkout.session",
        "client_reference_id": owner.id,
        "customer": "cus_team",
        "subscription": subscription,
        "mode": "subscription",
        "metadata": {"price_id": SEAT_PRICE, "user_id": owner.id, "team_id": team},
        "payment_status": "paid",
        "amount_total": 3600,
        "currency": "usd",
        "created": T0,
        "customer_details": {"email": owner.email, "name": None},
    }


def renewal(subscription: str, *, created: int) -> dict[str, Any]:
    return {
        "id": f"in_{created}",
        "object": "invoice",
        "customer": "cus_team",
        "subscription": subscription,
        "billing_reason": "subscription_cycle",
        "status": "paid",
        "lines": {"object": "list", "data": [{"period": {"start": created, "end": created + 1}}]},
    }


def test_the_newest_quantity_sets_the_seats_whatever_arrives_first(api: Api, db: Database) -> None:
    seat_product(db)
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)

    def seats() -> Any:
        return ada.call("GET", f"/api/teams/{team}").json()["seats"]

    deliver(api, "checkout.session.completed", checkout(ada, team, "sub_team"), created=T0)
    assert seats() == {"total": 1, "used": 1}  # no quantity from Stripe yet
    ended = team_subscription(1, status="canceled")
    deliver(api, "customer.subscription.deleted", ended, created=T0 + 5)
    assert seats() is None

    # A new subscription's renewal comes before its checkout: the grant it makes names no
    # price; the checkout, older, changes no access but tells the price: sold per seat.
    deliver(api, "invoice.paid", renewal("sub_new", created=T0 + 30), created=T0 + 30)
    deliver(api, "checkout.session.completed", checkout(ada, team, "sub_new"), created=T0 + 20)
    assert seats() == {"total": 1, "used": 1}

    # A quantity older than the renewal, but the newest Stripe sent, sets the seats; an older
    # one, delivered after it, changes nothing.
    newer = {**team_subscription(4), "id": "sub_new"}
    deliver(api, "customer.subscription.updated", newer, created=T0 + 25)
    assert seats() == {"total": 4, "used": 1}
    older = {**team_subscription(2), "id": "sub_new"}
    deliver(api, "customer.subscription.updated", older, created=T0 + 22)
    assert seats() == {"total": 4, "used": 1}
