"""The Stripe events of a customer's life, one small function per kind, with what each must do.

A step takes the customer's timeline (its clock, its subscription) and returns the events Stripe
sends for it, each with its effect in the model: the access it sets (by the ordering rule, the
newest such event wins), the plan it puts the customer on, and the e-mail it calls for.
Adding a kind is one function here and one line in STEPS.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DAY = 86_400
FIRST_INVOICE = "subscription_create"  # covered by the purchase confirmation: no e-mail


@dataclass(frozen=True)
class Customer:
    index: int
    user_id: str | None  # None: a ghost, whom no checkout ever links to a profile
    email: str
    name: str
    customer_id: str
    price_id: str


@dataclass(frozen=True)
class Planned:
    """One Stripe event and the effect the model expects of it."""

    event_id: str
    type: str
    customer: Customer
    created: int
    body: bytes
    grant: bool | None = None  # the access it sets if it is the newest change; None: none
    price_id: str | None = None  # the plan it puts the profile on
    email: str | None = None  # the kind of e-mail it calls for, to the customer
    links: bool = False  # the checkout that links the customer to its profile


@dataclass
class Timeline:
    """A customer's state while its events are generated."""

    customer: Customer
    rng: random.Random
    clock: int
    subscription: str | None = None
    serial: int = 0
    events: list[Planned] = field(default_factory=list)

    def tick(self) -> int:
        """A later, distinct second: ties never arise, so the model needs no tie-break."""
        self.clock += self.rng.randint(1, 20 * DAY)
        return self.clock

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}_fr{self.customer.index}x{self.serial}"


def event(
    line: Timeline, type_: str, obj: dict[str, Any], *, created: int, **effect: Any
) -> Planned:
    event_id = line.next_id("evt")
    body = {
        "id": event_id,
        "object": "event",
        "api_version": "2023-08-16",
        "created": created,
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": type_,
        "data": {"object": obj},
    }
    return Planned(
        event_id=event_id,
        type=type_,
        customer=line.customer,
        created=created,
        body=json.dumps(body).encode(),
        **effect,
    )


def checkout(line: Timeline) -> list[Planned]:
    """A paid subscription checkout, then its first invoice."""
    c, created = line.customer, line.tick()
    line.subscription = line.next_id("sub")
    session = {
        "id": line.next_id("cs_test"),
        "object": "checkout.session",
        "client_reference_id": c.user_id,
        "customer": c.customer_id,
        "subscription": line.subscription,
        "mode": "subscription",
        "metadata": {"price_id": c.price_id},
        "payment_status": "paid",
        "amount_total": 1900,
        "currency": "usd",
        "created": created,
        "customer_details": {"email": c.email, "name": c.name},
    }
    first = event(
        line,
        "checkout.session.completed",
        session,
        created=created,
        grant=True,
        price_id=c.price_id,
        email="purchase-confirmation",
        links=not line.events,
    )
    return [first, _invoice(line, "invoice.paid", FIRST_INVOICE, grant=True)]


def renewal(line: Timeline) -> list[Planned]:
    return [_invoice(line, "invoice.paid", "subscription_cycle", grant=True, email="invoice-paid")]


def failure(line: Timeline) -> list[Planned]:
    """A failed renewal: Stripe retries the card; access stays as it is until the status says."""
    return [_invoice(line, "invoice.payment_failed", "subscription_cycle", email="payment-failed")]


def status_change(line: Timeline) -> list[Planned]:
    """The subscription's status moves (dunning, recovery, or given up on: unpaid)."""
    status = line.rng.choice(["past_due", "active", "unpaid"])
    grant = {"past_due": None, "active": True, "unpaid": False}[status]
    updated = event(
        line,
        "customer.subscription.updated",
        _subscription(line, status),
        created=line.tick(),
        grant=grant,
    )
    if status == "unpaid":
        line.subscription = None
    return [updated]


def cancellation(line: Timeline) -> list[Planned]:
    deleted = event(
        line,
        "customer.subscription.deleted",
        _subscription(line, "canceled"),
        created=line.tick(),
        grant=False,
        email="subscription-cancelled",
    )
    line.subscription = None
    return [deleted]


def _invoice(
    line: Timeline, type_: str, reason: str, *, grant: bool | None = None, email: str | None = None
) -> Planned:
    c, created = line.customer, line.tick()
    paid = type_ == "invoice.paid"
    invoice = {
        "id": line.next_id("in"),
        "object": "invoice",
        "customer": c.customer_id,
        "customer_email": c.email,
        "customer_name": c.name,
        "subscription": line.subscription,
        "billing_reason": reason,
        "status": "paid" if paid else "open",
        "amount_due": 1900,
        "amount_paid": 1900 if paid else 0,
        "currency": "usd",
        "number": f"FR-{c.index:04d}-{line.serial:04d}",
        "hosted_invoice_url": f"https://invoice.stripe.com/i/fr{c.index}x{line.serial}",
        "created": created,
        "status_transitions": {"paid_at": created if paid else None},
        "next_payment_attempt": None if paid else created + 3 * DAY,
        "lines": {
            "object": "list",
            "data": [
                {
                    "price": {"id": c.price_id},
                    "period": {"start": created, "end": created + 30 * DAY},
                }
            ],
        },
    }
    return event(line, type_, invoice, created=created, grant=grant, email=email)


def _subscription(line: Timeline, status: str) -> dict[str, Any]:
    c = line.customer
    return {
        "id": line.subscription,
        "object": "subscription",
        "customer": c.customer_id,
        "status": status,
        "current_period_end": line.clock + 30 * DAY,
        "ended_at": line.clock if status == "canceled" else None,
        "items": {"object": "list", "data": [{"price": {"id": c.price_id}}]},
    }


Step = Callable[[Timeline], list[Planned]]
# (weight, needs a live subscription, step): what may happen next in a customer's life.
STEPS: dict[str, tuple[float, bool, Step]] = {
    "checkout": (1.0, False, checkout),
    "renewal": (6.0, True, renewal),
    "failure": (2.0, True, failure),
    "status change": (1.5, True, status_change),
    "cancellation": (1.0, True, cancellation),
}
