"""Changing a subscription's plan or seats: which way a change goes, when it takes effect, what
Stripe is asked for each, and the proration date a preview hands out, bound to that preview.

An upgrade (a higher price once brought to a month, or more seats) applies now and is invoiced
now; anything else (a lower monthly price, fewer seats, a longer interval at a lower monthly
price) waits for the period's end, the current plan kept until then. A preview's proration
date is signed with the subscription, the price, the quantity and the subscription's state, so
the change it was shown for is the only one it charges: a date a client picked, a preview of
another change, or one from before the subscription last changed is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

Effective = Literal["now", "period_end"]
# How long a preview's price holds: past it, the change answers a fresh preview.
PREVIEW_LIFETIME_SECONDS = 15 * 60
MONTHS = {
    "day": Fraction(1, 30),
    "week": Fraction(7, 30),
    "month": Fraction(1),
    "year": Fraction(12),
}
# Stripe's `cancellation_details.feedback` values: a cancellation's reason.
CANCEL_REASONS = (
    "customer_service",
    "low_quality",
    "missing_features",
    "other",
    "switched_service",
    "too_complex",
    "too_expensive",
    "unused",
)


@dataclass(frozen=True)
class Plan:
    """A recurring price and a quantity of it."""

    price_id: str
    unit_amount: int
    interval: str
    interval_count: int
    quantity: int
    currency: str

    @property
    def monthly(self) -> Fraction:
        months = MONTHS.get(self.interval, Fraction(1)) * max(self.interval_count, 1)
        return Fraction(self.unit_amount * self.quantity) / months


def plan_of(price: Mapping[str, Any], quantity: int) -> Plan:
    """A Stripe price (`recurring` one) at `quantity`."""
    recurring = price.get("recurring") or {}
    return Plan(
        price_id=str(price["id"]),
        unit_amount=int(price.get("unit_amount") or 0),
        interval=str(recurring.get("interval") or "month"),
        interval_count=int(recurring.get("interval_count") or 1),
        quantity=quantity,
        currency=str(price.get("currency") or "usd"),
    )


def effective(current: Plan, wanted: Plan) -> Effective:
    """When a change takes effect: now for an upgrade, at the period's end otherwise."""
    if wanted.monthly > current.monthly:
        return "now"
    if wanted.price_id == current.price_id and wanted.quantity > current.quantity:
        return "now"
    return "period_end"


def is_change(current: Plan, wanted: Plan) -> bool:
    return (current.price_id, current.quantity) != (wanted.price_id, wanted.quantity)


def first_item(subscription: Mapping[str, Any]) -> Mapping[str, Any]:
    items = (subscription.get("items") or {}).get("data") or []
    if not items:
        raise ValueError("a subscription without items")
    first: Mapping[str, Any] = items[0]
    return first


def current_plan(subscription: Mapping[str, Any]) -> Plan:
    item = first_item(subscription)
    return plan_of(item["price"], int(item.get("quantity") or 1))


def period(subscription: Mapping[str, Any]) -> tuple[int, int]:
    item = first_item(subscription)
    return int(item["current_period_start"]), int(item["current_period_end"])


def state_of(subscription: Mapping[str, Any]) -> str:
    """A digest of what a change depends on: its items, period, schedule, cancellation,
    pending update and latest invoice. Any change to the subscription changes it."""
    items = [
        (
            str((i.get("price") or {}).get("id")),
            i.get("quantity"),
            i.get("current_period_start"),
            i.get("current_period_end"),
        )
        for i in (subscription.get("items") or {}).get("data") or []
    ]
    latest = subscription.get("latest_invoice")
    said = {
        "items": items,
        "status": subscription.get("status"),
        "schedule": _id(subscription.get("schedule")),
        "cancel_at_period_end": subscription.get("cancel_at_period_end"),
        "pending_update": bool(subscription.get("pending_update")),
        "latest_invoice": _id(latest),
    }
    return hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest()[:32]


def _id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return str(value.get("id"))
    return str(value) if value else None


def sign_proration(secret: str, *, subscription_id: str, wanted: Plan, at: int, state: str) -> str:
    """The proration date a preview hands out: `<unix seconds>.<signature>`."""
    return f"{at}.{_mac(secret, subscription_id, wanted, at, state)}"


class BadProrationDate(ValueError):
    """Not a proration date a preview handed out."""


def proration_at(token: str) -> int:
    """The time a proration date names; BadProrationDate when it is no such date."""
    at, dot, mac = token.partition(".")
    if not (dot and at.isdigit() and len(mac) == 64 and all(c in "0123456789abcdef" for c in mac)):
        raise BadProrationDate(
            "prorationDate is not one a preview gave: ask POST /api/payments/preview-change"
        )
    return int(at)


def proration_holds(
    secret: str, token: str, *, subscription_id: str, wanted: Plan, state: str, now: int
) -> bool:
    """Whether a preview's proration date is this change's, on the subscription as it is now,
    and recent enough."""
    at = proration_at(token)
    expected = _mac(secret, subscription_id, wanted, at, state)
    fresh = 0 <= now - at <= PREVIEW_LIFETIME_SECONDS
    return hmac.compare_digest(token.partition(".")[2], expected) and fresh


