"""POST /api/payments/preview-change and change-plan over HTTP, against the Stripe stand-in's
prorations, previews and schedules: an upgrade charges now exactly what its preview said, a
downgrade waits for the period's end, a preview that no longer holds is answered with a fresh
one, and nobody changes a subscription that is not theirs to manage."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from config import DEV_WEBHOOK_SECRET
from core.money import format_amount
from dev import stripe_shapes as shapes
from dev.auth_stand_in import AuthStandIn
from dev.stripe_stand_in import StripeStandIn
from plans import rules
from tests.access.lifecycle_helpers import link, post_event, settle
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import stripe_event
from tests.teams.test_routes import Person, join, new_team

BASIC, PRO, PRO_YEARLY, SEATS = (
    "price_plan_basic",
    "price_plan_pro",
    "price_plan_pro_yearly",
    "price_plan_seat",
)
PRICES = {  # id -> (amount, interval, per seat)
    BASIC: (1000, "month", False),
    PRO: (3000, "month", False),
    PRO_YEARLY: (24000, "year", False),
    SEATS: (1200, "month", True),
}
CREDITS = {BASIC: 10, PRO: 30}  # a period's `generations`
DAY = 86_400


@pytest.fixture
def catalogue(fakes: tuple[StripeStandIn, AuthStandIn], db: Database) -> StripeStandIn:
    stripe_fake = fakes[0]
    stripe_fake.products["prod_plan"] = shapes.product("prod_plan", "Plan", "", {}, created=0)
    for price_id, (amount, interval, per_seat) in PRICES.items():
        stripe_fake.prices[price_id] = shapes.price(
            price_id, "prod_plan", amount, interval, created=0
        )
        with db.transaction() as conn:
            conn.execute(
                "insert into public.products (name, price, stripe_price_id, type, billing_type,"
                " billing_interval, per_seat, features, credits, credits_period) values (%s, %s,"
                " %s, 'link', 'subscription', %s, %s, '{pro}', %s, %s)",
                (
                    f"Plan {price_id}",
                    amount / 100,
                    price_id,
                    interval,
                    per_seat,
                    json.dumps({"generations": CREDITS[price_id]} if price_id in CREDITS else {}),
                    "period" if price_id in CREDITS else None,
                ),
            )
    return stripe_fake


def subscribed(
    api: Api,
    db: Database,
    stand_in: StripeStandIn,
    price: str,
    *,
    elapsed: int = 10 * DAY,
    who: str = "ada",
) -> tuple[Person, dict[str, Any]]:
    """Ada (or `who`), on `price` through Stripe (`sub_<who>`, `cus_<who>`), `elapsed` seconds
    into the monthly period."""
    person = Person(api, db, f"{who}@example.com", who.title())
    link(db, person.id, f"cus_{who}")
    sub = stand_in.subscribe(f"sub_{who}", customer=f"cus_{who}", price=price)
    back_to(stand_in, f"sub_{who}", elapsed)
    now = int(time.time()) - 60  # subscribed a minute ago: what follows is newer
    post_event(api, stripe_event("customer.subscription.created", sub, created=now))
    item = sub["items"]["data"][0]
    line = shapes.invoice_line(
        f"il_first_{who}",
        invoice_id=f"in_first_{who}",
        subscription_id=f"sub_{who}",
        subscription_item=item["id"],
        price_id=price,
        product_id="prod_plan",
        amount=PRICES[price][0],
        currency="usd",
        quantity=1,
        start=item["current_period_start"],
        end=item["current_period_end"],
    )
    first = shapes.invoice(
        f"in_first_{who}",
        customer_id=f"cus_{who}",
        subscription_id=f"sub_{who}",
        lines=[line],
        created=now,
        currency="usd",
        paid=True,
    ) | {"billing_reason": "subscription_create"}
    post_event(api, stripe_event("invoice.paid", first, created=now + 1))
    settle(api)
    return person, stand_in.subscriptions[f"sub_{who}"]


def generations(person: Person) -> tuple[int, int]:
    """What the person's credits of `generations` granted and what is left."""
    [held] = [c for c in person.call("GET", "/api/me").json()["credits"]]
    return held["granted"], held["balance"]


def back_to(stand_in: StripeStandIn, sid: str, elapsed: int) -> None:
    """The subscription's period started `elapsed` seconds ago."""
    now = int(time.time())
    for item in stand_in.subscriptions[sid]["items"]["data"]:
        length = item["current_period_end"] - item["current_period_start"]
        item["current_period_start"] = now - elapsed
        item["current_period_end"] = now - elapsed + length


