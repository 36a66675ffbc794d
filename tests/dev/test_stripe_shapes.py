"""The Stripe stand-in's objects carry every field Stripe's carry, type by type, as Stripe's
published fixtures have them (tests/fixtures/stripe/fixtures3.json): what the service reads from
the stand-in is shaped as what it reads from Stripe. Each object is read through the API, made
as a buyer makes it: a checkout paid on the page, the subscription and customer it made, the
subscription updated, the catalogue, a portal session, the events sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from dev import stripe_shapes, stripe_stand_in
from dev.stripe_stand_in import StripeStandIn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stripe" / "fixtures3.json"
STRIPE = json.loads(FIXTURES.read_text())["resources"]


def fields(kind: str) -> set[str]:
    return set(STRIPE[kind])


@pytest.fixture(scope="module")
def paid() -> Iterator[tuple[StripeStandIn, dict[str, Any]]]:
    """A subscription bought for 3 seats and paid, and a one-time purchase paid."""
    with stripe_stand_in.running() as stand_in:
        made = {
            "subscription": buy(stand_in, "subscription", "price_demo_team_monthly", 3),
            "payment": buy(stand_in, "payment", "price_demo_pro_github", 1),
        }
        yield stand_in, made


def buy(stand_in: StripeStandIn, mode: str, price: str, quantity: int) -> dict[str, Any]:
    """A checkout session paid on the stand-in's page, read back."""
    session = post(
        stand_in,
        "/v1/checkout/sessions",
        {
            "mode": mode,
            "line_items[0][price]": price,
            "line_items[0][quantity]": quantity,
            "success_url": "https://app.example.com/ok?session_id={CHECKOUT_SESSION_ID}",
            "cancel_url": "https://app.example.com/no",
            "customer_email": "ada@example.com",
            "metadata[price_id]": price,
        },
    )
    stand_in.complete(session["id"], email="ada@example.com")
    return get(stand_in, f"/v1/checkout/sessions/{session['id']}")


def post(stand_in: StripeStandIn, path: str, form: dict[str, Any]) -> dict[str, Any]:
    response = requests.post(stand_in.url + path, data=form, timeout=5)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def get(stand_in: StripeStandIn, path: str, **params: Any) -> dict[str, Any]:
    response = requests.get(stand_in.url + path, params=params, timeout=5)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_a_checkout_session_and_its_line_items(paid: tuple[StripeStandIn, Any]) -> None:
    stand_in, made = paid
    for session in made.values():
        assert set(session) == fields("checkout.session")
        read = get(stand_in, f"/v1/checkout/sessions/{session['id']}", **{"expand[]": "line_items"})
        assert set(read) == fields("checkout.session") | {"line_items"}
        [item] = read["line_items"]["data"]
        assert set(item) == fields("item")
        assert set(item["price"]) == fields("price")
        assert set(read["customer_details"]) == set(STRIPE["checkout.session"]["customer_details"])


def test_a_subscription_its_items_and_its_customer(paid: tuple[StripeStandIn, Any]) -> None:
    stand_in, made = paid
    session = made["subscription"]
    subscription = get(stand_in, f"/v1/subscriptions/{session['subscription']}")
    assert set(subscription) == fields("subscription")
    [item] = subscription["items"]["data"]
    assert set(item) == fields("subscription_item")
    assert set(item["price"]) == fields("price")
    assert set(item["price"]["recurring"]) == set(STRIPE["price"]["recurring"])
    assert set(item["plan"]) == set(STRIPE["subscription_item"]["plan"])
    assert item["quantity"] == 3
    updated = post(
        stand_in,
        f"/v1/subscriptions/{subscription['id']}",
        {"items[0][id]": item["id"], "items[0][quantity]": 2, "proration_behavior": "none"},
    )
    assert set(updated) == fields("subscription")
    assert updated["items"]["data"][0]["quantity"] == 2
    customer = get(stand_in, f"/v1/customers/{session['customer']}")
    assert set(customer) == fields("customer")
    assert customer["email"] == "ada@example.com"


def test_the_catalogue(paid: tuple[StripeStandIn, Any]) -> None:
    stand_in, _ = paid
    for product in get(stand_in, "/v1/products")["data"]:
        assert set(product) == fields("product")
    for price in get(stand_in, "/v1/prices")["data"]:
        assert set(price) == fields("price")
    made = post(stand_in, "/v1/products", {"name": "Course", "metadata[type]": "link"})
    assert set(made) == fields("product")
    priced = post(
        stand_in,
        "/v1/prices",
        {
            "product": made["id"],
            "unit_amount": 900,
            "currency": "usd",
            "recurring[interval]": "year",
        },
    )
    assert set(priced) == fields("price")
    assert set(priced["recurring"]) == set(STRIPE["price"]["recurring"])
    feature = stripe_shapes.product_feature("sso", "SSO")
    assert set(feature) == fields("product_feature")
    assert set(feature["entitlement_feature"]) == fields("entitlements.feature")


def test_a_portal_session_and_the_events(paid: tuple[StripeStandIn, Any]) -> None:
    stand_in, made = paid
    portal = post(
        stand_in,
        "/v1/billing_portal/sessions",
        {"customer": made["payment"]["customer"], "return_url": "https://app.example.com/"},
    )
    assert set(portal) == fields("billing_portal.session")
    # A subscription of this test's own, changed here: its update event is there in any order.
    bought = buy(stand_in, "subscription", "price_demo_team_monthly", 2)
    subscription = get(stand_in, f"/v1/subscriptions/{bought['subscription']}")
    item = subscription["items"]["data"][0]
    post(
        stand_in,
        f"/v1/subscriptions/{subscription['id']}",
        {"items[0][id]": item["id"], "items[0][quantity]": 3, "proration_behavior": "none"},
    )
    events = get(stand_in, "/v1/events", limit=100)["data"]
    assert {e["type"] for e in events} >= {
        "checkout.session.completed",
        "customer.subscription.created",
        "customer.subscription.updated",
    }
    for event in events:
        assert set(event) == fields("event")
        kind = event["data"]["object"]["object"]
        assert set(event["data"]["object"]) == fields(kind)
