"""A Stripe customer belongs to one account, for good: a stranger who types a customer's e-mail
address on Stripe's page (nobody verifies it) may give them a product, never move their billing
link. Each attack is replayed as it was shown: signed events through the webhook, the real
routes over HTTP, the access cycle and Postgres as deployed."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import MONTHLY, ONE_TIME, post_event, settle
from tests.conftest import Api
from tests.helpers import create_user, stripe_event

NOW = int(time.time())


def checkout(
    session: str,
    *,
    user: str | None,
    customer: str,
    email: str,
    price: str = MONTHLY,
    subscription: str | None = None,
) -> dict[str, Any]:
    """A paid Checkout Session as Stripe's `checkout.session.completed` carries it: a signed-in
    buyer's names them (`client_reference_id`), a guest's only the address they typed."""
    return {
        "id": session,
        "object": "checkout.session",
        "client_reference_id": user,
        "customer": customer,
        "subscription": subscription,
        "mode": "subscription" if subscription else "payment",
        "metadata": {"price_id": price, **({"user_id": user} if user else {})},
        "payment_status": "paid",
        "amount_total": 1900,
        "currency": "usd",
        "created": NOW - 60,
        "customer_details": {"email": email, "name": "Whoever Typed This"},
    }


def ended(subscription: str, customer: str, *, created: int) -> bytes:
    return stripe_event(
        "customer.subscription.deleted",
        {
            "id": subscription,
            "object": "subscription",
            "customer": customer,
            "status": "canceled",
            "ended_at": created,
            "items": {"object": "list", "data": [{"price": {"id": MONTHLY}}]},
        },
        created=created,
    )


def send(api: Api, body: bytes) -> None:
    post_event(api, body)
    settle(api)


def account_of(db: Database, user: str) -> dict[str, Any]:
    [row] = db.fetch_all(
        "select a.id::text, a.customer_id, p.customer_id as mirrored, a.has_access"
        " from public.accounts a join public.profiles p on p.id = a.owner_id"
        " where a.owner_id = %s and a.kind = 'personal'",
        (user,),
    )
    return row


def customers_of(db: Database, account: str) -> list[str]:
    rows = db.fetch_all(
        "select customer_id from public.stripe_customers where account_id = %s"
        " order by customer_id",
        (account,),
    )
    return [r["customer_id"] for r in rows]


def grant(db: Database, source: str) -> dict[str, Any] | None:
    rows = db.fetch_all(
        "select account_id::text, active from public.entitlements where source_id = %s", (source,)
    )
    return rows[0] if rows else None


def outcome(db: Database, event_type: str) -> str:
    [row] = db.fetch_all(
        "select outcome from public.processed_events where consumer = 'access'"
        " and event_type = %s order by processed_at desc limit 1",
        (event_type,),
    )
    return str(row["outcome"])


@pytest.fixture
def victim(api: Api, db: Database) -> str:
    """A subscriber who bought signed in: their account pays as cus_victim."""
    seed_demo_products(db)
    user = create_user(db, "victim@example.com", name="Victor")
    paid = checkout(
        "cs_test_victim",
        user=user,
        customer="cus_victim",
        email="victim@example.com",
        subscription="sub_victim",
    )
    send(api, stripe_event("checkout.session.completed", paid, created=NOW - 50))
    assert account_of(db, user)["customer_id"] == "cus_victim"
    assert grant(db, "sub_victim") == {"account_id": account_of(db, user)["id"], "active": True}
    return user


def test_a_guest_purchase_under_a_customers_address_leaves_their_link_and_cancellation_alone(
    api: Api, db: Database, fakes: tuple[StripeStandIn, Any], victim: str
) -> None:
    guest = checkout(
        "cs_test_stranger", user=None, customer="cus_stranger", email="VICTIM@example.com",
        price=ONE_TIME,
    )  # fmt: skip
    send(api, stripe_event("checkout.session.completed", guest, created=NOW - 40))

    account = account_of(db, victim)
    # The product may go to the address (its sign-in link goes to that mailbox) ...
    assert grant(db, "cs_test_stranger") == {"account_id": account["id"], "active": True}
    # ... but the billing link stays, in the account and in the profile that mirrors it.
    assert (account["customer_id"], account["mirrored"]) == ("cus_victim", "cus_victim")
    assert customers_of(db, account["id"]) == ["cus_stranger", "cus_victim"]

    # The victim's own cancellation reaches their account and ends their subscription.
    send(api, ended("sub_victim", "cus_victim", created=NOW - 30))
    assert outcome(db, "customer.subscription.deleted") == "revoked"
    assert grant(db, "sub_victim") == {"account_id": account["id"], "active": False}
    assert api.container.bus.dead_letters == []  # type: ignore[attr-defined]

    # Their portal opens their own customer, not the stranger's.
    token = api.token(sub=victim, email="victim@example.com")
    portal = api.post(
        "/api/payments/create-portal",
        json={"returnUrl": "https://app.example.com/dashboard"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert portal.status_code == 200, portal.text
    [call] = fakes[0].calls("POST", "/v1/billing_portal/sessions")
    assert call.form()["customer"] == "cus_victim"


def test_a_subscriber_buying_again_as_a_guest_still_loses_access_when_both_end(
    api: Api, db: Database, victim: str
) -> None:
    """A subscriber who also buys as a guest (a second customer) cannot keep access by it:
    events of every customer of the account reach it."""
    again = checkout(
        "cs_test_again", user=None, customer="cus_second", email="victim@example.com",
        subscription="sub_second",
    )  # fmt: skip
    send(api, stripe_event("checkout.session.completed", again, created=NOW - 40))
    assert account_of(db, victim)["customer_id"] == "cus_victim"

    send(api, ended("sub_victim", "cus_victim", created=NOW - 30))
    assert account_of(db, victim)["has_access"] is True  # the second subscription still runs
    send(api, ended("sub_second", "cus_second", created=NOW - 20))
    assert account_of(db, victim)["has_access"] is False
    assert grant(db, "sub_second") is not None
    assert api.container.bus.dead_letters == []  # type: ignore[attr-defined]


def test_a_guest_paying_as_someone_elses_customer_pays_for_that_customers_account(
    api: Api, db: Database, victim: str
) -> None:
    """A customer is its account's whatever address is typed beside it: the purchase goes to the
    account the customer belongs to, and the victim's account is untouched."""
    attacker = create_user(db, "mallory@example.com")
    own = checkout(
        "cs_test_mallory", user=attacker, customer="cus_mallory", email="mallory@example.com",
        price=ONE_TIME,
    )  # fmt: skip
    send(api, stripe_event("checkout.session.completed", own, created=NOW - 45))
    typed = checkout(
        "cs_test_typed", user=None, customer="cus_mallory", email="victim@example.com",
        price=ONE_TIME,
    )  # fmt: skip
    send(api, stripe_event("checkout.session.completed", typed, created=NOW - 40))

    mallory, victims = account_of(db, attacker), account_of(db, victim)
    assert grant(db, "cs_test_typed") == {"account_id": mallory["id"], "active": True}
    assert customers_of(db, victims["id"]) == ["cus_victim"]
    assert customers_of(db, mallory["id"]) == ["cus_mallory"]


def test_postgres_never_moves_a_customer_to_another_account(db: Database, victim: str) -> None:
    """Whatever writes it (an event, an operator's SQL): a customer that belongs to an account
    stays there, and no other account can make it its billing customer."""
    victims, other = account_of(db, victim)["id"], create_user(db, "other@example.com")
    with db.transaction() as conn:  # a second customer of the victim's, not their billing one
        conn.execute(
            "insert into public.stripe_customers (customer_id, account_id) values ('cus_b', %s)",
            (victims,),
        )
    for customer in ("cus_victim", "cus_b"):
        with pytest.raises(psycopg.errors.IntegrityError), db.transaction() as conn:
            conn.execute(
                "update public.accounts set customer_id = %s where owner_id = %s",
                (customer, other),
            )
    with db.transaction() as conn:
        conn.execute(
            "insert into public.stripe_customers (customer_id, account_id)"
            " select 'cus_victim', id from public.accounts where owner_id = %s"
            " on conflict (customer_id) do nothing",
            (other,),
        )
    assert customers_of(db, victims) == ["cus_b", "cus_victim"]