def deliver_new_events(api: Api, stand_in: StripeStandIn, seen: int) -> int:
    """Deliver the events the stand-in recorded since `seen` (oldest first) to the webhook."""
    fresh = list(reversed(stand_in.events[: len(stand_in.events) - seen]))
    for event in fresh:
        data = event["data"]
        body = stripe_event(
            event["type"],
            data["object"],
            created=event["created"],
            event_id=event["id"],
            previous=data.get("previous_attributes"),
        )
        post_event(api, body)
    settle(api)
    return len(stand_in.events)


def test_an_upgrade_charges_now_exactly_what_its_preview_said(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, sub = subscribed(api, db, catalogue, BASIC)
    start, end = (
        sub["items"]["data"][0]["current_period_start"],
        sub["items"]["data"][0]["current_period_end"],
    )
    shown = ada.call("POST", "/api/payments/preview-change", {"priceId": BASIC, "newPriceId": PRO})
    assert shown.status_code == 200, shown.text
    preview = shown.json()
    at = int(preview["prorationDate"].split(".")[0])
    left, length = end - at, end - start
    credit, charge = -round(1000 * left / length), round(3000 * left / length)
    assert preview["effective"] == "now"
    assert [line["amount"] for line in preview["lines"]] == [credit, charge]
    assert preview["amountDue"] == credit + charge
    assert preview["currency"] == "usd"
    assert preview["nextCharge"] == {"amount": 3000, "at": end}
    assert "Unused time on Plan" in preview["lines"][0]["description"]
    # Nothing changed: no invoice, the same price.
    assert catalogue.invoices == {}
    assert catalogue.subscriptions["sub_ada"]["items"]["data"][0]["price"]["id"] == BASIC

    seen = len(catalogue.events)
    changed = ada.call(
        "POST",
        "/api/payments/change-plan",
        {"priceId": BASIC, "newPriceId": PRO, "prorationDate": preview["prorationDate"]},
    )
    assert changed.status_code == 200, changed.text
    [update] = catalogue.calls("POST", "/v1/subscriptions/sub_ada")
    assert update.form() | {} == {
        "items": [{"id": sub["items"]["data"][0]["id"], "price": PRO, "quantity": "1"}],
        "proration_behavior": "always_invoice",
        "proration_date": str(at),
        "payment_behavior": "pending_if_incomplete",
    }
    [invoice] = catalogue.invoices.values()
    assert invoice["billing_reason"] == "subscription_update"
    assert invoice["amount_paid"] == preview["amountDue"]
    assert catalogue.subscriptions["sub_ada"]["items"]["data"][0]["price"]["id"] == PRO

    deliver_new_events(api, catalogue, seen)
    me = ada.call("GET", "/api/me").json()
    assert [e["priceId"] for e in me["entitlements"]] == [PRO]
    # The upgrade paid: the period holds the new plan's credits, not both plans'.
    assert generations(ada) == (CREDITS[PRO], CREDITS[PRO])
    # Its receipt names the new plan and what was charged now (the proration's lines).
    charged = format_amount(preview["amountDue"], "usd")
    [receipt] = [m for m in outbox(api) if m["Subject"].startswith("Receipt")]
    assert receipt["Subject"] == f"Receipt: {charged} for Plan {PRO}"
    assert charged in text_of(receipt)

    # The same preview again: the subscription changed since, so it no longer holds.
    again = ada.call(
        "POST",
        "/api/payments/change-plan",
        {"priceId": PRO, "newPriceId": PRO_YEARLY, "prorationDate": preview["prorationDate"]},
    )
    assert again.status_code == 409
    assert again.json()["preview"]["effective"] == "period_end"
    assert len(catalogue.invoices) == 1


def test_a_proration_date_is_bound_to_its_preview(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, sub = subscribed(api, db, catalogue, BASIC)
    preview = ada.call(
        "POST", "/api/payments/preview-change", {"priceId": BASIC, "newPriceId": PRO}
    ).json()
    at, mac = preview["prorationDate"].split(".")
    body = {"priceId": BASIC, "newPriceId": PRO}
    # A date the client picked (the start of the period: the cheapest), with the same signature.
    start = sub["items"]["data"][0]["current_period_start"]
    moved = ada.call(
        "POST", "/api/payments/change-plan", body | {"prorationDate": f"{start}.{mac}"}
    )
    assert moved.status_code == 409
    assert moved.json()["preview"]["prorationDate"] != f"{start}.{mac}"
    # Not a date at all.
    for bad in ("now", str(start), f"{at}.xyz"):
        refused = ada.call("POST", "/api/payments/change-plan", body | {"prorationDate": bad})
        assert refused.status_code == 400, bad
        assert "prorationDate" in refused.json()["error"]
    # The preview of another change (a yearly plan) does not buy this one.
    other = ada.call(
        "POST", "/api/payments/preview-change", {"priceId": BASIC, "newPriceId": PRO_YEARLY}
    ).json()
    mixed = ada.call(
        "POST", "/api/payments/change-plan", body | {"prorationDate": other["prorationDate"]}
    )
    assert mixed.status_code == 409
    # A preview older than its lifetime, signed right.
    old = int(time.time()) - rules.PREVIEW_LIFETIME_SECONDS - 60
    stale = rules.sign_proration(
        DEV_WEBHOOK_SECRET,
        subscription_id="sub_ada",
        wanted=rules.plan_of(catalogue.prices[PRO], 1),
        at=old,
        state=rules.state_of(catalogue.subscriptions["sub_ada"]),
    )
    expired = ada.call("POST", "/api/payments/change-plan", body | {"prorationDate": stale})
    assert expired.status_code == 409
    assert catalogue.calls("POST", "/v1/subscriptions/sub_ada") == []
    assert catalogue.invoices == {}


def test_a_refused_payment_leaves_the_old_plan(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, BASIC)
    preview = ada.call(
        "POST", "/api/payments/preview-change", {"priceId": BASIC, "newPriceId": PRO}
    ).json()
    catalogue.decline_payments = True
    refused = ada.call(
        "POST",
        "/api/payments/change-plan",
        {"priceId": BASIC, "newPriceId": PRO, "prorationDate": preview["prorationDate"]},
    )
    assert refused.status_code == 409
    assert "refused" in refused.json()["error"]
    held = catalogue.subscriptions["sub_ada"]
    assert held["items"]["data"][0]["price"]["id"] == BASIC
    assert held["pending_update"]["subscription_items"][0]["price"]["id"] == PRO


def test_a_downgrade_waits_for_the_period_end(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, sub = subscribed(api, db, catalogue, PRO)
    end = sub["items"]["data"][0]["current_period_end"]
    body = {"priceId": PRO, "newPriceId": PRO_YEARLY}  # a longer interval, less a month
    preview = ada.call("POST", "/api/payments/preview-change", body).json()
    assert preview["effective"] == "period_end"
    assert preview["effectiveAt"] == end
    assert preview["amountDue"] == 0
    assert preview["nextCharge"] == {"amount": 24000, "at": end}
    seen = len(catalogue.events)
    changed = ada.call(
        "POST", "/api/payments/change-plan", body | {"prorationDate": preview["prorationDate"]}
    )
    assert changed.status_code == 200, changed.text
    assert catalogue.invoices == {}
    held = catalogue.subscriptions["sub_ada"]
    assert held["items"]["data"][0]["price"]["id"] == PRO
    [schedule] = catalogue.schedules.values()
    assert [p["items"][0]["price"] for p in schedule["phases"]] == [PRO, PRO_YEARLY]
    assert schedule["phases"][1]["start_date"] == end
    seen = deliver_new_events(api, catalogue, seen)
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    assert held["priceId"] == PRO
    scheduled = held["scheduledChange"]
    assert (scheduled["priceId"], scheduled["quantity"]) == (PRO_YEARLY, 1)
    assert datetime.fromisoformat(scheduled["at"]).timestamp() == end
    assert held["cancelAt"] is None

    # The period ends: the yearly plan starts, invoiced whole.
    catalogue.end_period("sub_ada")
    assert catalogue.subscriptions["sub_ada"]["items"]["data"][0]["price"]["id"] == PRO_YEARLY
    [invoice] = catalogue.invoices.values()
    assert invoice["billing_reason"] == "subscription_cycle"
    assert invoice["amount_paid"] == 24000
    deliver_new_events(api, catalogue, seen)
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    assert (held["priceId"], held["scheduledChange"]) == (PRO_YEARLY, None)


def test_only_the_teams_managers_change_its_plan_and_seats(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    grace = Person(api, db, "grace@example.com")
    stranger = Person(api, db, "eve@example.com")
    join(api, team, ada, grace)
    with db.transaction() as conn:
        conn.execute("update public.accounts set customer_id = 'cus_team' where id = %s", (team,))
    sub = catalogue.subscribe(
        "sub_team", customer="cus_team", price=SEATS, quantity=2, status="trialing"
    )
    sub["trial_end"] = sub["items"]["data"][0]["current_period_end"]
    post_event(
        api, stripe_event("customer.subscription.created", sub, created=int(time.time()) - 60)
    )
    settle(api)
    body = {"priceId": SEATS, "teamId": team, "quantity": 3}
    assert stranger.call("POST", "/api/payments/preview-change", body).status_code == 404
    assert grace.call("POST", "/api/payments/preview-change", body).status_code == 403
    assert (
        ada.call("POST", "/api/payments/preview-change", body | {"teamId": None}).status_code == 404
    )

    # A trialing team adds a seat: nothing is charged during the trial.
    shown = ada.call("POST", "/api/payments/preview-change", body)
    assert shown.status_code == 200, shown.text
    assert shown.json()["effective"] == "now"
    assert shown.json()["amountDue"] == 0
    more = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 3})
    assert more.status_code == 200, more.text
    assert more.json() == {"total": 3, "used": 2}
    assert catalogue.subscriptions["sub_team"]["items"]["data"][0]["quantity"] == 3
    # The same request again answers as the first did, and asks Stripe for nothing.
    updates = len(catalogue.calls("POST", "/v1/subscriptions/sub_team"))
    again = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 3})
    assert (again.status_code, again.json()) == (200, {"total": 3, "used": 2})
    assert len(catalogue.calls("POST", "/v1/subscriptions/sub_team")) == updates

    # Fewer seats wait for the period's end: the seats stay until then.
    fewer = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 2})
    assert fewer.status_code == 200, fewer.text
    assert fewer.json() == {"total": 3, "used": 2}
    assert catalogue.subscriptions["sub_team"]["items"]["data"][0]["quantity"] == 3
    [schedule] = catalogue.schedules.values()
    assert schedule["phases"][1]["items"][0]["quantity"] == 2
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    assert (held["teamId"], held["scheduledChange"]["quantity"]) == (team, 2)


