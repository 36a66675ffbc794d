"""What a lifecycle e-mail claims is what is so, in each situation Stripe can produce: read
through the webhook, the subscribers and the outbox, against the event that caused it."""

from __future__ import annotations

import pytest

from adapters.db.pool import Database
from adapters.db.products import seed_demo_products
from tests.conftest import Api
from tests.helpers import create_user, stripe_event
from tests.subscribers.lifecycle_helpers import link
from tests.subscribers.test_access import post_event
from tests.subscribers.test_emails import outbox, text_of

NEXT_ATTEMPT = 1_798_675_200  # 2026-12-31


def failed_invoice(next_attempt: int | None) -> dict[str, object]:
    return {
        "id": "in_failed",
        "object": "invoice",
        "customer": "cus_failing",
        "customer_email": "failing@example.com",
        "subscription": "sub_failing",
        "amount_due": 1900,
        "currency": "usd",
        "status": "open",
        "attempt_count": 4 if next_attempt is None else 1,
        "next_payment_attempt": next_attempt,
        "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1/test_failed",
        "lines": {"data": [{"price": {"id": "price_demo_team_monthly"}, "period": {}}]},
    }


@pytest.mark.parametrize("next_attempt", [NEXT_ATTEMPT, None], ids=["retry due", "last attempt"])
def test_a_failed_payment_says_whether_stripe_will_try_again(
    api: Api, db: Database, next_attempt: int | None
) -> None:
    seed_demo_products(db)
    link(db, create_user(db, "failing@example.com"), "cus_failing")
    body = stripe_event("invoice.payment_failed", failed_invoice(next_attempt))
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]

    [mail] = [m for m in outbox(api) if "payment failed" in m["Subject"]]
    text = " ".join(text_of(mail).split())
    if next_attempt is None:
        assert "no further retry is scheduled" in text
        assert "retry the payment automatically" not in text
        assert "Next attempt" not in text
    else:
        assert "We will retry the payment automatically on December 31, 2026" in text
        assert "no further retry" not in text
    assert "https://invoice.stripe.com/i/acct_1/test_failed" in text


@pytest.mark.parametrize("reason", ["payment_failed", "cancellation_requested"])
def test_an_ended_subscription_says_why_and_asks_why_only_a_customer_who_chose(
    api: Api, db: Database, reason: str
) -> None:
    seed_demo_products(db)
    link(db, create_user(db, "ended@example.com"), "cus_ended")
    with db.transaction() as conn:
        conn.execute("update public.profiles set has_access = true where customer_id = 'cus_ended'")
    ended = {
        "id": "sub_ended",
        "object": "subscription",
        "customer": "cus_ended",
        "status": "canceled",
        "ended_at": NEXT_ATTEMPT,
        "cancellation_details": {"reason": reason, "comment": None, "feedback": None},
        "items": {"data": [{"price": {"id": "price_demo_team_monthly"}}]},
    }
    body = stripe_event("customer.subscription.deleted", ended)
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]

    [mail] = [m for m in outbox(api) if m["Subject"].startswith("Subscription ended")]
    text = " ".join(text_of(mail).split())
    assert "Your access ended on December 31, 2026" in text
    if reason == "payment_failed":
        assert "the last payment could not be collected" in text
        assert "Subscribe again" in text
        assert "why you cancelled" not in text
        assert "Changed your mind" not in text
    else:
        assert "why you cancelled" in text
        assert "could not be collected" not in text
