"""Overage reported to Stripe's meter through the real route, the bus and the Stripe stand-in:
the 50 consumptions beyond 100 credits become 50 meter events of 1 unit each, one per
consumption key, exactly once across a redelivery and a reporter that stopped between sending
and marking; one past Stripe's 35-day window is an ERROR, never sent."""

from __future__ import annotations

import functools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from credits.rules import overage_recorded
from dev import stripe_shapes as shapes
from dev.samples.catalogue import price, product
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from tests.access.lifecycle_helpers import link, settle
from tests.conftest import Api
from tests.credits.test_routes import KEY, PLAN, deliver, invoice, use
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user, stripe_signature
from tests.support.test_routes import bearer, make_admin, token

METER = "generations_overage"


@pytest.fixture
def metered(api_factory: Any, fakes: tuple[StripeStandIn, Any], db: Database) -> tuple[Api, str]:
    """A plan of 100 generations a month whose overage is billed on a meter Stripe holds, and
    Ada subscribed to it, her first period paid."""
    api = api_factory(usage_api_key=KEY)
    stripe = fakes[0]
    stripe.meters["mtr_gen"] = shapes.meter(
        "mtr_gen", display_name="Generations", event_name=METER, created=int(time.time())
    )
    meta = {"type": "link", "credits": "generations:100", "meter": METER}
    stripe.products["prod_gen"] = product("prod_gen", "Generator", "", meta)
    stripe.prices[PLAN] = price(PLAN, "prod_gen", 1900, "month")
    deliver(api, "product.updated", stripe.products["prod_gen"], created=1_000)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    now = int(time.time())
    subscription = {
        "id": "sub_ada", "object": "subscription", "customer": "cus_ada", "status": "active",
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": PLAN}}]},
    }  # fmt: skip
    deliver(api, "customer.subscription.created", subscription, created=now - 10)
    deliver(api, "invoice.paid", invoice(1, now - 10), created=now - 5)
    return api, ada


def meter_posts(stripe: StripeStandIn) -> list[str]:
    return [r.form()["identifier"] for r in stripe.calls("POST", "/v1/billing/meter_events")]


def test_the_overage_is_reported_once_per_key(
    metered: tuple[Api, str], db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    api, ada = metered
    stripe = fakes[0]

    def one(n: int) -> int:
        body = {"userId": ada, "feature": "generations", "amount": 1, "key": f"gen-{n}"}
        return use(api, body).status_code

    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(one, range(150)))
    assert statuses == [200] * 150  # beyond the credits, billed on the meter
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [row] = db.fetch_all(
        "select count(*) filter (where overage > 0) as over, sum(overage) as units,"
        " count(*) filter (where overage > 0 and reported_at is not null) as reported"
        " from public.credit_uses"
    )
    assert row == {"over": 50, "units": 50, "reported": 50}
    assert len(stripe.meter_events) == 50
    assert stripe.meter_usage(METER, "cus_ada") == 50
    assert {e["payload"]["value"] for e in stripe.meter_events.values()} == {"1"}
    posted = meter_posts(stripe)
    assert sorted(posted) == sorted(stripe.meter_events)  # each sent once

    # The same keys sent again consume nothing and report nothing more.
    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(one, range(150))) == statuses
    # Each announcement delivered again (Pub/Sub is at least once): nothing sent again.
    reporter = api.container.dispatch("access")
    again = [overage_recorded(key, row_time())[0] for key in posted]
    assert set(reporter.apply_many(again)) == {"reported before"}
    # A reporter that stopped between sending and marking: its claim lapses, the next
    # delivery sends again under the same identifier, and Stripe counts it once.
    crashed = posted[0]
    with db.transaction() as conn:
        conn.execute(
            "update public.credit_uses set reported_at = null,"
            " report_claimed_at = now() - interval '1 hour' where key = %s",
            (crashed,),
        )
    assert reporter.apply_many([overage_recorded(crashed, row_time())[0]]) == ["reported"]
    assert meter_posts(stripe).count(crashed) == 2
    assert len(stripe.meter_events) == 50
    assert stripe.meter_usage(METER, "cus_ada") == 50