def test_a_cancellation_offers_the_coupon_once_then_cancels_with_its_reason(
    api_factory: Any, db: Database, catalogue: StripeStandIn
) -> None:
    api = api_factory(retention_coupon="stay_with_us")
    catalogue.hold_coupon("stay_with_us", percent_off=50, duration_in_months=3)
    ada, sub = subscribed(api, db, catalogue, PRO)
    body = {"priceId": PRO, "reason": "too_expensive", "comment": "Too dear for now"}
    assert ada.call("POST", "/api/payments/cancel", body | {"reason": "bored"}).status_code == 400
    offered = ada.call("POST", "/api/payments/cancel", body)
    assert offered.status_code == 200, offered.text
    assert offered.json() == {
        "offer": {
            "coupon": "stay_with_us",
            "percentOff": 50.0,
            "duration": "repeating",
            "durationInMonths": 3,
        }
    }
    assert catalogue.calls("POST", "/v1/subscriptions/sub_ada") == []

    # Two accepts at once: the coupon applies once.
    with ThreadPoolExecutor(2) as pool:
        answers = list(
            pool.map(
                lambda _: ada.call("POST", "/api/payments/cancel", body | {"offer": "accept"}),
                range(2),
            )
        )
    assert sorted(a.status_code for a in answers) == [200, 409]
    [kept] = [a.json() for a in answers if a.status_code == 200]
    assert kept["kept"] is True
    [applied] = catalogue.calls("POST", "/v1/subscriptions/sub_ada")
    assert applied.form() == {"discounts": [{"coupon": "stay_with_us"}]}
    assert catalogue.coupons["stay_with_us"]["times_redeemed"] == 1
    held = catalogue.subscriptions["sub_ada"]
    assert held["cancel_at_period_end"] is False

    # Cancelling again: no second offer, the cancellation is made with its reason.
    seen = len(catalogue.events)
    done = ada.call("POST", "/api/payments/cancel", body)
    assert done.status_code == 200, done.text
    end = sub["items"]["data"][0]["current_period_end"]
    assert done.json() == {"cancelAt": end}
    assert held["cancel_at_period_end"] is True
    assert held["cancellation_details"] == {
        "comment": "Too dear for now",
        "feedback": "too_expensive",
        "reason": "cancellation_requested",
    }
    deliver_new_events(api, catalogue, seen)
    [entitled] = ada.call("GET", "/api/me").json()["entitlements"]
    assert datetime.fromisoformat(entitled["cancelAt"]).timestamp() == end
    # Resumed: it renews again; a second resume has nothing to undo.
    assert ada.call("POST", "/api/payments/resume", {"priceId": PRO}).json() == {
        "resumed": "cancellation"
    }
    assert held["cancel_at_period_end"] is False
    assert ada.call("POST", "/api/payments/resume", {"priceId": PRO}).status_code == 409


