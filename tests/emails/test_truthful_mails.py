"""What a lifecycle e-mail claims is what is so, in each situation Stripe can produce: read
through the webhook, the subscribers and the outbox, against the event that caused it."""

from __future__ import annotations

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.access.lifecycle_helpers import MONTHLY, link, profile, session, subscription
from tests.access.test_subscriber import post_event
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user, stripe_event

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
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

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
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

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


def entitlements_of(db: Database, user: str) -> dict[str, tuple[str, bool]]:
    rows = db.fetch_all(
        "select e.source_id, e.status, e.active from public.entitlements e"
        " join public.accounts a on a.id = e.account_id where a.owner_id = %s",
        (user,),
    )
    return {r["source_id"]: (r["status"], r["active"]) for r in rows}


def ended_mails(api: Api) -> list[str]:
    return [
        " ".join(text_of(m).split())
        for m in outbox(api)
        if m["Subject"].startswith("Subscription ended")
    ]


def test_a_lifetime_purchase_outlives_the_subscription_beside_it_and_the_mail_says_so(
    api: Api, db: Database
) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com", name="Ada Lovelace")
    t0 = 1_790_000_000
    events = [
        ("checkout.session.completed", session(ada), t0),
        (
            "checkout.session.completed",
            session(
                ada,
                price=MONTHLY,
                id="cs_test_sub0001",
                mode="subscription",
                subscription="sub_ada",
                payment_intent=None,
            ),
            t0 + 10,
        ),
        (
            "customer.subscription.deleted",
            subscription(status="canceled", ended_at=t0 + 99),
            t0 + 99,
        ),
    ]
    for event_type, obj, created in events:
        post_event(api, stripe_event(event_type, obj, created=created))
        assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    assert entitlements_of(db, ada) == {
        "cs_test_life0001": ("paid", True),
        "sub_ada": ("canceled", False),
    }
    assert profile(db, ada)["has_access"] is True
    [text] = ended_mails(api)
    assert text.startswith("Acme") or "Hi Ada Lovelace" in text
    assert "Your access through this subscription ended" in text
    assert "Everything else you bought is not affected" in text


def test_a_refund_takes_back_only_its_own_purchase(api: Api, db: Database) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    t0 = 1_790_000_000
    post_event(api, stripe_event("checkout.session.completed", session(ada), created=t0))
    second = session(ada, id="cs_test_life0002", payment_intent="pi_ada_2")
    post_event(api, stripe_event("checkout.session.completed", second, created=t0 + 5))
    charge = {
        "id": "ch_ada",
        "object": "charge",
        "customer": "cus_ada",
        "payment_intent": "pi_ada",
        "amount": 4900,
        "amount_refunded": 4900,
        "refunded": True,
        "currency": "usd",
        "invoice": None,
    }
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    post_event(api, stripe_event("charge.refunded", charge, created=t0 + 60))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert entitlements_of(db, ada) == {
        "cs_test_life0001": ("refunded", False),
        "cs_test_life0002": ("paid", True),
    }
    assert profile(db, ada)["has_access"] is True


@pytest.mark.parametrize(
    ("status", "needle"),
    [
        ("unpaid", "the last payment could not be collected"),
        ("paused", "the free trial ran out before a payment method was added"),
    ],
)
def test_access_ended_through_an_update_is_told_once(
    api: Api, db: Database, status: str, needle: str
) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    t0 = 1_790_000_000
    ended = subscription(status=status)
    # Stripe may delete it later: the end was told already, so nothing is sent again.
    deleted = subscription(status="canceled", ended_at=t0 + 90)
    for body in (
        stripe_event("customer.subscription.updated", subscription(), created=t0),
        stripe_event("customer.subscription.updated", ended, created=t0 + 50),
        stripe_event("customer.subscription.deleted", deleted, created=t0 + 90),
    ):
        post_event(api, body)  # in this order: delivered the other way, the deletion would tell
        assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    assert profile(db, ada)["has_access"] is False
    assert entitlements_of(db, ada) == {"sub_ada": ("canceled", False)}
    [text] = ended_mails(api)
    assert needle in text
    assert "why you cancelled" not in text
    assert "Everything else you bought" not in text


