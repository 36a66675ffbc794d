"""The webhook over HTTP with the in-process bus, through the access subscriber to Postgres."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import (
    HANG_GUARD,
    checkout_session_with_items,
    create_user,
    stripe_event,
    stripe_signature,
    wait_for,
)

PRICE = "price_demo_team_monthly"


def post_event(api: Api, body: bytes, **sign_kwargs: Any) -> Any:
    return api.post(
        "/api/webhook/payments",
        data=body,
        headers={
            "Stripe-Signature": stripe_signature(body, **sign_kwargs),
            "Content-Type": "application/json",
        },
    )


def profile(db: Database, user_id: str) -> dict[str, Any]:
    [row] = db.fetch_all(
        "select customer_id, price_id, has_access from public.profiles where id = %s", (user_id,)
    )
    return row


def completed(
    user_id: str | None,
    *,
    customer: str = "cus_1",
    price: str | None = PRICE,
    session: str = "cs_1",
    paid: str = "paid",
    email: str | None = None,
) -> dict[str, Any]:
    return {
        "id": session,
        "object": "checkout.session",
        "client_reference_id": user_id,
        "customer": customer,
        "subscription": "sub_1",
        "mode": "subscription",
        "metadata": {"price_id": price} if price else {},
        "payment_status": paid,
        "amount_total": 1900,
        "currency": "usd",
        "customer_details": {"email": email or "buyer@example.com", "name": "Ada"},
    }


def processed(db: Database) -> list[dict[str, Any]]:
    return db.fetch_all(
        "select event_id, outcome from public.processed_events where consumer = 'access'"
        " and outcome <> 'pending' order by processed_at"
    )


def subscription_deleted(*, created: int) -> bytes:
    subscription = {"id": "sub_7", "customer": "cus_7", "status": "canceled"}
    return stripe_event("customer.subscription.deleted", subscription, created=created)


def invoice_paid(*, created: int) -> bytes:
    invoice = {"id": "in_1", "customer": "cus_7", "subscription": "sub_7"}
    return stripe_event("invoice.paid", invoice, created=created)


def link(db: Database, user_id: str, customer_id: str) -> None:
    """The user's own account pays as `customer_id`; the profile mirrors it."""
    with db.transaction() as conn:
        for table, key in (("accounts", "owner_id"), ("profiles", "id")):
            conn.execute(
                f"update public.{table} set customer_id = %s where {key} = %s",  # noqa: S608
                (customer_id, user_id),
            )


@pytest.fixture
def buyer(db: Database) -> str:
    seed_demo_products(db)
    return create_user(db, "buyer@example.com")


def test_bad_signature_is_400_and_changes_nothing(api: Api, db: Database, buyer: str) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    response = post_event(api, body, secret="whsec_wrong")
    assert response.status_code == 400
    assert "signature" in response.json()["error"].lower()
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert profile(db, buyer)["has_access"] is False


def test_missing_signature_header_is_400(api: Api) -> None:
    response = api.post(
        "/api/webhook/payments", data=stripe_event("invoice.paid", {"customer": "c"})
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Missing Stripe-Signature header"}


def test_signature_older_than_tolerance_is_400(api: Api, buyer: str, db: Database) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    response = post_event(api, body, timestamp=int(time.time()) - 301)
    assert response.status_code == 400
    assert "tolerance" in response.json()["error"].lower()


def test_tampered_body_is_400(api: Api, buyer: str, db: Database) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    header = stripe_signature(body)
    tampered = body.replace(b'"paid"', b'"PAID"')
    response = api.post(
        "/api/webhook/payments", data=tampered, headers={"Stripe-Signature": header}
    )
    assert response.status_code == 400


def test_signed_garbage_is_400(api: Api) -> None:
    body = b"not json"
    assert post_event(api, body).status_code == 400
    assert post_event(api, b'{"id": "evt_1"}').json()["error"].startswith("Invalid event payload")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        # Deeper than any parser should follow.
        (b'{"id": ' + b"[" * 5000 + b"]" * 5000 + b"}", "Invalid event payload"),
        (b'{"id": "e", "type": "t", "created": NaN, "data": {}}', "Invalid event payload"),
        (b"[]", "Invalid event payload"),
        (b'{"id": "evt_\xff", "type": "t", "created": 1, "data": {}}', "Webhook body is not UTF-8"),
    ],
    ids=["deep", "nan", "array", "not-utf-8"],
)
def test_signed_bodies_that_are_not_events_are_400(
    api: Api, db: Database, body: bytes, error: str
) -> None:
    response = post_event(api, body)
    assert response.status_code == 400
    assert response.json()["error"].startswith(error)
    assert processed(db) == []


def test_unsubscribed_type_is_acknowledged_and_ignored(api: Api, db: Database) -> None:
    response = post_event(api, stripe_event("customer.created", {"id": "cus_1"}))
    assert response.status_code == 200
    assert response.json() == {}
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert db.fetch_all("select * from public.processed_events") == []