def test_resume_undoes_a_downgrade_only_before_it_takes_effect(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, PRO)
    body = {"priceId": PRO, "newPriceId": BASIC}
    preview = ada.call("POST", "/api/payments/preview-change", body).json()
    scheduled = ada.call(
        "POST", "/api/payments/change-plan", body | {"prorationDate": preview["prorationDate"]}
    )
    assert scheduled.status_code == 200, scheduled.text
    assert ada.call("POST", "/api/payments/resume", {"priceId": PRO}).json() == {
        "resumed": "change"
    }
    [schedule] = catalogue.schedules.values()
    assert schedule["status"] == "released"
    assert catalogue.subscriptions["sub_ada"]["schedule"] is None
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    assert held["scheduledChange"] is None

    # Scheduled again, then the period ends: the downgrade took effect, nothing to undo.
    preview = ada.call("POST", "/api/payments/preview-change", body).json()
    again = ada.call(
        "POST", "/api/payments/change-plan", body | {"prorationDate": preview["prorationDate"]}
    )
    assert again.status_code == 200, again.text
    seen = len(catalogue.events)
    catalogue.end_period("sub_ada")
    deliver_new_events(api, catalogue, seen)
    assert catalogue.subscriptions["sub_ada"]["items"]["data"][0]["price"]["id"] == BASIC
    refused = ada.call("POST", "/api/payments/resume", {"priceId": BASIC})
    assert refused.status_code == 409
    assert "taken effect" in refused.json()["error"]
    assert catalogue.subscriptions["sub_ada"]["items"]["data"][0]["price"]["id"] == BASIC


