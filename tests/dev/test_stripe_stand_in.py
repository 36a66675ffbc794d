"""The Stripe stand-in's catalogue: the demo products paged as Stripe pages them, and a product
a founder creates or archives there reaching the table through the same sync as Stripe's."""

from __future__ import annotations

from typing import Any

import requests

from adapters.db.pool import Database
from adapters.stripe_api import StripeGateway
from catalogue.service import sync
from core.stripe_objects import CURRENT_VERSION
from dev import stripe_stand_in
from dev.samples import catalogue
from tests.dev.test_stand_in_checkout import commands_of


def active(db: Database) -> set[str]:
    rows = db.fetch_all("select stripe_price_id from public.products where is_active")
    return {r["stripe_price_id"] for r in rows}


def test_the_demo_catalogue_is_paged_as_stripe_pages_it() -> None:
    with stripe_stand_in.running() as stand_in:
        seen: list[str] = []
        after: dict[str, Any] = {}
        while True:
            page = requests.get(
                f"{stand_in.url}/v1/prices", params={"limit": 2, **after}, timeout=5
            ).json()
            seen += [p["id"] for p in page["data"]]
            if not page["has_more"]:
                break
            after = {"starting_after": seen[-1]}
    assert seen == [p["id"] for p in catalogue.PRICES]


def test_a_product_created_and_archived_in_the_stand_in_is_synced(db: Database) -> None:
    with stripe_stand_in.running() as stand_in:
        gateway = StripeGateway(
            api_key=stripe_stand_in.API_KEY,
            api_base=stand_in.url,
            api_version=CURRENT_VERSION,
            timeout=5,
        )
        assert sync(db, gateway).sold == len(catalogue.PRICES)
        form = {"name": "Course", "metadata[type]": "link", "metadata[features]": "videos"}
        made = requests.post(f"{stand_in.url}/v1/products", data=form, timeout=5).json()
        price = requests.post(
            f"{stand_in.url}/v1/prices",
            data={"product": made["id"], "unit_amount": 2900, "currency": "usd"},
            timeout=5,
        ).json()
        sync(db, gateway)
        assert price["id"] in active(db)
        [row] = db.fetch_all(
            "select name, price, features from public.products where stripe_price_id = %s",
            (price["id"],),
        )
        assert (row["name"], str(row["price"]), row["features"]) == ("Course", "29.00", ["videos"])
        requests.post(
            f"{stand_in.url}/v1/prices/{price['id']}", data={"active": "false"}, timeout=5
        )
        sync(db, gateway)
        assert price["id"] not in active(db)
        assert active(db) == {p["id"] for p in catalogue.PRICES}


def test_under_managed_payments_the_sync_sells_a_product_once_it_has_a_tax_code(
    db: Database,
) -> None:
    with stripe_stand_in.running() as stand_in:
        gateway = StripeGateway(
            api_key=stripe_stand_in.API_KEY,
            api_base=stand_in.url,
            api_version=CURRENT_VERSION,
            timeout=5,
        )
        made = requests.post(
            f"{stand_in.url}/v1/products",
            data={"name": "Course", "metadata[type]": "link"},
            timeout=5,
        ).json()
        form = {"product": made["id"], "unit_amount": 2900, "currency": "eur"}
        price = requests.post(
            f"{stand_in.url}/v1/prices", data={**form, "tax_behavior": "inclusive"}, timeout=5
        ).json()
        synced = sync(db, gateway, needs_tax_code=True)
        assert synced.problems == (
            f"product {made['id']} is not sold: no tax code: Managed Payments (CHECKOUT_TAX)"
            " sells only products with a tax code eligible for it",
        )
        assert price["id"] not in active(db)
        requests.post(
            f"{stand_in.url}/v1/products/{made['id']}",
            data={"tax_code": "txcd_10103000"},
            timeout=5,
        )
        assert sync(db, gateway, needs_tax_code=True).problems == ()
        [row] = db.fetch_all(
            "select currency, tax_behavior, tax_code, is_active from public.products"
            " where stripe_price_id = %s",
            (price["id"],),
        )
        assert row == {
            "currency": "eur",
            "tax_behavior": "inclusive",
            "tax_code": "txcd_10103000",
            "is_active": True,
        }


