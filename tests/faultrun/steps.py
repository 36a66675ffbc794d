"""The Stripe events of a customer's life, one small function per kind, with what each must do.

A step takes the customer's timeline (its clock, its subscription, its plan, its one-time
purchases) and returns the events Stripe sends for it, each with its effect in the model: the
access it sets (by the ordering rule, the newest such event wins), the plan it puts the customer
on, and the e-mail it calls for. Adding a kind is one function here and one line in STEPS.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from core.stripe_objects import PINNED_VERSION
from dev.samples.events import API_VERSIONS, current_shape

DAY = 86_400
FIRST_INVOICE = "subscription_create"  # covered by the purchase confirmation: no e-mail
SUBSCRIPTION_PRICES = ("price_demo_team_monthly", "price_fr_plus_monthly", "price_fr_plus_yearly")
ONE_TIME_PRICE = "price_demo_starter_one_time"
ONE_TIME_AMOUNT = 4900
# A team's plan, sold per seat (the run adds it to the catalogue): its quantity is the seats.
SEAT_PRICE = "price_fr_seats_monthly"
SEAT_AMOUNT = 1200
MOST_SEATS = 5
# The application event, by access outcome, an e-mail about a committed change is sent from.
ANNOUNCED = {"granted": "granted_", "revoked": "revoked_"}


@dataclass(frozen=True)
class Customer:
    index: int
    user_id: str | None  # None: a ghost, whom no checkout ever links to a profile
    email: str
    name: str
    customer_id: str
    price_id: str
    # A team's account (its number in the scenario), which `user_id`, its owner, buys for.
    team: int | None = None

    def placeholder(self) -> str:
        """What a team's checkout names as its team id until the run has created the team."""
        return f"@team{self.team}@"


@dataclass(frozen=True)
class Planned:
    """One Stripe event and the effect the model expects of it."""

    event_id: str
    type: str
    customer: Customer
    created: int
    body: bytes
    grant: bool | None = None  # the access it sets if it is the newest change; None: none
    # The grant it changes: a subscription's id, or a one-time purchase's checkout session.
    source: str | None = None
    price_id: str | None = None  # the plan it puts the profile on
    email: str | None = None  # the kind of e-mail it calls for, to the customer
    # The e-mail follows the access subscriber's announcement, sent only when the change was
    # applied with this outcome (a change older than one applied already announces nothing).
    announced_on: str | None = None
    links: bool = False  # the checkout that links the customer to its profile
    after: str | None = None  # an event this one waits for (a refund, its purchase's checkout)
    session: dict[str, Any] | None = None  # the checkout session Stripe's API must know
    # The subscription's quantity it says (a team's seats, ordered on its own), if it says one.
    quantity: int | None = None
    # A guest's checkout: its buyer is also sent a sign-in link (`invited_<session>`).
    guest: bool = False

    def email_key(self) -> str | None:
        """The (event, kind) key its e-mail is sent under, if it calls for one."""
        if self.email is None:
            return None
        return f"{self.announced_id() or self.event_id}/{self.email}"

    def announced_id(self) -> str | None:
        """The id of the application event its e-mail follows: a checkout's is keyed by its
        session (the success page's completion announces under the same), others by event."""
        if self.announced_on is None:
            return None
        about = self.session["id"] if self.announced_on == "granted" and self.session else None
        return ANNOUNCED[self.announced_on] + (about or self.event_id)


