"""CHECKOUT_TAX and CHECKOUT_ADAPTIVE_PRICING: what create-checkout sends Stripe for each, for a
new buyer and for one Stripe knows as a customer, each checked by the stand-in's rules (it
refuses what Stripe refuses), and those rules themselves."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from dev.auth_stand_in import AuthStandIn
from dev.samples import catalogue
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.billing.test_payments import URLS, checkout, signed_in
from tests.conftest import Api
from tests.helpers import HANG_GUARD

ONE_TIME = "price_demo_starter_one_time"
MONTHLY = "price_demo_team_monthly"
# The parameters the tax choice and the buyer decide.
DECIDED = (
    "automatic_tax",
    "billing_address_collection",
    "tax_id_collection",
    "customer_update",
    "managed_payments",
    "adaptive_pricing",
    "customer",
    "customer_email",
    "customer_creation",
)
STRIPE_TAX = {
    "automatic_tax": {"enabled": "true"},
    "billing_address_collection": "required",
    "tax_id_collection": {"enabled": "true"},
}
MANAGED = {"managed_payments": {"enabled": "true"}}
NEW = {"tax_id_collection": {"enabled": "true"}, "customer_email": "buyer@example.com"}
EXPECTED: dict[tuple[str, str], dict[str, Any]] = {
    ("none", "new"): NEW,
    ("none", "customer"): {"customer": "cus_known"},
    ("stripe_tax", "new"): {**NEW, **STRIPE_TAX},
    ("stripe_tax", "customer"): {
        "customer": "cus_known",
        **STRIPE_TAX,
        "customer_update": {"address": "auto", "name": "auto"},
    },
    ("managed_payments", "new"): {"customer_email": "buyer@example.com", **MANAGED},
    ("managed_payments", "customer"): {"customer": "cus_known", **MANAGED},
}


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, AuthStandIn], db: Database) -> StripeStandIn:
    """The demo catalogue in the table and in Stripe (its products carry tax codes)."""
    seed_demo_products(db)
    stand_in = fakes[0]
    stand_in.products.update({p["id"]: copy.deepcopy(p) for p in catalogue.PRODUCTS})
    stand_in.prices.update({p["id"]: copy.deepcopy(p) for p in catalogue.PRICES})
    return stand_in


def decided(sent: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sent.items() if k in DECIDED}


@pytest.mark.parametrize(("price", "mode"), [(ONE_TIME, "payment"), (MONTHLY, "subscription")])
@pytest.mark.parametrize(("tax", "buyer"), list(EXPECTED))
def test_each_tax_choice_sends_its_parameters_and_stripe_accepts_them(
    api_factory: Callable[..., Api],
    stripe: StripeStandIn,
    db: Database,
    tax: str,
    buyer: str,
    price: str,
    mode: str,
) -> None:
    api = api_factory(checkout_tax=tax)
    _, token = signed_in(api, db, customer="cus_known" if buyer == "customer" else None)
    response = checkout(api, {"priceId": price, "mode": mode, **URLS}, token)
    assert response.status_code == 200
    assert response.json()["url"], "the stand-in refused the session"
    [sent] = stripe.checkout_params()
    expected = dict(EXPECTED[(tax, buyer)])
    if buyer == "new" and mode == "payment":
        expected["customer_creation"] = "always"
    assert decided(sent) == expected


@pytest.mark.parametrize(("setting", "sent"), [("on", "true"), ("off", "false"), (None, None)])
def test_adaptive_pricing_follows_its_setting_or_the_dashboard(
    api_factory: Callable[..., Api], stripe: StripeStandIn, setting: str | None, sent: str | None
) -> None:
    api = api_factory(checkout_adaptive_pricing=setting, checkout_tax="managed_payments")
    response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS})
    assert response.json()["url"]
    [params] = stripe.checkout_params()
    assert params.get("adaptive_pricing") == (None if sent is None else {"enabled": sent})


def refusal(stand_in: StripeStandIn, form: dict[str, Any]) -> dict[str, Any]:
    base = {
        "mode": "payment",
        "line_items[0][price]": ONE_TIME,
        "line_items[0][quantity]": 1,
        "success_url": URLS["successUrl"],
        "cancel_url": URLS["cancelUrl"],
    }
    response = requests.post(
        f"{stand_in.url}/v1/checkout/sessions", data={**base, **form}, timeout=HANG_GUARD
    )
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize(
    "param",
    [
        "automatic_tax[enabled]",
        "tax_id_collection[enabled]",
        "billing_address_collection",
        "payment_method_configuration",
        "shipping_address_collection[allowed_countries][0]",
    ],
)
def test_managed_payments_refuses_what_stripe_sets_itself(
    stripe: StripeStandIn, param: str
) -> None:
    value = "required" if param == "billing_address_collection" else "true"
    value = "pmc_123" if param == "payment_method_configuration" else value
    value = "DE" if param.startswith("shipping") else value
    error = refusal(stripe, {"managed_payments[enabled]": "true", param: value})
    assert error["param"] == param.split("[")[0]
    assert "managed_payments[enabled]" in error["message"]


def test_managed_payments_needs_a_tax_code_on_the_product(stripe: StripeStandIn) -> None:
    stripe.products["prod_demo_starter"]["tax_code"] = None
    error = refusal(stripe, {"managed_payments[enabled]": "true"})
    assert "prod_demo_starter" in error["message"]
    assert error["param"] == "line_items[0][price]"


def test_customer_update_needs_a_customer(stripe: StripeStandIn) -> None:
    error = refusal(stripe, {"customer_update[address]": "auto"})
    assert error["param"] == "customer_update"


def test_automatic_tax_needs_an_address_it_can_collect(stripe: StripeStandIn) -> None:
    error = refusal(stripe, {"customer": "cus_no_address", "automatic_tax[enabled]": "true"})
    assert error["code"] == "customer_tax_location_invalid"
    # The address typed at Checkout may be saved on the customer: accepted.
    form = {
        "customer": "cus_no_address",
        "automatic_tax[enabled]": "true",
        "customer_update[address]": "auto",
    }
    response = requests.post(
        f"{stripe.url}/v1/checkout/sessions",
        data={
            "mode": "payment",
            "line_items[0][price]": ONE_TIME,
            "success_url": URLS["successUrl"],
            **form,
        },
        timeout=HANG_GUARD,
    )
    assert response.status_code == 200, response.text


def test_tax_ids_of_a_known_customer_need_its_name_updated(stripe: StripeStandIn) -> None:
    error = refusal(
        stripe,
        {
            "customer": "cus_known",
            "tax_id_collection[enabled]": "true",
            "customer_update[address]": "auto",
        },
    )
    assert "customer_update[name]" in error["message"]


def test_a_product_without_a_tax_code_is_refused_under_managed_payments(
    api_factory: Callable[..., Api], stripe: StripeStandIn, db: Database
) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.products set tax_code = null where stripe_price_id = %s", (ONE_TIME,)
        )
    api = api_factory(checkout_tax="managed_payments")
    response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS})
    assert response.status_code == 400
    assert response.json() == {
        "error": "Product 'Starter Kit' (prod_demo_starter) has no tax code (tax_code): Managed"
        " Payments needs one eligible for it, set on the product in Stripe"
    }
    assert stripe.checkout_params() == []
    # Stripe Tax sells it: Stripe applies the preset tax code of its settings.
    stripe_tax = api_factory(checkout_tax="stripe_tax")
    assert checkout(stripe_tax, {"priceId": ONE_TIME, "mode": "payment", **URLS}).json()["url"]