def test_a_trial_cancelled_at_its_end_for_want_of_a_card_says_so(api: Api, db: Database) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    trial_end = 1_790_000_000
    trialing = subscription(status="trialing", trial_end=trial_end)
    post_event(
        api, stripe_event("customer.subscription.created", trialing, created=trial_end - 86400 * 14)
    )
    ended = subscription(
        status="canceled",
        trial_end=trial_end,
        ended_at=trial_end,
        cancellation_details={"reason": None, "comment": None, "feedback": None},
    )
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=trial_end))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [text] = ended_mails(api)
    assert "the free trial ran out" in text
    assert "nothing was charged" in text
    assert "why you cancelled" not in text


def trial_will_end(**extra: object) -> dict[str, object]:
    trial = subscription(status="trialing", trial_end=1_796_083_200)  # 2026-12-01
    trial["items"] = {
        "object": "list",
        "data": [
            {
                "id": "si_1",
                "quantity": 2,
                "price": {
                    "id": MONTHLY,
                    "unit_amount": 1900,
                    "currency": "usd",
                    "recurring": {"interval": "month", "interval_count": 1},
                },
            }
        ],
    }
    return {**trial, **extra}


@pytest.mark.parametrize(
    ("extra", "says", "never"),
    [
        (
            {"default_payment_method": "pm_1"},
            ["ends on December 1, 2026", "$38.00 per month, charged to the payment method on file"],
            ["add a payment method", "tax"],
        ),
        (
            {"default_payment_method": "pm_1", "automatic_tax": {"enabled": True}},
            ["$38.00 per month, plus any tax that applies"],
            [],
        ),
        (
            {"default_payment_method": "pm_1", "discounts": ["di_1"]},
            ["its price, less your discount"],
            ["$38.00"],
        ),
        (
            {"default_payment_method": None},
            ["add a payment method before then", "ends with the trial and nothing is charged"],
            ["charged to the payment method on file"],
        ),
        (
            {"trial_settings": {"end_behavior": {"missing_payment_method": "create_invoice"}}},
            ["its first invoice is sent to you to pay"],
            ["nothing is charged"],
        ),
    ],
    ids=["card", "tax", "discount", "no card", "no card, invoice"],
)
def test_a_trial_ending_says_when_what_it_costs_and_what_happens_without_a_card(
    api: Api, db: Database, extra: dict[str, object], says: list[str], never: list[str]
) -> None:
    seed_demo_products(db)
    link(db, create_user(db, "trial@example.com", name="Tess"), "cus_ada")
    body = stripe_event("customer.subscription.trial_will_end", trial_will_end(**extra))
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [mail] = [m for m in outbox(api) if "free trial ends" in m["Subject"]]
    assert mail["Subject"] == "Your free trial ends on Dec 1"
    text = " ".join(text_of(mail).split())
    assert "Hi Tess," in text
    for claim in says:
        assert claim in text
    for claim in never:
        assert claim not in text


def test_no_trial_mail_once_the_trial_is_over(api: Api, db: Database) -> None:
    seed_demo_products(db)
    link(db, create_user(db, "trial@example.com"), "cus_ada")
    body = stripe_event("customer.subscription.trial_will_end", trial_will_end(status="active"))
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert outbox(api) == []


def expired_session(**extra: object) -> dict[str, object]:
    return {
        "id": "cs_test_gone",
        "object": "checkout.session",
        "status": "expired",
        "customer": None,
        "customer_details": {"email": "gone@example.com", "name": "Gwen"},
        "metadata": {"price_id": "price_demo_starter_one_time"},
        "amount_total": 4900,
        "currency": "usd",
        **extra,
    }


RECOVERY = {
    "recovery": {
        "enabled": True,
        "url": "https://buy.stripe.com/r/test_x",
        "expires_at": 1_796_083_200,
    }
}


