"""Which access change an event calls for, and whether it may still be applied."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.events import Event, stripe_id
from core.stripe_objects import customer_contact, invoice_subscription

# Subscription states in which the customer has paid for access.
ACTIVE_STATUSES = frozenset({"active", "trialing"})
# States that end access; others (past_due, incomplete) leave it as it is while Stripe retries.
ENDED_STATUSES = frozenset({"canceled", "unpaid", "incomplete_expired", "paused"})
# A checkout in these states has been paid for (or costs nothing).
PAID_STATUSES = frozenset({"paid", "no_payment_required"})

# What the access subscriber publishes once an access change is committed: the e-mails that
# speak of access are sent from these, so none tells of a change that did not happen.
ACCESS_GRANTED = "app.access.granted"
ACCESS_REVOKED = "app.access.revoked"
# A guest buyer's account exists and has access: they get a sign-in link by e-mail.
ACCOUNT_INVITED = "app.account.invited"


@dataclass(frozen=True)
class Checkout:
    """A completed checkout: links a profile to a customer and records the purchase."""

    session_id: str
    user_id: str | None
    email: str | None
    name: str | None
    customer_id: str | None
    price_id: str | None
    subscription_id: str | None
    amount_total: int | None
    currency: str | None
    paid: bool
    payment_intent: str | None = None
    invoice_id: str | None = None
    created: int | None = None


@dataclass(frozen=True)
class AccessChange:
    """Set `has_access` to `grant` on the profile that owns `customer_id`."""

    customer_id: str
    grant: bool
    subscription_id: str | None
    price_id: str | None = None  # the plan the change puts the customer on, when it says


class Ordering(enum.Enum):
    NEWER = "newer"
    STALE = "stale"
    TIE = "tie"


def checkout_from(event: Event) -> Checkout | None:
    """The checkout an event completes, if it completes one."""
    if event.type not in ("checkout.session.completed", "checkout.session.async_payment_succeeded"):
        return None
    session = event.object
    metadata = _mapping(session.get("metadata"))
    email, name = customer_contact(session)
    return Checkout(
        session_id=str(session["id"]),
        user_id=_uuid(session.get("client_reference_id") or metadata.get("user_id")),
        email=email,
        name=name,
        customer_id=stripe_id(session.get("customer")),
        price_id=metadata.get("price_id"),
        subscription_id=stripe_id(session.get("subscription")),
        amount_total=session.get("amount_total"),
        currency=session.get("currency"),
        paid=session.get("payment_status") in PAID_STATUSES,
        payment_intent=stripe_id(session.get("payment_intent")),
        invoice_id=stripe_id(session.get("invoice")),
        created=session.get("created") if isinstance(session.get("created"), int) else None,
    )


def access_change(event: Event) -> AccessChange | None:
    """The access change of an invoice or subscription event, keyed by customer."""
    obj = event.object
    customer = stripe_id(obj.get("customer"))
    if customer is None:
        return None
    if event.type == "invoice.paid":
        return AccessChange(customer, grant=True, subscription_id=invoice_subscription(obj))
    if event.type == "customer.subscription.deleted":
        return AccessChange(customer, grant=False, subscription_id=stripe_id(obj.get("id")))
    if event.type == "customer.subscription.updated":
        return _subscription_status_change(customer, obj)
    return None


def _subscription_status_change(
    customer: str, subscription: Mapping[str, Any]
) -> AccessChange | None:
    status = subscription.get("status")
    sub_id = stripe_id(subscription.get("id"))
    if status in ACTIVE_STATUSES:
        price = subscription_price(subscription)
        return AccessChange(customer, grant=True, subscription_id=sub_id, price_id=price)
    if status in ENDED_STATUSES:
        return AccessChange(customer, grant=False, subscription_id=sub_id)
    return None


def subscription_price(subscription: Mapping[str, Any]) -> str | None:
    """The price of the subscription's current (first) item: the plan after an up- or downgrade."""
    items = _mapping(subscription.get("items")).get("data")
    first = items[0] if isinstance(items, list) and items else None
    return stripe_id(_mapping(first).get("price"))


def ordering(event_created: datetime, last_applied: datetime | None) -> Ordering:
    """Compare an event with the newest access change already applied to the profile."""
    if last_applied is None or event_created > last_applied:
        return Ordering.NEWER
    if event_created < last_applied:
        return Ordering.STALE
    return Ordering.TIE


def grant_at_tie(*, wanted: bool, subscription_status: str | None) -> bool:
    """Resolve two changes in the same second by what Stripe says now.

    Stripe's `created` has one-second resolution, so a grant and a revoke can tie. The
    subscription's current status is the truth both events describe; without a subscription
    (a one-time purchase) nothing newer can contradict the change, so it stands.
    """
    if subscription_status is None:
        return wanted
    return subscription_status in ACTIVE_STATUSES


def _uuid(value: Any) -> str | None:
    """A user id, only if it is one: `client_reference_id` is free text set by the browser side."""
    try:
        return str(uuid.UUID(str(value))) if value else None
    except ValueError:
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def end_reason(subscription: Mapping[str, Any]) -> str:
    """Why a deleted subscription ended: `payment_failed` when Stripe ended it for want of
    payment (its `cancellation_details.reason`), else `subscription_ended` (the customer or the
    business cancelled it)."""
    details = _mapping(subscription.get("cancellation_details"))
    return "payment_failed" if details.get("reason") == "payment_failed" else "subscription_ended"