@dataclass
class Timeline:
    """A customer's state while its events are generated."""

    customer: Customer
    rng: random.Random
    clock: int
    price: str = ""  # the subscription plan, once chosen
    subscription: str | None = None
    quantity: int | None = None  # a team's subscription: its seats
    # (checkout event, payment intent, checkout session) of each unrefunded one-time purchase
    purchases: list[tuple[str, str, str]] = field(default_factory=list)
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
    # Stripe sends each endpoint's version: the run draws both that the service reads.
    api_version = line.rng.choice(API_VERSIONS)
    if api_version != PINNED_VERSION:
        obj = current_shape(obj)
    body = {
        "id": event_id,
        "object": "event",
        "api_version": api_version,
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
    line.subscription = line.next_id("sub")
    line.price = line.price or line.customer.price_id
    first = _checkout(
        line,
        price=line.price,
        amount=1900,
        mode="subscription",
        subscription=line.subscription,
        source=line.subscription,
    )
    return [first, _invoice(line, "invoice.paid", FIRST_INVOICE, grant=True)]


def team_checkout(line: Timeline) -> list[Planned]:
    """A team's owner buys seats: the checkout (its session names no quantity), the
    subscription Stripe creates with the quantity chosen, then its first invoice."""
    line.subscription = line.next_id("sub")
    line.price = SEAT_PRICE
    line.quantity = line.rng.randint(1, MOST_SEATS)
    first = _checkout(
        line,
        price=SEAT_PRICE,
        amount=SEAT_AMOUNT * line.quantity,
        mode="subscription",
        subscription=line.subscription,
        source=line.subscription,
    )
    created = _seats(line, "customer.subscription.created")
    return [first, created, _invoice(line, "invoice.paid", FIRST_INVOICE, grant=True)]


def seat_change(line: Timeline) -> list[Planned]:
    """Seats added or taken away in the billing portal: the subscription's new quantity."""
    assert line.quantity is not None
    line.quantity = line.rng.choice([q for q in range(1, MOST_SEATS + 1) if q != line.quantity])
    return [_seats(line, "customer.subscription.updated")]


def _seats(line: Timeline, type_: str) -> Planned:
    """The active subscription as Stripe sends it, with its quantity: the team's seats."""
    obj = _subscription(line, "active")
    return event(
        line,
        type_,
        obj,
        created=line.tick(),
        grant=True,
        quantity=line.quantity,
        source=line.subscription,
    )


def one_time_purchase(line: Timeline) -> list[Planned]:
    """A paid one-time checkout (no subscription): access, and a purchase a refund may undo."""
    intent = line.next_id("pi")
    bought = _checkout(
        line, price=ONE_TIME_PRICE, amount=ONE_TIME_AMOUNT, mode="payment", payment_intent=intent
    )
    assert bought.session is not None
    session = str(bought.session["id"])
    line.purchases.append((bought.event_id, intent, session))
    return [replace(bought, source=session)]


def guest_purchase(line: Timeline) -> list[Planned]:
    """Someone signed out (a stranger, or the customer) buys once on Stripe's page, typing the
    customer's address: Stripe makes a new customer for it. The purchase goes to the account
    with that address, which keeps its own customer (a later event of it still reaches it) and
    is sent a sign-in link besides the confirmation."""
    intent = line.next_id("pi")
    bought = _checkout(
        line,
        price=ONE_TIME_PRICE,
        amount=ONE_TIME_AMOUNT,
        mode="payment",
        payment_intent=intent,
        guest=line.next_id("cus_guest"),
    )
    assert bought.session is not None
    session = str(bought.session["id"])
    line.purchases.append((bought.event_id, intent, session))
    return [replace(bought, source=session, guest=True)]


def _checkout(
    line: Timeline,
    *,
    price: str,
    amount: int,
    source: str | None = None,
    guest: str | None = None,
    **session_fields: Any,
) -> Planned:
    """A completed, paid checkout; Stripe's API knows its session (a refund looks it up). A
    guest's names no user and a new customer (`guest`), with the address typed."""
    c, created = line.customer, line.tick()
    metadata = {"price_id": price}
    if c.team is not None:  # bought by its owner for the team, as create-checkout names it
        metadata |= {"user_id": str(c.user_id), "team_id": c.placeholder()}
    session = {
        "id": line.next_id("cs_test"),
        "object": "checkout.session",
        "client_reference_id": None if guest else c.user_id,
        "customer": guest or c.customer_id,
        "metadata": metadata,
        "payment_status": "paid",
        "amount_total": amount,
        "currency": "usd",
        "created": created,
        "customer_details": {"email": c.email, "name": c.name},
        **session_fields,
    }
    known = {k: session[k] for k in ("id", "object", "mode")}
    if "payment_intent" in session:
        known["payment_intent"] = session["payment_intent"]
    return event(
        line,
        "checkout.session.completed",
        session,
        created=created,
        grant=True,
        price_id=price,
        email="purchase-confirmation",
        announced_on="granted",
        links=not line.events,
        session=known,
        source=source,
    )


def refund(line: Timeline) -> list[Planned]:
    """A refund of the newest one-time purchase: in full (access revoked, by the ordering
    rule) or in part (recorded only; it may be refunded in full later)."""
    checkout_event, intent, session = line.purchases[-1]
    full = line.rng.random() < 0.6
    if full:
        line.purchases.pop()
    c = line.customer
    charge = {
        "id": line.next_id("ch"),
        "object": "charge",
        "amount": ONE_TIME_AMOUNT,
        "amount_refunded": ONE_TIME_AMOUNT if full else 900,
        "refunded": full,
        "currency": "usd",
        "customer": c.customer_id,
        "payment_intent": intent,
        "invoice": None,
    }
    created = line.tick()
    grant = False if full else None
    refunded = event(
        line, "charge.refunded", charge, created=created, grant=grant, after=checkout_event
    )
    return [replace(refunded, source=session)]


def renewal(line: Timeline) -> list[Planned]:
    return [_invoice(line, "invoice.paid", "subscription_cycle", grant=True, email="invoice-paid")]


def failure(line: Timeline) -> list[Planned]:
    """A failed renewal: Stripe retries the card; access stays as it is until the status says."""
    return [_invoice(line, "invoice.payment_failed", "subscription_cycle", email="payment-failed")]


def status_change(line: Timeline) -> list[Planned]:
    """The subscription's status moves (dunning, recovery, or given up on: unpaid, which ends
    the access and says so once)."""
    status = line.rng.choice(["past_due", "active", "unpaid"])
    ended = status == "unpaid"
    created = line.tick()
    updated = event(
        line,
        "customer.subscription.updated",
        _subscription(line, status),
        created=created,
        grant=not ended,  # past_due keeps access while Stripe retries
        price_id=None if ended else line.price,  # a status with access names its plan
        quantity=None if ended else line.quantity,
        source=line.subscription,
        email="subscription-cancelled" if ended else None,
        announced_on="revoked" if ended else None,
    )
    if status == "unpaid":
        line.subscription = None
    return [updated]


def plan_change(line: Timeline) -> list[Planned]:
    """An up- or downgrade: the subscription's current item moves to another price."""
    line.price = line.rng.choice([p for p in SUBSCRIPTION_PRICES if p != line.price])
    created = line.tick()
    changed = _subscription(line, "active")
    return [
        event(
            line,
            "customer.subscription.updated",
            changed,
            created=created,
            grant=True,
            price_id=line.price,
            source=line.subscription,
        )
    ]


def cancellation(line: Timeline) -> list[Planned]:
    deleted = event(
        line,
        "customer.subscription.deleted",
        _subscription(line, "canceled"),
        created=line.tick(),
        grant=False,
        email="subscription-cancelled",
        announced_on="revoked",
        source=line.subscription,
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
                    "price": {"id": line.price or c.price_id},
                    "period": {"start": created, "end": created + 30 * DAY},
                }
            ],
        },
    }
    source = line.subscription if grant is not None else None
    return event(line, type_, invoice, created=created, grant=grant, email=email, source=source)


