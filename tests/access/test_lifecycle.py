"""A customer's life through the webhook, the in-process bus and Postgres: plan changes,
cancellations told truthfully, complete confirmations, and no e-mail before its access."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from adapters.db.pool import Database
from dev import stripe_shapes as shapes
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import (
    GITHUB,
    MONTHLY,
    ONE_TIME,
    link,
    post_event,
    profile,
    session,
    settle,
    subscription,
)
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import create_user, stripe_event, wait_for

YEARLY = "price_team_yearly"


@pytest.fixture
def ada(db: Database) -> str:
    seed_demo_products(db)
    user = create_user(db, "ada@example.com", name="Ada Lovelace")
    link(db, user, "cus_ada", access=True)
    return user


def test_an_upgrade_moves_the_plan_and_an_older_event_cannot_undo_it(
    api: Api, db: Database, ada: str
) -> None:
    now = int(time.time())
    post_event(api, stripe_event("customer.subscription.updated", subscription(), created=now))
    post_event(
        api,
        stripe_event("customer.subscription.updated", subscription(price=YEARLY), created=now + 60),
    )
    wait_for(lambda: profile(db, ada)["price_id"] == YEARLY)
    post_event(api, stripe_event("customer.subscription.updated", subscription(), created=now + 1))
    settle(api)
    assert profile(db, ada) == {"customer_id": "cus_ada", "price_id": YEARLY, "has_access": True}


def test_a_checkout_older_than_the_plan_change_applied_cannot_undo_it(
    api: Api, db: Database, ada: str
) -> None:
    """Found by the fault run: a redelivered checkout set its price whatever its age."""
    now = int(time.time())
    post_event(
        api,
        stripe_event("customer.subscription.updated", subscription(price=YEARLY), created=now),
    )
    wait_for(lambda: profile(db, ada)["price_id"] == YEARLY)
    older = session(ada, price=MONTHLY, mode="subscription", subscription="sub_ada")
    post_event(api, stripe_event("checkout.session.completed", older, created=now - 60))
    settle(api)
    assert profile(db, ada) == {"customer_id": "cus_ada", "price_id": YEARLY, "has_access": True}


RENEWAL = {"id": "in_r", "customer": "cus_ada", "subscription": "sub_ada"}


@pytest.mark.parametrize(
    ("newer", "change", "access"),
    [
        ("invoice.paid", RENEWAL, True),
        ("customer.subscription.deleted", subscription(status="canceled"), False),
    ],
)
def test_a_plan_change_older_than_an_access_change_applied_first_still_sets_the_plan(
    api: Api, db: Database, ada: str, newer: str, change: dict[str, Any], access: bool
) -> None:
    """Plan and access are ordered apart: a renewal or a deletion says nothing of the plan."""
    now = int(time.time())
    post_event(api, stripe_event(newer, change, created=now + 60))
    settle(api)
    upgrade = subscription(price=YEARLY)
    post_event(api, stripe_event("customer.subscription.updated", upgrade, created=now))
    settle(api)
    assert profile(db, ada) == {"customer_id": "cus_ada", "price_id": YEARLY, "has_access": access}


def test_an_unpaid_checkout_older_than_the_plan_applied_leaves_the_plan(
    api: Api, db: Database, ada: str
) -> None:
    now = int(time.time())
    upgrade = subscription(price=YEARLY)
    post_event(api, stripe_event("customer.subscription.updated", upgrade, created=now))
    wait_for(lambda: profile(db, ada)["price_id"] == YEARLY)
    pending = session(ada, price=MONTHLY, payment_status="unpaid")
    post_event(api, stripe_event("checkout.session.completed", pending, created=now - 60))
    settle(api)
    assert profile(db, ada)["price_id"] == YEARLY


def test_a_scheduled_cancellation_keeps_access_and_names_the_period_end(
    api: Api, db: Database, ada: str
) -> None:
    scheduled = subscription(cancel_at_period_end=True, cancel_at=1798675200)
    body = stripe_event("customer.subscription.updated", scheduled)
    post_event(
        api,
        body.replace(
            b'"data": {', b'"data": {"previous_attributes": {"cancel_at_period_end": false}, ', 1
        ),
    )
    settle(api)
    assert profile(db, ada)["has_access"] is True
    [message] = outbox(api)
    text = text_of(message)
    assert "You keep full access until December 31, 2026." in text
    assert "has ended" not in text


def test_undoing_a_scheduled_cancellation_sends_nothing(api: Api, db: Database, ada: str) -> None:
    body = stripe_event("customer.subscription.updated", subscription())
    post_event(
        api,
        body.replace(
            b'"data": {', b'"data": {"previous_attributes": {"cancel_at_period_end": true}, ', 1
        ),
    )
    settle(api)
    assert profile(db, ada)["has_access"] is True
    assert outbox(api) == []


def test_deletion_revokes_and_says_access_has_ended(api: Api, db: Database, ada: str) -> None:
    ended = subscription(status="canceled", ended_at=1798675200)
    post_event(api, stripe_event("customer.subscription.deleted", ended))
    settle(api)
    assert profile(db, ada)["has_access"] is False
    [message] = outbox(api)
    text = text_of(message)
    assert "Your access ended on December 31, 2026." in text
    assert "keep full access" not in text
    assert message["Subject"] == "Subscription ended: Team Monthly"


def test_a_stale_deletion_sends_no_end_of_access_mail(api: Api, db: Database, ada: str) -> None:
    now = int(time.time())
    post_event(api, stripe_event("customer.subscription.updated", subscription(), created=now))
    settle(api)
    ended = subscription(status="canceled", ended_at=now - 60)
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=now - 60))
    settle(api)
    assert profile(db, ada)["has_access"] is True
    assert outbox(api) == []


def test_a_payment_link_checkout_names_the_product_and_links_the_receipt(
    api: Api, db: Database, ada: str, stripe_fake: StripeStandIn
) -> None:
    receipt = "https://pay.stripe.com/receipts/payment/test_rcpt_ada"
    stripe_fake.hold_session(
        {
            "id": "cs_test_life0001",
            "object": "checkout.session",
            "line_items": {"object": "list", "data": [{"id": "li_1", "price": {"id": GITHUB}}]},
            "payment_intent": {
                "id": "pi_ada",
                "latest_charge": {"id": "ch_1", "receipt_url": receipt},
            },
        }
    )
    post_event(api, stripe_event("checkout.session.completed", session(ada, price=None)))
    settle(api)
    [message] = outbox(api)
    text = text_of(message)
    assert message["Subject"] == "Order confirmed: Pro Repository"
    assert receipt in text
    assert "example-org/saas-starter-pro" in text
    [call] = stripe_fake.calls("GET", "/v1/checkout/sessions/cs_test_life0001")
    assert ("expand[2]", "payment_intent.latest_charge") in call.query


def test_a_subscription_checkout_links_the_hosted_invoice(
    api: Api, db: Database, ada: str, stripe_fake: StripeStandIn
) -> None:
    invoice = "https://invoice.stripe.com/i/acct_1/test_inv_ada"
    stripe_fake.hold_session(
        {
            "id": "cs_test_life0001",
            "object": "checkout.session",
            "line_items": {"object": "list", "data": [{"id": "li_1", "price": {"id": MONTHLY}}]},
            "invoice": {"id": "in_1", "hosted_invoice_url": invoice},
        }
    )
    body = session(ada, price=MONTHLY, mode="subscription", payment_intent=None, invoice="in_1")
    post_event(api, stripe_event("checkout.session.completed", body))
    settle(api)
    [message] = outbox(api)
    assert invoice in text_of(message)


def test_no_confirmation_while_the_access_change_fails(
    api: Api, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    seed_demo_products(db)
    caplog.set_level(logging.INFO)
    stranger = "7b0c1c3e-4f57-4a53-9c55-111111111111"  # no such user: access cannot be granted
    post_event(api, stripe_event("checkout.session.completed", session(stranger), event_id="evt_x"))

    def logged(needle: str) -> Any:
        return [r for r in caplog.records if needle in r.getMessage()]

    wait_for(lambda: logged("subscriber access failed on event evt_x"))
    wait_for(lambda: logged("emails: checkout.session.completed evt_x -> no e-mail"))
    assert outbox(api) == []
    assert db.fetch_all("select * from public.sent_emails") == []
    assert db.fetch_all("select * from public.purchases") == []


def test_one_time_checkout_with_metadata_and_no_stripe_needs_no_call(
    api: Api, db: Database, ada: str, stripe_fake: StripeStandIn
) -> None:
    post_event(api, stripe_event("checkout.session.completed", session(ada, payment_intent=None)))
    settle(api)
    [message] = outbox(api)
    assert message["Subject"] == "Order confirmed: Starter Kit"
    assert stripe_fake.calls("GET", "/v1/checkout/sessions") == []
    assert profile(db, ada)["price_id"] == ONE_TIME


def test_a_trials_checkout_from_stripes_webhook_is_granted_and_told_as_a_trial(
    api: Api, db: Database, ada: str, stripe_fake: StripeStandIn
) -> None:
    """Stripe's own event names the subscription by id only: the access cycle reads it (the
    session, its subscription expanded) to tell the trial's end and first charge."""
    trial_end = 1_800_000_000  # 2027-01-15
    stripe_fake.hold_session(
        {
            "id": "cs_test_life0001",
            "object": "checkout.session",
            "mode": "subscription",
            "line_items": {"object": "list", "data": [{"id": "li_1", "price": {"id": MONTHLY}}]},
            "subscription": "sub_ada",
        }
    )
    # A whole subscription as Stripe holds one: trialing until `trial_end`, then $19.00 a month.
    stripe_fake.prices[MONTHLY] = shapes.price(MONTHLY, "prod_life", 1900, "month", created=0)
    held = stripe_fake.subscribe("sub_ada", customer="cus_ada", price=MONTHLY, status="trialing")
    held |= {"trial_end": trial_end, "default_payment_method": None, "default_source": None}
    held["trial_settings"] = {"end_behavior": {"missing_payment_method": "cancel"}}
    body = session(
        ada,
        price=MONTHLY,
        mode="subscription",
        payment_intent=None,
        subscription="sub_ada",
        amount_total=0,
        payment_status="no_payment_required",
    )
    post_event(api, stripe_event("checkout.session.completed", body))
    settle(api)
    [grant] = db.fetch_all("select status, trial_end from public.entitlements")
    assert grant["status"] == "trialing"
    assert int(grant["trial_end"].timestamp()) == trial_end
    [message] = outbox(api)
    text = text_of(message)
    assert message["Subject"] == "Your free trial has started: Team Monthly"
    assert "nothing was charged today" in text
    assert "No card on file: it ends then unless you add one" in text
    assert "the first charge, $19.00, is on Jan 15, 2027" in text
    assert "payment went through" not in text
    assert "Total paid" not in text
    [call] = stripe_fake.calls("GET", "/v1/checkout/sessions/cs_test_life0001")
    assert ("expand[3]", "subscription") in call.query