@pytest.mark.parametrize(
    ("extra", "says", "never"),
    [
        (
            {"after_expiration": RECOVERY},
            ["opens your checkout again, as you left it, until December 1, 2026",
             "https://buy.stripe.com/r/test_x"],
            ["pricing page"],
        ),
        (
            {"after_expiration": None},
            ["start a new checkout from our pricing page", "/#pricing"],
            ["as you left it", "Return to checkout"],
        ),
    ],
    ids=["recovery link", "no recovery"],
)  # fmt: skip
def test_an_expired_checkout_promises_only_what_its_link_does(
    api: Api, db: Database, extra: dict[str, object], says: list[str], never: list[str]
) -> None:
    seed_demo_products(db)
    assert (
        post_event(
            api, stripe_event("checkout.session.expired", expired_session(**extra))
        ).status_code
        == 200
    )
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [mail] = outbox(api)
    text = " ".join(text_of(mail).split())
    assert "Hi Gwen," in text
    for claim in says:
        assert claim in text
    for claim in never:
        assert claim not in text


@pytest.mark.parametrize(
    ("consent", "sent"),
    [
        ({"consent_collection": {"promotions": "auto"}, "consent": {"promotions": "opt_in"}}, True),
        ({"consent_collection": {"promotions": "auto"}, "consent": {"promotions": None}}, False),
        ({"consent_collection": {"promotions": "auto"}, "consent": None}, False),
        ({"consent": {"promotions": "opt_out"}}, False),
        ({}, True),
    ],
    ids=["opted in", "asked, no answer", "asked, nothing recorded", "opted out", "not asked"],
)
def test_an_expired_checkout_is_mailed_only_with_consent_where_it_was_asked(
    api: Api, db: Database, consent: dict[str, object], sent: bool
) -> None:
    seed_demo_products(db)
    body = stripe_event(
        "checkout.session.expired", expired_session(after_expiration=RECOVERY, **consent)
    )
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert len(outbox(api)) == (1 if sent else 0)


def test_the_end_of_the_only_grant_says_nothing_of_anything_else_bought(
    api: Api, db: Database
) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada", access=True)
    with db.transaction() as conn:
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, status, active,"
            " changed_at) select id, 'sub_ada', 'subscription', 'active', true, to_timestamp(1)"
            " from public.accounts where owner_id = %s",
            (ada,),
        )
    ended = subscription(status="canceled", ended_at=1_790_000_000)
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=1_790_000_000))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert entitlements_of(db, ada) == {"sub_ada": ("canceled", False)}
    assert profile(db, ada)["has_access"] is False
    [text] = ended_mails(api)
    assert "Everything else you bought" not in text


def test_a_mail_whose_event_names_nobody_greets_the_customer_by_the_profiles_name(
    api: Api, db: Database
) -> None:
    seed_demo_products(db)
    link(db, create_user(db, "failing@example.com", name="Grace Hopper"), "cus_failing")
    body = stripe_event("invoice.payment_failed", failed_invoice(NEXT_ATTEMPT))  # no customer_name
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [mail] = outbox(api)
    assert "Hi Grace Hopper," in text_of(mail)


def test_no_trial_mail_for_a_trial_already_cancelled(api: Api, db: Database) -> None:
    seed_demo_products(db)
    link(db, create_user(db, "trial@example.com"), "cus_ada")
    cancelled = subscription(status="canceled", trial_end=1_796_083_200, ended_at=1_795_000_000)
    body = stripe_event("customer.subscription.deleted", cancelled, created=1_795_000_000)
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    late = stripe_event(
        "customer.subscription.trial_will_end", trial_will_end(), created=1_794_000_000
    )
    assert post_event(api, late).status_code == 200  # Stripe's notice, delivered after the end
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert [m["Subject"] for m in outbox(api) if "trial" in m["Subject"]] == []
    [row] = db.fetch_all(
        "select outcome from public.processed_events where event_type = %s",
        ("customer.subscription.trial_will_end",),
    )
    assert row["outcome"] == "ignored (trial over)"