def refusal(stand_in: stripe_stand_in.StripeStandIn, form: dict[str, Any]) -> tuple[int, Any]:
    answer = requests.post(f"{stand_in.url}/v1/checkout/sessions", data=form, timeout=5)
    return answer.status_code, answer.json().get("error", {}).get("param")


def test_it_refuses_the_checkouts_stripe_refuses() -> None:
    one_time = {
        "mode": "payment",
        "line_items[0][price]": "price_demo_pro_github",
        "success_url": "https://app.example.com/ok",
        "cancel_url": "https://app.example.com/no",
    }
    with stripe_stand_in.running() as stand_in:
        # A quantity on a one-time line item is fine, as at Stripe.
        assert refusal(stand_in, {**one_time, "line_items[0][quantity]": "3"}) == (200, None)
        trial = {"subscription_data[trial_period_days]": "14"}
        assert refusal(stand_in, {**one_time, **trial}) == (400, "subscription_data")
        both = {"customer": "cus_1", "customer_email": "a@example.com"}
        assert refusal(stand_in, {**one_time, **both}) == (400, "customer_email")
        monthly = {**one_time, "line_items[0][price]": "price_demo_team_monthly"}
        assert refusal(stand_in, monthly) == (400, "mode")
        created = {**monthly, "mode": "subscription", "customer_creation": "always"}
        assert refusal(stand_in, created) == (400, "customer_creation")
        coupon = {"discounts[0][coupon]": "c1", "allow_promotion_codes": "true"}
        assert refusal(stand_in, {**one_time, **coupon}) == (400, "allow_promotion_codes")
        assert len(stand_in.sessions) == 1


def test_a_subscription_update_names_a_known_proration() -> None:
    with stripe_stand_in.running() as stand_in:
        made = stand_in.subscribe("sub_1", price="price_demo_team_monthly", quantity=3)
        item = made["items"]["data"][0]["id"]
        url = f"{stand_in.url}/v1/subscriptions/sub_1"
        change = {"items[0][id]": item, "items[0][quantity]": "2"}
        wrong = requests.post(url, data={**change, "proration_behavior": "later"}, timeout=5)
        assert (wrong.status_code, wrong.json()["error"]["param"]) == (400, "proration_behavior")
        assert stand_in.subscriptions["sub_1"]["items"]["data"][0]["quantity"] == 3
        right = requests.post(
            url, data={**change, "proration_behavior": "create_prorations"}, timeout=5
        )
        assert right.json()["items"]["data"][0]["quantity"] == 2
        [updated] = stand_in.events
        assert updated["type"] == "customer.subscription.updated"
        assert updated["data"]["previous_attributes"]["items"]["data"][0]["quantity"] == 3
        gone = requests.get(f"{stand_in.url}/v1/subscriptions/sub_unknown", timeout=5)
        assert gone.status_code == 404


def test_the_page_prints_a_team_checkouts_team_and_quantity() -> None:
    with stripe_stand_in.running() as stand_in:
        created = requests.post(
            f"{stand_in.url}/v1/checkout/sessions",
            data={
                "mode": "subscription",
                "line_items[0][price]": "price_demo_team_monthly",
                "line_items[0][quantity]": "3",
                "metadata[team_id]": "team-1",
                "customer_email": "ada@example.com",
            },
            timeout=5,
        ).json()
        page = requests.get(created["url"], timeout=5).text
    for command in commands_of(page):
        assert "--team team-1 --quantity 3" in command


def test_an_event_it_sent_is_retrieved_as_stripe_retrieves_one() -> None:
    with stripe_stand_in.running() as stand_in:
        made = requests.post(
            f"{stand_in.url}/v1/checkout/sessions",
            data={"mode": "payment", "line_items[0][price]": "price_demo_pro_github"},
            timeout=5,
        ).json()
        [sent] = stand_in.complete(made["id"], email="ada@example.com")
        stripe = StripeGateway(
            api_key=stripe_stand_in.API_KEY,
            api_base=stand_in.url,
            api_version=CURRENT_VERSION,
            timeout=5,
        )
        found = stripe.event(sent["id"])
        unknown = requests.get(f"{stand_in.url}/v1/events/evt_never", timeout=5)
        assert stripe.event("evt_never") is None
    assert found is not None
    assert (found["id"], found["type"]) == (sent["id"], "checkout.session.completed")
    assert found["data"]["object"]["id"] == made["id"]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "resource_missing"