def test_checkout_completed_grants_and_links(api: Api, db: Database, buyer: str) -> None:
    response = post_event(api, stripe_event("checkout.session.completed", completed(buyer)))
    assert response.status_code == 200
    assert response.json() == {}
    wait_for(lambda: profile(db, buyer)["has_access"])
    assert profile(db, buyer) == {"customer_id": "cus_1", "price_id": PRICE, "has_access": True}
    [purchase] = db.fetch_all(
        "select user_id::text, amount_total, currency, stripe_checkout_session_id,"
        " product_id is not null as known from public.purchases"
    )
    assert purchase == {
        "user_id": buyer,
        "amount_total": 1900,
        "currency": "usd",
        "stripe_checkout_session_id": "cs_1",
        "known": True,
    }


def test_spec_header_name_is_accepted(api: Api, db: Database, buyer: str) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    response = api.post(
        "/api/webhook/payments", data=body, headers={"payments-signature": stripe_signature(body)}
    )
    assert response.status_code == 200
    wait_for(lambda: profile(db, buyer)["has_access"])


def test_price_comes_from_line_items_when_metadata_lacks_it(
    api: Api, db: Database, buyer: str, stripe_fake: StripeStandIn
) -> None:
    stripe_fake.hold_session(checkout_session_with_items("cs_9", PRICE))
    post_event(
        api,
        stripe_event("checkout.session.completed", completed(buyer, session="cs_9", price=None)),
    )
    wait_for(lambda: profile(db, buyer)["has_access"])
    assert profile(db, buyer)["price_id"] == PRICE
    [call] = stripe_fake.calls("GET", "/v1/checkout/sessions/cs_9")
    assert ("expand[0]", "line_items") in call.query


def test_unpaid_checkout_links_but_does_not_grant(api: Api, db: Database, buyer: str) -> None:
    post_event(api, stripe_event("checkout.session.completed", completed(buyer, paid="unpaid")))
    wait_for(lambda: processed(db))
    assert profile(db, buyer) == {"customer_id": "cus_1", "price_id": PRICE, "has_access": False}
    assert purchases_paid(db) == [False]
    post_event(
        api,
        stripe_event(
            "checkout.session.async_payment_succeeded",
            completed(buyer),
            created=int(time.time()) + 1,
        ),
    )
    wait_for(lambda: profile(db, buyer)["has_access"])
    assert purchases_paid(db) == [True]


def purchases_paid(db: Database) -> list[bool]:
    """Whether each purchase is paid: what repository access depends on."""
    return [r["paid"] for r in db.fetch_all("select paid from public.purchases")]


def test_guest_checkout_links_the_profile_with_that_email(
    api: Api, db: Database, buyer: str
) -> None:
    post_event(
        api, stripe_event("checkout.session.completed", completed(None, email="BUYER@example.com"))
    )
    wait_for(lambda: profile(db, buyer)["has_access"])


def test_invoice_paid_grants_and_deletion_revokes(api: Api, db: Database, buyer: str) -> None:
    link(db, buyer, "cus_7")
    now = int(time.time())
    post_event(api, invoice_paid(created=now - 10))
    wait_for(lambda: profile(db, buyer)["has_access"])
    post_event(api, subscription_deleted(created=now))
    wait_for(lambda: not profile(db, buyer)["has_access"])


def test_same_event_three_times_has_one_effect(api: Api, db: Database, buyer: str) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer), event_id="evt_dup")
    for _ in range(3):
        assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert profile(db, buyer)["has_access"] is True
    assert processed(db) == [{"event_id": "evt_dup", "outcome": "granted"}]
    assert len(db.fetch_all("select id from public.purchases")) == 1


def test_older_event_cannot_undo_a_newer_one(api: Api, db: Database, buyer: str) -> None:
    link(db, buyer, "cus_7")
    now = int(time.time())
    post_event(api, subscription_deleted(created=now))
    wait_for(lambda: processed(db))
    post_event(api, invoice_paid(created=now - 60))
    wait_for(lambda: len(processed(db)) == 2)
    assert profile(db, buyer)["has_access"] is False
    assert [p["outcome"] for p in processed(db)] == ["revoked", "stale"]


@pytest.mark.parametrize(("status", "expected"), [("active", True), ("canceled", False)])
def test_a_tie_is_settled_by_stripes_current_subscription_status(
    api: Api, db: Database, buyer: str, stripe_fake: StripeStandIn, status: str, expected: bool
) -> None:
    link(db, buyer, "cus_7")
    stripe_fake.subscribe("sub_7", status=status)
    now = int(time.time())
    post_event(api, subscription_deleted(created=now))
    wait_for(lambda: processed(db))
    post_event(api, invoice_paid(created=now))
    wait_for(lambda: len(processed(db)) == 2)
    assert profile(db, buyer)["has_access"] is expected
    assert stripe_fake.calls("GET", "/v1/subscriptions/sub_7")


