"""Every Stripe event that changes access, turned into plain changes through one table.

A new kind of change is a row here (the event type and the function that reads it), a case in
`decide`, and perhaps a column in the store (`access/store.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from access.checkouts import (
    TRIAL_WILL_END,
    AccessChange,
    Checkout,
    access_change,
    checkout_from,
    subscription_price,
)
from access.refunds import Dispute, Refund, dispute_from, refund_from
from catalogue.events import PRICE_TYPES, PRODUCT_TYPES, CatalogueChange, catalogue_change
from core.events import Event, stripe_id


@dataclass(frozen=True)
class TrialEnding:
    """A trial ends in three days: its customer is told, unless the grant has ended already."""

    customer_id: str | None
    subscription_id: str | None
    price_id: str | None


# What one event asks of access: a grant's change (subscriptions, renewals), a checkout (links
# the buyer's account to a customer, records the purchase, grants when paid), a refund, a
# dispute, a trial's coming end; and a product or price changed (the catalogue).
Change = AccessChange | Checkout | Refund | Dispute | TrialEnding | CatalogueChange


def _one(item: Change | None) -> list[Change]:
    return [item] if item is not None else []


def _trial(event: Event) -> list[Change]:
    obj = event.object
    return [
        TrialEnding(
            customer_id=stripe_id(obj.get("customer")),
            subscription_id=stripe_id(obj.get("id")),
            price_id=subscription_price(obj),
        )
    ]


TABLE: Mapping[str, Callable[[Event], list[Change]]] = {
    "checkout.session.completed": lambda e: _one(checkout_from(e)),
    "checkout.session.async_payment_succeeded": lambda e: _one(checkout_from(e)),
    "customer.subscription.created": lambda e: _one(access_change(e)),
    "customer.subscription.updated": lambda e: _one(access_change(e)),
    "customer.subscription.deleted": lambda e: _one(access_change(e)),
    "invoice.paid": lambda e: _one(access_change(e)),
    TRIAL_WILL_END: _trial,
    "charge.refunded": lambda e: _one(refund_from(e)),
    "charge.dispute.created": lambda e: _one(dispute_from(e)),
    **{t: lambda e: [catalogue_change(e)] for t in (*PRODUCT_TYPES, *PRICE_TYPES)},
}


def to_changes(event: Event) -> list[Change]:
    """The changes an event calls for (none: it is recorded as ignored)."""
    read = TABLE.get(event.type)
    return read(event) if read is not None else []


@dataclass(frozen=True)
class Key:
    """Which account (and purchase) a change is about, for the store to lock and read."""

    customer_id: str | None = None
    user_id: str | None = None
    email: str | None = None
    payment_intent: str | None = None
    account_id: str | None = None  # a team's account, which a checkout for a team names


def key(change: Change) -> Key:
    if isinstance(change, AccessChange):
        return Key(customer_id=change.customer_id)
    # A checkout's customer may belong to an account already: that account is read too (a
    # customer never moves, and a guest paying as a known customer pays for its account).
    if isinstance(change, Checkout) and change.account_id:
        return Key(account_id=change.account_id, customer_id=change.customer_id)
    if isinstance(change, Checkout):
        # A guest checkout (no user id) is the account of whoever has the e-mail address.
        return Key(
            user_id=change.user_id,
            email=None if change.user_id else change.email,
            customer_id=change.customer_id,
        )
    if isinstance(change, Refund):
        return Key(payment_intent=change.payment_intent)
    if isinstance(change, TrialEnding):
        return Key(customer_id=change.customer_id)
    return Key()
