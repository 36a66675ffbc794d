"""A free trial ends in three days: the date, what it will cost, what happens without a card."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any, Literal

from catalogue.rules import EmailProduct
from core.app_events import TRIAL_ENDING
from core.brand import Brand
from core.events import Event
from emails.kind import Kind, amount, get
from emails.props import Billing, Day, EmailProps, Link, Text


class TrialEndingProps(EmailProps):
    """A free trial ends in three days (Stripe's `customer.subscription.trial_will_end`)."""

    trial_end_date: Day
    product_name: Text | None = None
    # What the first period will cost, when it can be said exactly (no discount).
    amount: Text | None = None
    billing: Billing | None = None
    discounted: bool = False
    plus_tax: bool = False  # Stripe Tax adds tax on top of the amount
    has_payment_method: bool = False
    # What Stripe does at the trial's end with no payment method (the subscription's
    # `trial_settings.end_behavior.missing_payment_method`).
    without_card: Literal["cancel", "pause", "create_invoice"] = "cancel"
    manage_url: Link | None = None


def subject(p: TrialEndingProps, _: Brand) -> str:
    day = f"{p.trial_end_date:%b} {p.trial_end_date.day}"
    return f"Your free trial ends on {day}"


def _ending(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any] | None:
    """Sent from `app.trial.ending`, three days before a trial the customer holds ends: the
    date, what it will cost, and what happens without a payment method, each as the
    subscription says (a trial that already ended says nothing)."""
    subscription = event.object.get("subscription")
    if not isinstance(subscription, Mapping):
        return None
    trial_end = subscription.get("trial_end")
    if subscription.get("status") != "trialing" or not isinstance(trial_end, int):
        return None
    behaviour = get(subscription, "trial_settings", "end_behavior", "missing_payment_method")
    discounted = bool(subscription.get("discount") or subscription.get("discounts"))
    return {
        "trial_end_date": trial_end,
        "product_name": product.name if product else None,
        "amount": None if discounted else _first_period_amount(subscription),
        "billing": _interval(subscription, product),
        "discounted": discounted,
        "plus_tax": get(subscription, "automatic_tax", "enabled") is True,
        "has_payment_method": bool(
            subscription.get("default_payment_method") or subscription.get("default_source")
        ),
        "without_card": behaviour if behaviour in ("pause", "create_invoice") else "cancel",
    }


def _first_period_amount(subscription: Mapping[str, Any]) -> str | None:
    """The items' prices times their quantities, when every item says so in one currency."""
    items = get(subscription, "items", "data")
    if not isinstance(items, list) or not items:
        return None
    total, currencies = 0, set()
    for item in items:
        price = get(item, "price")
        unit, quantity = get(price, "unit_amount"), get(item, "quantity")
        if not isinstance(unit, int) or get(price, "recurring", "usage_type") == "metered":
            return None
        total += unit * (quantity if isinstance(quantity, int) else 1)
        currencies.add(get(price, "currency"))
    [currency] = currencies if len(currencies) == 1 else [None]
    return amount(total, currency) if isinstance(currency, str) else None


def _interval(subscription: Mapping[str, Any], product: EmailProduct | None) -> str | None:
    """`month` or `year` when the plan bills once a month or a year (another period: the amount
    is said without one); the product's when the subscription's price does not say."""
    items = get(subscription, "items", "data")
    first = items[0] if isinstance(items, list) and items else None
    recurring = get(first, "price", "recurring")
    if not isinstance(recurring, Mapping):
        return product.billing if product and product.billing != "one_time" else None
    found, count = recurring.get("interval"), recurring.get("interval_count")
    return found if found in ("month", "year") and count in (None, 1) else None


KIND = Kind(
    name="trial-ending",
    props=TrialEndingProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "trial_end_date": date(2026, 12, 8),
        "product_name": "Team plan",
        "amount": "$29.00",
        "billing": "month",
        "discounted": False,
        "plus_tax": False,
        "has_payment_method": True,
        "without_card": "cancel",
    },
    triggers={TRIAL_ENDING: _ending},
)