def _subscription(line: Timeline, status: str) -> dict[str, Any]:
    item: dict[str, Any] = {"id": f"si_{line.subscription}", "price": {"id": line.price}}
    if line.quantity is not None:  # a team's plan is sold per seat
        item["quantity"] = line.quantity
    return {
        "id": line.subscription,
        "object": "subscription",
        "customer": line.customer.customer_id,
        "status": status,
        "cancel_at_period_end": False,
        "current_period_end": line.clock + 30 * DAY,
        "ended_at": line.clock if status == "canceled" else None,
        "items": {"object": "list", "data": [item]},
    }


def _subscribed(line: Timeline) -> bool:
    return line.subscription is not None


def _unsubscribed(line: Timeline) -> bool:
    return line.subscription is None


def _refundable(line: Timeline) -> bool:
    return line.subscription is None and bool(line.purchases)


Step = Callable[[Timeline], list[Planned]]
# (weight, when it may happen, step): what may happen next in a customer's life.
STEPS: dict[str, tuple[float, Callable[[Timeline], bool], Step]] = {
    "checkout": (1.0, _unsubscribed, checkout),
    "one-time purchase": (0.5, _unsubscribed, one_time_purchase),
    "guest purchase": (0.4, lambda line: bool(line.events), guest_purchase),
    "refund": (0.6, _refundable, refund),
    "renewal": (6.0, _subscribed, renewal),
    "failure": (2.0, _subscribed, failure),
    "status change": (1.5, _subscribed, status_change),
    "plan change": (1.0, _subscribed, plan_change),
    "cancellation": (1.0, _subscribed, cancellation),
}
# A team's life: a customer's, but its subscriptions are sold per seat, whose number changes,
# and stay on their plan.
TEAM_STEPS: dict[str, tuple[float, Callable[[Timeline], bool], Step]] = {
    **{kind: step for kind, step in STEPS.items() if kind not in ("plan change", "guest purchase")},
    "checkout": (1.0, _unsubscribed, team_checkout),
    "seat change": (3.0, _subscribed, seat_change),
}