def test_with_automatic_tax_it_calculates_its_documented_rate() -> None:
    with stripe_stand_in.running() as stand_in:
        stand_in.prices["price_demo_pro_github"]["tax_behavior"] = "inclusive"
        answers = {}
        for price in ("price_demo_starter_one_time", "price_demo_pro_github"):
            made = requests.post(
                f"{stand_in.url}/v1/checkout/sessions",
                data={
                    "mode": "payment",
                    "line_items[0][price]": price,
                    "success_url": "https://app.example.com/ok",
                    "automatic_tax[enabled]": "true",
                    "tax_id_collection[enabled]": "true",
                },
                timeout=5,
            ).json()
            answers[price] = made
        # 19% on top of $49.00; 19% held in $149.00.
        starter = answers["price_demo_starter_one_time"]
        assert (starter["amount_subtotal"], starter["amount_total"]) == (4900, 5831)
        assert starter["total_details"]["amount_tax"] == 931
        assert starter["automatic_tax"]["status"] == "complete"
        pro = answers["price_demo_pro_github"]
        assert (pro["amount_subtotal"], pro["amount_total"]) == (14900, 14900)
        assert pro["total_details"]["amount_tax"] == 2379
        stand_in.complete(starter["id"], email="ada@example.com", tax_id="DE123456789")
        paid = requests.get(f"{stand_in.url}/v1/checkout/sessions/{starter['id']}", timeout=5)
        details = paid.json()["customer_details"]
        assert details["tax_ids"] == [{"type": "eu_vat", "value": "DE123456789"}]
        assert details["address"]["country"] == stripe_stand_in.TAX_LOCATION["country"]


def test_a_taxed_customers_address_is_kept_for_its_next_checkout() -> None:
    form = {
        "mode": "payment",
        "line_items[0][price]": "price_demo_starter_one_time",
        "success_url": "https://app.example.com/ok",
        "automatic_tax[enabled]": "true",
    }
    with stripe_stand_in.running() as stand_in:
        url = f"{stand_in.url}/v1/checkout/sessions"
        first = requests.post(url, data=form, timeout=5).json()
        stand_in.complete(first["id"], email="ada@example.com")
        customer = stand_in.sessions[first["id"]]["customer"]
        assert stand_in.customers[customer]["address"]["country"] == "DE"
        # Stripe Tax has the customer's address now: no customer_update needed.
        again = requests.post(url, data={**form, "customer": customer}, timeout=5)
        assert again.status_code == 200, again.text


def test_a_subscription_cancelled_at_once_ends_and_says_so() -> None:
    with stripe_stand_in.running() as stand_in:
        stand_in.subscribe("sub_1", customer="cus_1")
        gateway = StripeGateway(
            api_key=stripe_stand_in.API_KEY,
            api_base=stand_in.url,
            api_version=CURRENT_VERSION,
            timeout=5,
        )
        assert gateway.cancel_subscription_now("sub_1") is True
        found = stand_in.subscriptions["sub_1"]
        assert found["status"] == "canceled"
        assert found["canceled_at"] == found["ended_at"] is not None
        assert found["cancellation_details"]["reason"] == "cancellation_requested"
        assert stand_in.events[0]["type"] == "customer.subscription.deleted"
        # Ended: nothing to cancel, and no second DELETE; an unknown one is nothing to cancel.
        assert gateway.cancel_subscription_now("sub_1") is False
        assert gateway.cancel_subscription_now("sub_nope") is False
        assert len(stand_in.calls("DELETE", "/v1/subscriptions/")) == 1
        again = requests.delete(f"{stand_in.url}/v1/subscriptions/sub_1", timeout=5)
        assert again.status_code == 400
        assert again.json()["error"]["type"] == "invalid_request_error"