def test_event_for_an_unlinked_customer_is_retried_until_it_links(
    api: Api, db: Database, buyer: str
) -> None:
    now = int(time.time())
    post_event(
        api,
        stripe_event(
            "invoice.paid",
            {"id": "in_1", "customer": "cus_1", "subscription": "sub_1"},
            created=now,
        ),
    )
    post_event(api, stripe_event("checkout.session.completed", completed(buyer), created=now - 1))
    wait_for(lambda: len(processed(db)) == 2)
    assert profile(db, buyer)["has_access"] is True
    assert {p["outcome"] for p in processed(db)} == {"granted"}


def profile_by_email(db: Database, email: str) -> dict[str, Any] | None:
    rows = db.fetch_all(
        "select name, customer_id, has_access from public.profiles where email = %s", (email,)
    )
    return rows[0] if rows else None


def test_a_guest_buyer_without_an_account_gets_one_with_access(api: Api, db: Database) -> None:
    seed_demo_products(db)
    post_event(
        api, stripe_event("checkout.session.completed", completed(None, email="new@example.com"))
    )
    wait_for(lambda: (profile_by_email(db, "new@example.com") or {}).get("has_access"))
    assert profile_by_email(db, "new@example.com") == {
        "name": "Ada",
        "customer_id": "cus_1",
        "has_access": True,
    }


def test_a_guest_buyer_gets_an_account_and_a_sign_in_link_in_our_own_email(
    api_factory: Any, db: Database, supabase_fake: Any
) -> None:
    seed_demo_products(db)
    api = api_factory(
        supabase_secret_key="service-role-key",
        site_url="https://app.example.com",
        email_from_noreply="Acme <noreply@acme.example>",
    )
    body = stripe_event("checkout.session.completed", completed(None, email="guest@example.com"))
    post_event(api, body)
    post_event(api, body)
    wait_for(lambda: (profile_by_email(db, "guest@example.com") or {}).get("has_access"))
    assert api.container.bus.wait_idle(HANG_GUARD)
    # Two deliveries racing may both create; Supabase refuses the second, one user results.
    assert len(db.fetch_all("select id from auth.users where email = 'guest@example.com'")) == 1
    created = supabase_fake.calls("POST", "/auth/v1/admin/users")[0]
    assert created.json() == {
        "email": "guest@example.com",
        "email_confirm": True,
        "user_metadata": {"full_name": "Ada"},
    }
    assert created.headers["Apikey"] == "service-role-key"
    # Supabase's own mailer is never asked: no invite, no OTP mail.
    assert supabase_fake.calls("POST", "/auth/v1/invite") == []
    assert supabase_fake.calls("POST", "/auth/v1/otp") == []
    [link_call] = supabase_fake.calls("POST", "/auth/v1/admin/generate_link")
    assert link_call.json()["type"] == "magiclink"
    assert link_call.query == [("redirect_to", "https://app.example.com/dashboard")]
    [signin] = [m for m in outbox(api) if m["Subject"].startswith("Sign in to")]
    assert signin["From"] == "Acme <noreply@acme.example>"
    assert signin["To"] == "guest@example.com"
    assert supabase_fake.links == [supabase_fake.links[0]]
    assert supabase_fake.links[0] in text_of(signin)


def test_the_sign_in_mail_says_until_when_the_link_works(
    api_factory: Any, db: Database, supabase_fake: Any
) -> None:
    seed_demo_products(db)
    api = api_factory(supabase_secret_key="service-role-key", signin_link_lifetime_seconds=1800)
    before = datetime.now(UTC)
    post_event(
        api, stripe_event("checkout.session.completed", completed(None, email="g@example.com"))
    )
    assert api.container.bus.wait_idle(HANG_GUARD)
    after = datetime.now(UTC)
    [signin] = [m for m in outbox(api) if m["Subject"].startswith("Sign in to")]
    found = re.search(
        r"once, until (\d\d:\d\d) UTC on (\w+ \d+, \d{4})", " ".join(text_of(signin).split())
    )
    assert found is not None
    until = datetime.strptime(f"{found[1]} {found[2]}", "%H:%M %B %d, %Y").replace(tzinfo=UTC)
    # To the minute, half an hour after the link was made.
    assert before + timedelta(minutes=29) <= until <= after + timedelta(minutes=30)
    assert "expires soon" not in text_of(signin)


def test_a_local_sign_in_page_is_not_said_to_expire(api: Any, db: Database) -> None:
    seed_demo_products(db)
    post_event(
        api, stripe_event("checkout.session.completed", completed(None, email="l@example.com"))
    )
    assert api.container.bus.wait_idle(HANG_GUARD)
    [signin] = [m for m in outbox(api) if m["Subject"].startswith("Sign in to")]
    assert "signs you in once." in " ".join(text_of(signin).split())
    assert " until " not in text_of(signin)