def test_an_upgrade_in_the_last_hours_then_a_downgrade_grant_no_more_than_the_top_plan(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, BASIC, elapsed=30 * DAY - 7200)
    assert generations(ada) == (CREDITS[BASIC], CREDITS[BASIC])
    up = {"priceId": BASIC, "newPriceId": PRO}
    preview = ada.call("POST", "/api/payments/preview-change", up).json()
    assert 0 < preview["amountDue"] < 10  # two hours of the difference
    seen = len(catalogue.events)
    applied = ada.call(
        "POST", "/api/payments/change-plan", up | {"prorationDate": preview["prorationDate"]}
    )
    assert applied.status_code == 200, applied.text
    seen = deliver_new_events(api, catalogue, seen)
    # Stripe delivers the proration's invoice again: it grants nothing twice.
    [paid] = [e for e in catalogue.events if e["type"] == "invoice.paid"]
    post_event(api, stripe_event("invoice.paid", paid["data"]["object"], event_id=paid["id"]))
    settle(api)
    assert generations(ada) == (CREDITS[PRO], CREDITS[PRO])

    # Back down within the period: scheduled, nothing granted or taken back now.
    down = {"priceId": PRO, "newPriceId": BASIC}
    preview = ada.call("POST", "/api/payments/preview-change", down).json()
    assert preview["effective"] == "period_end"
    back = ada.call(
        "POST", "/api/payments/change-plan", down | {"prorationDate": preview["prorationDate"]}
    )
    assert back.status_code == 200, back.text
    deliver_new_events(api, catalogue, seen)
    assert generations(ada) == (CREDITS[PRO], CREDITS[PRO])