def test_a_redaction_job_validates_runs_and_redacts_under_a_preview_version() -> None:
    with stripe_stand_in.running() as stand_in:
        stand_in.customers["cus_1"] = {"id": "cus_1", "email": "a@example.com", "name": "Ada"}
        gateway = StripeGateway(
            api_key=stripe_stand_in.API_KEY,
            api_base=stand_in.url,
            api_version=CURRENT_VERSION,
            timeout=5,
        )
        preview = "2025-07-30.preview"
        job = gateway.create_redaction_job("cus_1", api_version=preview, idempotency_key="k1")
        assert job["object"] == "privacy.redaction_job"
        assert job["status"] == "validating"
        # The same key answers the same job.
        same = gateway.create_redaction_job("cus_1", api_version=preview, idempotency_key="k1")
        assert same["id"] == job["id"]
        assert len(stand_in.redaction_jobs) == 1
        assert gateway.redaction_job(job["id"], api_version=preview)["status"] == "ready"
        ran = gateway.run_redaction_job(job["id"], api_version=preview)
        assert ran["status"] == "redacting"
        assert stand_in.customers["cus_1"]["email"] == "[redacted]"
        assert gateway.redaction_job(job["id"], api_version=preview)["status"] == "succeeded"
        # Outside the preview (not its version, or an account not enrolled): refused.
        for version in (CURRENT_VERSION, None):
            headers = {"Stripe-Version": version} if version else {}
            refused = requests.post(
                f"{stand_in.url}/v1/privacy/redaction_jobs",
                data={"objects[customers][]": "cus_1"},
                headers=headers,
                timeout=5,
            )
            assert refused.status_code == 400
            assert refused.json()["error"]["type"] == "invalid_request_error"


def test_its_portal_shows_the_customers_subscriptions_changes_seats_cancels_and_links_back() -> (
    None
):
    with stripe_stand_in.running() as stand_in:
        stand_in.subscribe(
            "sub_mine", customer="cus_1", price="price_demo_team_monthly", quantity=3
        )
        stand_in.subscribe("sub_theirs", customer="cus_2", price="price_demo_team_monthly")
        portal = requests.post(
            f"{stand_in.url}/v1/billing_portal/sessions",
            data={"customer": "cus_1", "return_url": "http://localhost:8080/dashboard"},
            timeout=5,
        ).json()
        page = requests.get(portal["url"], timeout=5)
        assert page.status_code == 200
        assert "Team Monthly" in page.text
        assert "Quantity 3; active, renews on" in page.text
        assert 'href="http://localhost:8080/dashboard">Return to the site' in page.text
        assert "sub_theirs" not in page.text

        seats = requests.post(
            portal["url"], data={"subscription": "sub_mine", "quantity": "2"}, timeout=5
        )
        assert seats.status_code == 200  # the page again, after its redirect
        assert stand_in.subscriptions["sub_mine"]["items"]["data"][0]["quantity"] == 2
        assert stand_in.events[0]["type"] == "customer.subscription.updated"
        assert (
            stand_in.events[0]["data"]["previous_attributes"]["items"]["data"][0]["quantity"] == 3
        )

        cancelled = requests.post(
            portal["url"], data={"subscription": "sub_mine", "cancel": "1"}, timeout=5
        )
        assert cancelled.status_code == 200
        found = stand_in.subscriptions["sub_mine"]
        assert found["status"] == "active"  # until its period's end
        assert found["cancel_at_period_end"] is True
        assert found["cancel_at"] == found["items"]["data"][0]["current_period_end"]
        assert stand_in.events[0]["type"] == "customer.subscription.updated"
        assert "cancelled: ends on" in cancelled.text

        # Another customer's subscription, a bad quantity, an unknown portal: nothing changes.
        theirs = requests.post(
            portal["url"], data={"subscription": "sub_theirs", "cancel": "1"}, timeout=5
        )
        assert theirs.status_code == 404
        assert stand_in.subscriptions["sub_theirs"]["cancel_at_period_end"] is False
        bad = requests.post(
            portal["url"], data={"subscription": "sub_mine", "quantity": "0"}, timeout=5
        )
        assert bad.status_code == 400
        unknown = requests.get(f"{stand_in.url}/portal/bps_local_nope", timeout=5)
        assert unknown.status_code == 404