def _mac(secret: str, subscription_id: str, wanted: Plan, at: int, state: str) -> str:
    message = f"plan-change|{subscription_id}|{wanted.price_id}|{wanted.quantity}|{at}|{state}"
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def preview_params(
    subscription: Mapping[str, Any], wanted: Plan, *, when: Effective, at: int
) -> dict[str, Any]:
    """`invoices.create_preview`'s parameters: an upgrade's proration invoice billed now, at
    `at`; a scheduled change's next invoice on the new plan (no proration: nothing now)."""
    item = first_item(subscription)
    details: dict[str, Any] = {
        "items": [{"id": item["id"], "price": wanted.price_id, "quantity": wanted.quantity}],
    }
    if when == "now":
        details |= {"proration_date": at, "proration_behavior": "always_invoice"}
    else:
        details["proration_behavior"] = "none"
    return {
        "customer": _id(subscription.get("customer")),
        "subscription": subscription["id"],
        "subscription_details": details,
    }


def upgrade_params(subscription: Mapping[str, Any], wanted: Plan, *, at: int) -> dict[str, Any]:
    """`subscriptions.update`'s parameters for an upgrade: invoiced now at the preview's
    proration date; a refused payment leaves the old plan (`pending_if_incomplete`)."""
    item = first_item(subscription)
    return {
        "items": [{"id": item["id"], "price": wanted.price_id, "quantity": wanted.quantity}],
        "proration_behavior": "always_invoice",
        "proration_date": at,
        "payment_behavior": "pending_if_incomplete",
    }


def schedule_phases(subscription: Mapping[str, Any], wanted: Plan) -> dict[str, Any]:
    """A schedule's phases for a change at the period's end: the current plan until then,
    the new one from then; released after, so the subscription goes on as it is."""
    current = current_plan(subscription)
    start, end = period(subscription)
    return {
        "end_behavior": "release",
        "phases": [
            {
                "items": [{"price": current.price_id, "quantity": current.quantity}],
                "start_date": start,
                "end_date": end,
                "proration_behavior": "none",
            },
            {
                "items": [{"price": wanted.price_id, "quantity": wanted.quantity}],
                "start_date": end,
                "proration_behavior": "none",
            },
        ],
    }


@dataclass(frozen=True)
class PreviewLine:
    description: str
    amount: int


@dataclass(frozen=True)
class Preview:
    """What a change costs: now (an upgrade's prorations) and at the next charge."""

    effective: Effective
    effective_at: int
    amount_due: int
    currency: str
    proration_date: str
    lines: tuple[PreviewLine, ...]
    next_amount: int
    next_at: int


def preview_of(
    invoice: Mapping[str, Any],
    *,
    subscription: Mapping[str, Any],
    wanted: Plan,
    when: Effective,
    at: int,
    proration_date: str,
) -> Preview:
    """The answer for a previewed invoice: an upgrade's is charged now and the next charge is
    the new plan's at the period's end (a new interval's end when the interval changes); a
    scheduled change charges nothing now, and its next charge is that invoice."""
    lines = tuple(
        PreviewLine(str(line.get("description") or ""), int(line.get("amount") or 0))
        for line in (invoice.get("lines") or {}).get("data") or []
    )
    _, end = period(subscription)
    total = int(invoice.get("amount_due") or 0)
    if when == "now":
        current = current_plan(subscription)
        new_interval = (current.interval, current.interval_count) != (
            wanted.interval,
            wanted.interval_count,
        )
        next_at = at + _seconds(wanted) if new_interval else end
        return Preview(
            "now", at, total, wanted.currency, proration_date, lines,
            wanted.unit_amount * wanted.quantity, next_at,
        )  # fmt: skip
    return Preview("period_end", end, 0, wanted.currency, proration_date, lines, total, end)


def _seconds(plan: Plan) -> int:
    days = {"day": 1, "week": 7, "month": 30, "year": 365}.get(plan.interval, 30)
    return days * 86_400 * max(plan.interval_count, 1)


def scheduled_change(
    schedule: Mapping[str, Any] | None, *, now: int
) -> tuple[str, int, int] | None:
    """The change a schedule holds for later: (price, quantity, when), or None when none is
    still to come (released, or its last phase has started)."""
    if not schedule or schedule.get("status") not in ("active", "not_started"):
        return None
    for phase in schedule.get("phases") or []:
        start = int(phase.get("start_date") or 0)
        if start > now:
            items = phase.get("items") or []
            if not items:
                return None
            price = items[0].get("price")
            price_id = str(price.get("id") if isinstance(price, Mapping) else price)
            return price_id, int(items[0].get("quantity") or 1), start
    return None


def customer_of(subscription: Mapping[str, Any]) -> str:
    return str(_id(subscription.get("customer")))


def has_coupon(subscription: Mapping[str, Any], coupon: str) -> bool:
    """Whether one of the subscription's discounts (expanded) is of `coupon`."""
    for discount in subscription.get("discounts") or []:
        if not isinstance(discount, Mapping):
            continue
        source = discount.get("source") or {}
        found = source.get("coupon") if isinstance(source, Mapping) else None
        found = found or discount.get("coupon")
        if _id(found) == coupon:
            return True
    return False
