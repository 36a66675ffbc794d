"""core/stripe_objects.py reads the same facts from Stripe's objects at 2023-08-16 and at the
current version, the latter built from Stripe's own fixtures
(tests/fixtures/stripe/fixtures3.json)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from core import stripe_objects
from core.stripe_objects import Trial, subscription_trial

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stripe" / "fixtures3.json"
PRICE = "price_demo_team_monthly"


def fixture(name: str) -> dict[str, Any]:
    resources: dict[str, Any] = json.loads(FIXTURES.read_text())["resources"]
    return copy.deepcopy(resources[name])


def current_invoice() -> dict[str, Any]:
    """Stripe's invoice fixture (the current shape), billing sub_42 for PRICE."""
    invoice = fixture("invoice")
    invoice["parent"] = {
        "type": "subscription_details",
        "subscription_details": {"subscription": "sub_42", "metadata": {}},
    }
    line = invoice["lines"]["data"][0]
    line["pricing"] = {"type": "price_details", "price_details": {"price": PRICE}}
    line["period"] = {"start": 1_790_000_000, "end": 1_792_592_000}
    return invoice


def legacy_invoice() -> dict[str, Any]:
    return {
        "object": "invoice",
        "subscription": "sub_42",
        "lines": {
            "data": [
                {
                    "price": {"id": PRICE, "object": "price"},
                    "period": {"start": 1_790_000_000, "end": 1_792_592_000},
                }
            ]
        },
    }


@pytest.mark.parametrize("invoice", [current_invoice(), legacy_invoice()], ids=["current", "2023"])
def test_an_invoices_subscription_price_and_period_read_alike(invoice: dict[str, Any]) -> None:
    assert stripe_objects.invoice_subscription(invoice) == "sub_42"
    assert stripe_objects.invoice_price(invoice) == PRICE
    assert stripe_objects.invoice_period(invoice) == (1_790_000_000, 1_792_592_000)


def test_the_fixture_as_stripe_publishes_it_is_read_in_its_current_shape() -> None:
    invoice = fixture("invoice")
    # Its parent names a subscription placeholder, its line's pricing no price: read as is.
    assert stripe_objects.invoice_subscription(invoice) == "subscription"
    assert stripe_objects.invoice_price(invoice) is None


def test_a_subscriptions_period_end_is_on_its_items_now_and_on_itself_before() -> None:
    current = fixture("subscription")
    assert "current_period_end" not in current
    assert stripe_objects.subscription_period_end(current) == 976287773
    assert stripe_objects.subscription_period_end({"current_period_end": 1_800_000_000}) == (
        1_800_000_000
    )
    assert stripe_objects.subscription_period_end({"items": {"data": []}}) is None


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        (None, True),
        ("2023-08-16", True),
        ("2025-03-31.basil", True),
        ("2025-09-30.clover", True),
        ("2026-10-28.endive", True),
        ("2024-06-20", False),
        ("2025-02-24.acacia", False),
        ("2027-03-31.fig", False),
        ("2026-11-30.endive", False),  # newer than any this service was built for
    ],
)
def test_the_versions_read(version: str | None, supported: bool) -> None:
    assert stripe_objects.is_supported(version) is supported


def test_a_trialing_subscription_says_its_end_first_charge_and_card() -> None:
    sub = {
        "status": "trialing",
        "trial_end": 1_800_000_000,
        "default_payment_method": None,
        "trial_settings": {"end_behavior": {"missing_payment_method": "pause"}},
        "items": {
            "data": [
                {
                    "quantity": 3,
                    "price": {
                        "unit_amount": 1900,
                        "currency": "USD",
                        "recurring": {"interval": "month"},
                    },
                }
            ]
        },
    }
    trial = subscription_trial(sub)
    assert trial == Trial(
        trial_end=1_800_000_000,
        first_charge=5700,
        currency="usd",
        interval="month",
        has_card=False,
        without_card="pause",
    )
    assert Trial.from_json(trial.as_json()) == trial
    assert Trial.from_json({"trial_end": "soon"}) is None
    # A discount or a metered item: the first charge cannot be said exactly, so it is not.
    assert subscription_trial(sub | {"discounts": ["di_1"]}).first_charge is None  # type: ignore[union-attr]
    assert subscription_trial(sub | {"default_payment_method": "pm_1"}).has_card is True  # type: ignore[union-attr]
    assert subscription_trial(sub | {"status": "active"}) is None
    assert subscription_trial("sub_123") is None  # not expanded: nothing known
