"""Every subscribed event type, built from Stripe's own fixtures
(tests/fixtures/stripe/fixtures3.json, the current shapes), lived once at the current API version
and once at 2023-08-16 by two customers with the same history: the same access, plan, purchases
and e-mails (the same words: product names, amounts, dates, links) come out of both."""

from __future__ import annotations

import copy
import re
from typing import Any

from adapters.db.pool import Database
from core.stripe_objects import CURRENT_VERSION, PINNED_VERSION
from dev.samples.catalogue import seed_demo_products
from tests.access.test_subscriber import post_event
from tests.conftest import Api
from tests.core.test_stripe_objects import current_invoice, fixture
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user, stripe_event

MONTHLY = "price_demo_team_monthly"
ONE_TIME = "price_demo_starter_one_time"
T0 = 1_790_000_000
PERIOD_END = 1_798_675_200  # 2026-12-31


def legacy(obj: dict[str, Any]) -> dict[str, Any]:
    """A current-shape object as 2023-08-16 shaped it (the moves core/stripe_objects.py reads)."""
    old = copy.deepcopy(obj)
    if old.get("object") == "invoice":
        parent = old.pop("parent", None) or {}
        old["subscription"] = (parent.get("subscription_details") or {}).get("subscription")
        for line in old["lines"]["data"]:
            price = line.pop("pricing")["price_details"]["price"]
            line["price"] = {"id": price, "object": "price"}
    if old.get("object") == "subscription":
        for item in old["items"]["data"]:
            old["current_period_start"] = item.pop("current_period_start", None)
            old["current_period_end"] = item.pop("current_period_end", None)
    return old


def life(who: str, user: str) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """One customer's events in order: (type, object at the current version, previous)."""
    customer, sub, intent = f"cus_{who}", f"sub_{who}", f"pi_{who}_one_time"
    details = {"email": f"{who}@example.com", "name": "Ada Lovelace"}

    def session(suffix: str, **changes: Any) -> dict[str, Any]:
        found = fixture("checkout.session")
        found.update(
            id=f"cs_test_{who}_{suffix}",
            client_reference_id=user,
            customer=customer,
            customer_details={**found["customer_details"], **details},
            currency="usd",
            **changes,
        )
        return found

    subscribed = session(
        "ABCDEF1234",
        mode="subscription",
        status="complete",
        payment_status="paid",
        subscription=sub,
        payment_intent=None,
        amount_total=4900,
        metadata={"price_id": MONTHLY},
    )
    renewal = current_invoice()
    renewal.update(
        id=f"in_{who}_renewal",
        customer=customer,
        customer_email=details["email"],
        billing_reason="subscription_cycle",
        status="paid",
        amount_paid=4900,
        amount_due=4900,
        currency="usd",
        number="ACME-0042",
        hosted_invoice_url="https://invoice.stripe.com/i/acct_1/test_0042",
        status_transitions={"paid_at": T0 + 30 * 86400},
    )
    renewal["parent"]["subscription_details"]["subscription"] = sub
    renewal["lines"]["data"][0]["pricing"]["price_details"]["price"] = MONTHLY
    failed = copy.deepcopy(renewal)
    failed.update(
        id=f"in_{who}_failed", status="open", amount_paid=0, next_payment_attempt=T0 + 70 * 86400
    )
    subscription = fixture("subscription")
    subscription.update(id=sub, customer=customer, status="active", cancel_at=None)
    item = subscription["items"]["data"][0]
    item["price"] = {**item["price"], "id": MONTHLY}
    item["current_period_end"] = PERIOD_END
    scheduled = {**copy.deepcopy(subscription), "cancel_at_period_end": True}
    ended = {**copy.deepcopy(subscription), "status": "canceled", "ended_at": PERIOD_END}
    one_time = session(
        "XYZ9876543",
        mode="payment",
        status="complete",
        payment_status="paid",
        payment_intent=intent,
        amount_total=9900,
        metadata={"price_id": ONE_TIME},
    )
    abandoned = session(
        "QQQ1112223",
        mode="payment",
        status="expired",
        payment_status="unpaid",
        amount_total=9900,
        metadata={"price_id": ONE_TIME},
        after_expiration={"recovery": {"enabled": True, "url": "https://buy.stripe.com/r/x"}},
    )
    charge = fixture("charge")
    charge.update(
        id=f"ch_{who}_one_time",
        customer=customer,
        payment_intent=intent,
        amount=9900,
        amount_refunded=2000,
        refunded=False,
        invoice=None,
    )
    dispute = fixture("dispute")
    dispute.update(id=f"dp_{who}", charge=charge["id"], payment_intent=intent, amount=9900)
    return [
        ("checkout.session.completed", subscribed, None),
        ("invoice.paid", renewal, None),
        ("checkout.session.async_payment_succeeded", one_time, None),
        ("charge.refunded", charge, None),
        ("charge.dispute.created", dispute, None),
        ("checkout.session.expired", abandoned, None),
        ("invoice.payment_failed", failed, None),
        ("customer.subscription.updated", scheduled, {"cancel_at_period_end": False}),
        ("customer.subscription.deleted", ended, None),
    ]


def live(api: Api, who: str, user: str, version: str) -> None:
    for n, (event_type, obj, previous) in enumerate(life(who, user)):
        shaped = obj if version == CURRENT_VERSION else legacy(obj)
        body = stripe_event(
            event_type, shaped, created=T0 + n * 86400, api_version=version, previous=previous
        )
        assert post_event(api, body).status_code == 200, event_type
        assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]


def what_came_of_it(api: Api, db: Database, who: str, user: str) -> dict[str, Any]:
    [profile] = db.fetch_all(
        "select has_access, price_id from public.profiles where id = %s", (user,)
    )
    purchases = db.fetch_all(
        "select right(stripe_checkout_session_id, 10) as order_ref, amount_total, currency,"
        " paid, refunded_at is not null as refunded"
        " from public.purchases where user_id = %s order by 1",
        (user,),
    )
    mails = sorted(
        (m["Subject"], re.sub(rf"\b{who}\b", "WHO", text_of(m)))
        for m in outbox(api)
        if who in str(m["To"])
    )
    return {"profile": profile, "purchases": purchases, "mails": mails}


def test_every_type_at_both_versions_comes_to_the_same(api: Api, db: Database) -> None:
    seed_demo_products(db)
    # Names no e-mail's words contain, replaced before the texts are compared.
    today, before = create_user(db, "qxnow@example.com"), create_user(db, "qxthen@example.com")

    live(api, "qxnow", today, CURRENT_VERSION)
    live(api, "qxthen", before, PINNED_VERSION)

    now = what_came_of_it(api, db, "qxnow", today)
    then = what_came_of_it(api, db, "qxthen", before)
    assert now["profile"] == then["profile"]
    assert now["purchases"] == then["purchases"]
    assert [s for s, _ in now["mails"]] == [s for s, _ in then["mails"]]
    for (subject, text), (_, other) in zip(now["mails"], then["mails"], strict=True):
        assert text == other, subject
    # And what came of it is what each event calls for, not nothing alike on both sides.
    # The subscription ended; the one-time purchase (refunded in part only) still gives access.
    assert now["profile"] == {"has_access": True, "price_id": MONTHLY}
    assert [p["amount_total"] for p in now["purchases"]] == [4900, 9900]
    texts = "\n".join(text for _, text in now["mails"])
    for fact in ("Team", "$49.00", "ACME-0042", "December 31, 2026", "invoice.stripe.com"):
        assert fact in texts, fact
    assert len(now["mails"]) >= 6