def test_a_cancellation_in_the_portal_reaches_what_the_route_reaches(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, sub = subscribed(api, db, catalogue, PRO)
    grace, grace_sub = subscribed(api, db, catalogue, PRO, who="grace")
    ends = {
        ada.email: sub["items"]["data"][0]["current_period_end"],
        grace.email: grace_sub["items"]["data"][0]["current_period_end"],
    }
    seen = len(catalogue.events)
    routed = ada.call("POST", "/api/payments/cancel", {"priceId": PRO, "reason": "unused"})
    assert routed.status_code == 200, routed.text
    portal = grace.call(
        "POST", "/api/payments/create-portal", {"returnUrl": "https://app.example.com/account"}
    )
    assert portal.status_code == 200, portal.text
    page = requests.post(
        portal.json()["url"],
        data={"subscription": "sub_grace", "cancel": "1"},
        timeout=5,
        allow_redirects=False,
    )
    assert page.status_code == 303
    deliver_new_events(api, catalogue, seen)
    for person in (ada, grace):
        [held] = person.call("GET", "/api/me").json()["entitlements"]
        assert (held["active"], held["cancelAtPeriodEnd"]) == (True, True)
        assert datetime.fromisoformat(held["cancelAt"]).timestamp() == ends[person.email]
        [told] = [m for m in outbox(api) if m["To"] == person.email and "cancelled" in m["Subject"]]
        assert "Plan price_plan_pro" in told["Subject"]


def test_a_preview_confirmed_twice_at_once_charges_once_and_only_plans_sold_here_are_taken(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, BASIC)
    # A price Stripe has that this service does not sell, and seats of a plan not sold per seat.
    catalogue.prices["price_elsewhere"] = shapes.price(
        "price_elsewhere", "prod_plan", 1, "month", created=0
    )
    for body, field in (
        ({"priceId": BASIC, "newPriceId": "price_elsewhere"}, "newPriceId"),
        ({"priceId": BASIC, "newPriceId": PRO, "quantity": 5}, "quantity"),
    ):
        refused = ada.call("POST", "/api/payments/preview-change", body)
        assert refused.status_code == 400, body
        assert field in refused.json()["error"]
    up = {"priceId": BASIC, "newPriceId": PRO}
    preview = ada.call("POST", "/api/payments/preview-change", up).json()
    confirm = up | {"prorationDate": preview["prorationDate"]}
    with ThreadPoolExecutor(2) as pool:
        answers = list(
            pool.map(lambda _: ada.call("POST", "/api/payments/change-plan", confirm), range(2))
        )
    assert all(a.status_code in (200, 409) for a in answers), [a.text for a in answers]
    assert 200 in [a.status_code for a in answers]
    [invoice] = catalogue.invoices.values()
    assert invoice["amount_paid"] == preview["amountDue"]


def test_a_refused_upgrade_over_a_scheduled_downgrade_tells_the_truth_about_both(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, PRO_YEARLY)
    down = {"priceId": PRO_YEARLY, "newPriceId": BASIC}
    preview = ada.call("POST", "/api/payments/preview-change", down).json()
    assert preview["effective"] == "period_end"
    done = ada.call(
        "POST", "/api/payments/change-plan", down | {"prorationDate": preview["prorationDate"]}
    )
    assert done.status_code == 200, done.text
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    assert held["scheduledChange"]["priceId"] == BASIC
    # An upgrade now, its payment refused: it releases the downgrade's schedule first.
    up = {"priceId": PRO_YEARLY, "newPriceId": PRO}
    preview = ada.call("POST", "/api/payments/preview-change", up).json()
    assert preview["effective"] == "now"
    catalogue.decline_payments = True
    refused = ada.call(
        "POST", "/api/payments/change-plan", up | {"prorationDate": preview["prorationDate"]}
    )
    assert refused.status_code == 409
    held_at_stripe = catalogue.subscriptions["sub_ada"]
    assert held_at_stripe["items"]["data"][0]["price"]["id"] == PRO_YEARLY
    still = rules.scheduled_change(
        catalogue.schedules.get(str(held_at_stripe.get("schedule"))), now=int(time.time())
    )
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    # What the page says is scheduled is what Stripe will do at the period's end.
    told = held["scheduledChange"]
    said = (told["priceId"], told["quantity"]) if told else None
    assert said == ((still[0], still[1]) if still else None)
    if still is None:
        assert "scheduled" in refused.json()["error"]


def test_a_subscription_set_to_end_is_not_changed_nor_promised_a_next_charge(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, PRO)
    seen = len(catalogue.events)
    done = ada.call("POST", "/api/payments/cancel", {"priceId": PRO, "reason": "unused"})
    assert done.status_code == 200, done.text
    deliver_new_events(api, catalogue, seen)
    calls = len(catalogue.calls("POST", "/v1/subscriptions/sub_ada"))
    for new in (BASIC, PRO_YEARLY):  # a downgrade: nothing is charged at an end that comes
        body = {"priceId": PRO, "newPriceId": new}
        shown = ada.call("POST", "/api/payments/preview-change", body)
        assert shown.status_code == 409, shown.text
        assert "resume" in shown.json()["error"]
        signed = rules.sign_proration(
            DEV_WEBHOOK_SECRET,
            subscription_id="sub_ada",
            wanted=rules.plan_of(catalogue.prices[new], 1),
            at=int(time.time()),
            state=rules.state_of(catalogue.subscriptions["sub_ada"]),
        )
        changed = ada.call("POST", "/api/payments/change-plan", body | {"prorationDate": signed})
        assert changed.status_code == 409, changed.text
    assert catalogue.schedules == {}
    assert len(catalogue.calls("POST", "/v1/subscriptions/sub_ada")) == calls
    [held] = ada.call("GET", "/api/me").json()["entitlements"]
    assert held["scheduledChange"] is None
    assert held["cancelAt"] is not None


def test_an_upgrade_to_a_longer_interval_grants_the_new_plans_credits_for_its_whole_period(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.products set credits = '{\"generations\": 300}',"
            " credits_period = 'period' where stripe_price_id = %s",
            (PRO_YEARLY,),
        )
    ada, sub = subscribed(api, db, catalogue, BASIC)
    month_end = sub["items"]["data"][0]["current_period_end"]
    up = {"priceId": BASIC, "newPriceId": PRO_YEARLY}
    preview = ada.call("POST", "/api/payments/preview-change", up).json()
    assert preview["effective"] == "now"
    seen = len(catalogue.events)
    applied = ada.call(
        "POST", "/api/payments/change-plan", up | {"prorationDate": preview["prorationDate"]}
    )
    assert applied.status_code == 200, applied.text
    deliver_new_events(api, catalogue, seen)
    # A year paid whole (the month's unused time credited back): the year holds the yearly
    # plan's credits, before and after the month's end, and never both plans' at once.
    assert generations(ada) == (300, 300)
    rows = db.fetch_all(
        "select coalesce(sum(amount), 0)::int as held from public.credit_grants"
        " where subscription_id = 'sub_ada' and feature = 'generations'"
        " and starts_at <= to_timestamp(%s) and expires_at > to_timestamp(%s)"
        " and (ended_at is null or ended_at > to_timestamp(%s))",
        (month_end + DAY, month_end + DAY, month_end + DAY),
    )
    assert rows[0]["held"] == 300


def test_seats_of_a_plan_no_longer_sold_are_only_for_a_plan_sold_per_seat(
    api: Api, db: Database, catalogue: StripeStandIn
) -> None:
    ada, _ = subscribed(api, db, catalogue, BASIC)
    with db.transaction() as conn:  # the plan Ada holds is no longer sold
        conn.execute(
            "update public.products set is_active = false where stripe_price_id = %s", (BASIC,)
        )
    body = {"priceId": BASIC, "quantity": 5}
    refused = ada.call("POST", "/api/payments/preview-change", body)
    assert refused.status_code == 400, refused.text
    assert "quantity" in refused.json()["error"]
    assert catalogue.calls("POST", "/v1/invoices/create_preview") == []


def test_accepting_the_retention_offer_keeps_the_discounts_held_already(
    api_factory: Any, db: Database, catalogue: StripeStandIn
) -> None:
    api = api_factory(retention_coupon="stay_with_us")
    catalogue.hold_coupon("stay_with_us", percent_off=50, duration_in_months=3)
    catalogue.hold_coupon("launch", percent_off=20, duration="forever")
    ada, sub = subscribed(api, db, catalogue, PRO)
    with catalogue.lock:  # a discount from the checkout, for good
        catalogue.apply_discounts(sub, [{"coupon": "launch"}])
    [launch] = sub["discounts"]
    body = {"priceId": PRO, "reason": "too_expensive"}
    assert "offer" in ada.call("POST", "/api/payments/cancel", body).json()
    kept = ada.call("POST", "/api/payments/cancel", body | {"offer": "accept"})
    assert kept.status_code == 200, kept.text
    held = catalogue.subscriptions["sub_ada"]
    assert launch in held["discounts"]
    coupons = {catalogue.discount_objects[d]["source"]["coupon"] for d in held["discounts"]}
    assert coupons == {"launch", "stay_with_us"}