def row_time() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def test_an_overage_past_stripes_window_is_an_error_not_a_send(
    metered: tuple[Api, str],
    db: Database,
    fakes: tuple[StripeStandIn, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, ada = metered
    with db.transaction() as conn:
        conn.execute(
            "insert into public.credit_uses (key, account_id, feature, amount, state, overage,"
            " balance, meter, customer_id, created_at) select 'old', a.id, 'generations', 3,"
            " 'consumed', 3, 0, %s, 'cus_ada', now() - interval '40 days'"
            " from public.accounts a where a.owner_id = %s",
            (METER, ada),
        )
    reporter = api.container.dispatch("access")
    with caplog.at_level(logging.ERROR, logger="credits.meter"):
        assert reporter.apply_many([overage_recorded("old", row_time())[0]]) == ["unreportable"]
    assert "past Stripe's 35-day window" in caplog.text
    assert "cus_ada" in caplog.text
    assert meter_posts(fakes[0]) == []
    [row] = db.fetch_all("select reported_at, report_error from public.credit_uses")
    assert row["report_error"] == "past Stripe's 35-day window for meter events"


METER_SECRET = "whsec_meter_destination_5b2e9c1a7d3f4e6a8b0c"


def thin(event_id: str, event_type: str, *, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A thin event as an event destination delivers it (with `data` when fetched)."""
    body: dict[str, Any] = {
        "id": event_id, "object": "v2.core.event", "type": event_type,
        "created": "2026-11-28T12:00:00.000Z", "livemode": False, "context": None,
        "reason": None,
        "related_object": {"id": "mtr_gen", "type": "billing.meter",
                           "url": "/v1/billing/meters/mtr_gen"},
    }  # fmt: skip
    if data is not None:
        body["data"] = data
    return body


def test_a_meters_error_event_is_logged_at_error_with_the_customer(
    api_factory: Any,
    fakes: tuple[StripeStandIn, Any],
    db: Database,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = api_factory(stripe_meter_events_secret=METER_SECRET)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    with db.transaction() as conn:
        conn.execute(
            "insert into public.credit_uses (key, account_id, feature, amount, state, overage,"
            " balance, meter, customer_id) select 'gen-7', a.id, 'generations', 1, 'consumed',"
            " 1, 0, %s, 'cus_ada' from public.accounts a where a.owner_id = %s",
            (METER, ada),
        )
    sample = {"error_message": "No active meter", "request": {"identifier": "gen-7"}}
    data = {
        "developer_message_summary": "There is 1 invalid event",
        "reason": {"error_count": 1, "error_types": [
            {"code": "meter_event_no_customer_defined", "error_count": 1,
             "sample_errors": [sample]}]},
    }  # fmt: skip
    event_type = "v1.billing.meter.error_report_triggered"
    fakes[0].thin_events["evt_thin_1"] = thin("evt_thin_1", event_type, data=data)
    body = json.dumps(thin("evt_thin_1", event_type)).encode()
    post = functools.partial(requests.post, api.url + "/api/webhook/payments", timeout=HANG_GUARD)
    with caplog.at_level(logging.ERROR, logger="events.intake"):
        answer = post(
            data=body, headers={"Stripe-Signature": stripe_signature(body, secret=METER_SECRET)}
        )
    assert answer.status_code == 200
    [told] = [r for r in caplog.records if r.name == "events.intake"]
    assert told.levelno == logging.ERROR
    assert "meter mtr_gen" in told.getMessage()
    assert "gen-7 (customer cus_ada)" in told.getMessage()
    # Signed with the webhook's own secret, or anything but a meter's event: refused.
    other = json.dumps({**thin("evt_2", "v1.billing.meter.no_meter_found"), "type": "x"}).encode()
    signed = stripe_signature(other, secret=METER_SECRET)
    assert post(data=other, headers={"Stripe-Signature": signed}).status_code == 400
    wrong = stripe_signature(body, secret="whsec_not_it")
    assert post(data=body, headers={"Stripe-Signature": wrong}).status_code == 400


def test_an_overage_whose_announcement_was_lost_is_reported_by_the_sweep(
    metered: tuple[Api, str], db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    api, ada = metered
    with db.transaction() as conn:  # committed, its announcement lost on the way to the bus
        conn.execute(
            "insert into public.credit_uses (key, account_id, feature, amount, state, overage,"
            " balance, meter, customer_id, created_at) select 'lost', a.id, 'generations', 2,"
            " 'consumed', 2, 0, %s, 'cus_ada', now() - interval '10 minutes'"
            " from public.accounts a where a.owner_id = %s",
            (METER, ada),
        )
    app = create_app(container=api.container)
    with app.app_context():
        for _ in range(2):  # run twice: reported once
            result = app.test_cli_runner().invoke(args=["credits", "report"])
            assert result.exit_code == 0, result.output
            assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert meter_posts(fakes[0]) == ["lost"]
    assert fakes[0].meter_usage(METER, "cus_ada") == 2


def test_a_comp_of_a_metered_plan_bills_no_overage(
    metered: tuple[Api, str], db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    # Bob is given the metered plan by an admin: its feature, but no subscription Stripe could
    # bill overage on, so consumption beyond his credits (none) is refused, not reported.
    api, _ = metered
    bob = create_user(db, "bob@example.com")
    admin = make_admin(db)
    given = requests.post(
        f"{api.url}/api/admin/customers/{bob}/grants",
        json={"priceId": PLAN, "until": None, "reason": "Beta tester"},
        headers=bearer(token(api, admin, "founder@example.com")),
        timeout=HANG_GUARD,
    )
    assert given.status_code == 201, given.text
    refused = use(api, {"userId": bob, "feature": "generations", "amount": 1, "key": "bob-1"})
    assert refused.status_code == 402
    assert refused.json() == {"error": "Not enough generations credits", "balance": 0}
    assert db.fetch_all("select 1 from public.credit_uses where overage > 0") == []
    assert fakes[0].calls("POST", "/v1/billing/meter_events") == []


def _consume(api: Api, user: str, amount: int, key: str) -> requests.Response:
    return use(api, {"userId": user, "feature": "generations", "amount": amount, "key": key})


def test_overage_is_reported_on_the_customer_of_the_subscription_that_carries_the_meter(
    metered: tuple[Api, str], db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    """Ada's billing customer is cus_ada (a purchase made signed in); she bought the metered
    plan as a guest under her own address, as cus_guest: the overage is cus_guest's to pay."""
    api, ada = metered
    stripe = fakes[0]
    now = int(time.time())
    ended = {
        "id": "sub_ada", "object": "subscription", "customer": "cus_ada", "status": "canceled",
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": PLAN}}]},
    }  # fmt: skip
    deliver(api, "customer.subscription.deleted", ended, created=now - 4)
    guest = {
        "id": "cs_guest", "object": "checkout.session", "client_reference_id": None,
        "customer": "cus_guest", "mode": "subscription", "subscription": "sub_guest",
        "metadata": {"price_id": PLAN}, "payment_status": "paid", "amount_total": 1900,
        "currency": "usd", "created": now - 3,
        "customer_details": {"email": "ada@example.com", "name": "Ada"},
    }  # fmt: skip
    deliver(api, "checkout.session.completed", guest, created=now - 3)
    subscription = {
        "id": "sub_guest", "object": "subscription", "customer": "cus_guest",
        "status": "active",
        "items": {"object": "list", "data": [{"id": "si_2", "price": {"id": PLAN}}]},
    }  # fmt: skip
    deliver(api, "customer.subscription.created", subscription, created=now - 2)
    paid = invoice(2, now - 2) | {
        "id": "in_guest", "customer": "cus_guest", "subscription": "sub_guest",
        "billing_reason": "subscription_create",
    }  # fmt: skip
    deliver(api, "invoice.paid", paid, created=now - 1)
    [billing] = db.fetch_all("select customer_id from public.accounts where owner_id = %s", (ada,))
    assert billing["customer_id"] == "cus_ada"  # the guest checkout changed no link

    assert _consume(api, ada, 103, "over-guest").status_code == 200
    assert api.container.bus.wait_idle(30)  # type: ignore[attr-defined]
    [use_row] = db.fetch_all("select customer_id, overage from public.credit_uses")
    assert use_row == {"customer_id": "cus_guest", "overage": 3}
    assert stripe.meter_usage(METER, "cus_guest") == 3
    assert stripe.meter_usage(METER, "cus_ada") == 0


def test_a_trial_without_a_payment_method_consumes_no_overage(
    api_factory: Any, fakes: tuple[StripeStandIn, Any], db: Database
) -> None:
    """A trial Stripe cancels at its end when no payment method was added: past its credits,
    402; once a card backs it, the overage is billed."""
    api = api_factory(usage_api_key=KEY)
    stripe = fakes[0]
    stripe.meters["mtr_gen"] = shapes.meter(
        "mtr_gen", display_name="Generations", event_name=METER, created=int(time.time())
    )
    meta = {"type": "link", "credits": "generations:2", "meter": METER}
    stripe.products["prod_gen"] = product("prod_gen", "Generator", "", meta)
    stripe.prices[PLAN] = price(PLAN, "prod_gen", 1900, "month")
    deliver(api, "product.updated", stripe.products["prod_gen"], created=1_000)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    now = int(time.time())
    trial = {
        "id": "sub_ada", "object": "subscription", "customer": "cus_ada", "status": "trialing",
        "trial_start": now - 10, "trial_end": now + 14 * 86_400,
        "trial_settings": {"end_behavior": {"missing_payment_method": "cancel"}},
        "default_payment_method": None, "default_source": None,
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": PLAN}}]},
    }  # fmt: skip
    deliver(api, "customer.subscription.created", trial, created=now - 10)
    deliver(api, "invoice.paid", invoice(1, now - 10), created=now - 9)
    answers = [_consume(api, ada, 1_000, f"trial-{n}") for n in range(3)]
    assert [(a.status_code, a.json()) for a in answers] == [
        (402, {"error": "Not enough generations credits", "balance": 2})
    ] * 3
    assert _consume(api, ada, 2, "within").status_code == 200  # its credits are its own
    [row] = db.fetch_all("select coalesce(sum(overage), 0) as units from public.credit_uses")
    assert row["units"] == 0

    carded = trial | {"default_payment_method": "pm_ada"}
    deliver(api, "customer.subscription.updated", carded, created=now - 5)
    assert _consume(api, ada, 4, "carded").status_code == 200
    assert api.container.bus.wait_idle(30)
    assert stripe.meter_usage(METER, "cus_ada") == 4


def test_a_trial_told_late_consumes_no_overage(
    api_factory: Any, fakes: tuple[StripeStandIn, Any], db: Database
) -> None:
    """The trial's paid invoice of nothing (it says `active`) handled before the subscription's
    own older event, which arrives late: the trial without a payment method is still a trial,
    402 past its credits, not billed as a paid subscription Stripe will never charge."""
    api = api_factory(usage_api_key=KEY)
    stripe = fakes[0]
    meta = {"type": "link", "credits": "generations:2", "meter": METER}
    stripe.products["prod_gen"] = product("prod_gen", "Generator", "", meta)
    stripe.prices[PLAN] = price(PLAN, "prod_gen", 1900, "month")
    deliver(api, "product.updated", stripe.products["prod_gen"], created=1_000)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    now = int(time.time())
    trial = {
        "id": "sub_ada", "object": "subscription", "customer": "cus_ada", "status": "trialing",
        "trial_start": now - 10, "trial_end": now + 14 * 86_400,
        "trial_settings": {"end_behavior": {"missing_payment_method": "cancel"}},
        "default_payment_method": None, "default_source": None,
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": PLAN}}]},
    }  # fmt: skip
    deliver(api, "invoice.paid", invoice(1, now - 10), created=now - 9)  # first, though newer
    deliver(api, "customer.subscription.created", trial, created=now - 10)
    refused = _consume(api, ada, 1_000, "trial-late")
    assert (refused.status_code, refused.json()) == (
        402, {"error": "Not enough generations credits", "balance": 2},
    )  # fmt: skip
    assert db.fetch_all("select 1 from public.credit_uses where overage > 0") == []


def test_overage_stops_at_its_cap_with_402_and_only_what_it_allowed_is_billed(
    metered: tuple[Api, str], db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    """The plan's product says `overage_cap=5`: of 120 consumptions over 100 credits, 105 are
    taken and the rest 402 with the cap's own words; the meter is sent 5 units, and the check
    says no before a consumption would."""
    api, ada = metered
    stripe = fakes[0]
    capped = {**stripe.products["prod_gen"]["metadata"], "overage_cap": "5"}
    stripe.products["prod_gen"] = {**stripe.products["prod_gen"], "metadata": capped}
    deliver(api, "product.updated", stripe.products["prod_gen"], created=2_000)

    def one(n: int) -> requests.Response:
        return use(api, {"userId": ada, "feature": "generations", "amount": 1, "key": f"g-{n}"})

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(120)))
    assert sorted(a.status_code for a in answers) == [200] * 105 + [402] * 15
    refusal = {"error": "The overage limit of generations is reached", "balance": 0}
    assert all(a.json() == refusal for a in answers if a.status_code == 402)
    again = one(next(n for n, a in enumerate(answers) if a.status_code == 402))
    assert (again.status_code, again.json()) == (402, refusal)  # the key answers the same
    checked = requests.post(
        api.url + "/api/usage/check",
        json={"userId": ada, "feature": "generations", "amount": 1},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=HANG_GUARD,
    )
    assert checked.json() == {
        "feature": "generations", "allowed": False, "balance": 0, "overage": False,
    }  # fmt: skip
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert stripe.meter_usage(METER, "cus_ada") == 5
    settle(api)
    [told] = [m for m in outbox(api) if "You have used 90%" in str(m["Subject"])]
    words = " ".join(text_of(told).split())
    assert "Beyond them, what is used is billed on the subscription as overage, up to 5" in words
    assert "refused" not in words
