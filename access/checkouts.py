"""Which access change an event calls for, and whether it may still be applied."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from access.entitlements import ACCESS_STATUSES, PURCHASE, SUBSCRIPTION, GrantChange
from access.revenue import Snapshot, snapshot
from core.events import Event, parse_event, stripe_id
from core.stripe_objects import (
    Amounts,
    Trial,
    charged_line,
    checkout_quantity,
    customer_contact,
    first_quantity,
    invoice_period,
    invoice_price,
    invoice_subscription,
    line_price,
    merchant_of_record,
    session_amounts,
    subscription_period_end,
    subscription_trial,
)

# States that end access (paused: a trial ended without a payment method); `incomplete` (the
# first payment awaits the customer) changes nothing: the checkout is not paid either.
ENDED_STATUSES = frozenset({"canceled", "unpaid", "incomplete_expired", "paused"})
# A checkout in these states has been paid for (or costs nothing).
PAID_STATUSES = frozenset({"paid", "no_payment_required"})

TRIAL_WILL_END = "customer.subscription.trial_will_end"


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
    # A checkout bought for a team: the team's account (its metadata's `team_id`) pays.
    account_id: str | None = None
    # Its line item's quantity (the seats of a per-seat price), when the session was read with
    # its line items: a webhook's event has none, the access cycle asks Stripe for them.
    quantity: int | None = None
    # What the buyer was told at Checkout and charged (subtotal, tax, total, tax ids, the
    # currency), and whether Stripe sold it as merchant of record: the confirmation repeats it.
    amounts: Amounts | None = None
    merchant_of_record: bool = False
    # The free trial its subscription is on, when the session was read with its subscription
    # (the success page's completion; the access cycle asks Stripe for a checkout of nothing):
    # the grant and the confirmation say so, never a payment.
    trial: Trial | None = None


@dataclass(frozen=True)
class PaidPeriod:
    """A subscription's period an invoice paid: its credits are granted once per invoice. An
    upgrade's proration invoice (`top_up`) pays the rest of the period on the new plan: it
    grants the new plan's period credits less what the period granted already."""

    invoice_id: str
    price_id: str | None
    start: int | None
    end: int | None
    top_up: bool = False


# The invoices that pay a new period; a proration's (`subscription_update`) tops the period
# up to the new plan's credits once paid (a downgrade waits for its period: it is invoiced then).
PERIOD_REASONS = frozenset({"subscription_create", "subscription_cycle", None})
TOP_UP_REASON = "subscription_update"


@dataclass(frozen=True)
class AccessChange:
    """A change to one subscription's grant, held by the account that pays as `customer_id`."""

    customer_id: str
    change: GrantChange
    price_id: str | None = None  # the plan the change puts the customer on, when it says
    quantity: int | None = None  # the subscription's quantity (a team's seats), when it says
    # A paid period (an invoice of a subscription's creation or renewal): it grants the
    # period's credits, from the invoice's price (the plan at that period), else the grant's.
    paid: PaidPeriod | None = None
    # The subscription as a subscription event shows it: what the revenue metrics record.
    revenue: Snapshot | None = None

    @property
    def grant(self) -> bool:
        return self.change.grant

    @property
    def subscription_id(self) -> str:
        return self.change.source_id


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
        account_id=_uuid(metadata.get("team_id")),
        quantity=checkout_quantity(session),
        amounts=session_amounts(session),
        merchant_of_record=merchant_of_record(session),
        trial=subscription_trial(session.get("subscription")),
    )


# The ledger id of a checkout completed from its success page: one per session, so the page
# asking again (a reload, a second tab) applies nothing twice.
COMPLETION_PREFIX = "completion_"


def completion_event(session: Mapping[str, Any]) -> Event:
    """A checkout session as the success page finds it at Stripe, as the event the access
    cycle applies: `checkout.session.completed` under an id derived from the session, dated
    at the session's creation. Every event Stripe sends about the session or its grant is as
    new or newer, so whichever comes later is ordered after this one: Stripe's own
    `checkout.session.completed` applies the same grant again (its announcements keyed by the
    session, the buyer is told once), and a refund or cancellation applied first stays."""
    return parse_event(
        {
            "id": COMPLETION_PREFIX + str(session["id"]),
            "type": "checkout.session.completed",
            "created": session["created"],
            "livemode": bool(session.get("livemode", False)),
            "data": {"object": dict(session)},
        }
    )


# The subscription events whose object is the subscription as it now is.
SUBSCRIPTION_STATE_EVENTS = frozenset(
    {"customer.subscription.created", "customer.subscription.updated"}
)


def access_change(event: Event) -> AccessChange | None:
    """The access change of an invoice or subscription event, keyed by customer.

    An invoice without a subscription (a one-off invoice; a one-time checkout's own invoice)
    changes no entitlement: its checkout does.
    """
    obj = event.object
    customer = stripe_id(obj.get("customer"))
    if customer is None:
        return None
    if event.type == "invoice.paid":
        subscription = invoice_subscription(obj)
        if subscription is None:
            return None
        period_start, period_end = invoice_period(obj)
        change = GrantChange(
            subscription,
            SUBSCRIPTION,
            grant=True,
            status="active",
            current_period_end=period_end,
            customer_id=customer,
        )
        invoice_id = stripe_id(obj.get("id"))
        reason = obj.get("billing_reason")
        paid = (
            PaidPeriod(invoice_id, invoice_price(obj), period_start, period_end)
            if invoice_id and reason in PERIOD_REASONS
            else None
        )
        if invoice_id and reason == TOP_UP_REASON:
            paid = _top_up(invoice_id, obj)
        return AccessChange(customer, change, paid=paid)
    found: AccessChange | None = None
    if event.type == "customer.subscription.deleted":
        found = _subscription_change(customer, obj, grant=False)
    elif event.type in SUBSCRIPTION_STATE_EVENTS:
        status = obj.get("status")
        if status in ACCESS_STATUSES:
            found = _subscription_change(customer, obj, grant=True)
        elif status in ENDED_STATUSES:
            found = _subscription_change(customer, obj, grant=False)
    return replace(found, revenue=snapshot(event.type, obj)) if found else None


def _top_up(invoice_id: str, invoice: Mapping[str, Any]) -> PaidPeriod | None:
    """An upgrade's proration invoice: the plan charged for the rest of the period (its line
    that charges, not the one that credits the old plan's unused time)."""
    line = charged_line(invoice)
    if (_int(line.get("amount")) or 0) <= 0:
        return None
    period = _mapping(line.get("period"))
    end = _int(period.get("end"))
    # A new interval starts a new period now (the old plan's unused time credited back): its
    # credits replace the old period's, whole, as a renewal's do; else they top it up.
    lines = _mapping(invoice.get("lines")).get("data")
    credited = [
        _int(_mapping(_mapping(other).get("period")).get("end"))
        for other in (lines if isinstance(lines, list) else [])
        if (_int(_mapping(other).get("amount")) or 0) < 0
    ]
    new_period = end is not None and any(e is not None and e < end for e in credited)
    return PaidPeriod(
        invoice_id,
        line_price(line),
        _int(period.get("start")),
        end,
        top_up=not new_period,
    )


def _subscription_change(
    customer: str, subscription: Mapping[str, Any], *, grant: bool
) -> AccessChange | None:
    sub_id = stripe_id(subscription.get("id"))
    if sub_id is None:
        return None
    status = subscription.get("status")
    price = subscription_price(subscription)
    change = GrantChange(
        sub_id,
        SUBSCRIPTION,
        grant=grant,
        status=status if isinstance(status, str) else ("active" if grant else "canceled"),
        price_id=price,
        current_period_end=subscription_period_end(subscription),
        cancel_at_period_end=_bool(subscription.get("cancel_at_period_end")),
        trial_end=_int(subscription.get("trial_end")),
        ended_at=_int(subscription.get("ended_at")),
        customer_id=customer,
        payment_method=payment_method(subscription),
    )
    # The plan: what an active subscription is on now (an ended one names the plan it was on).
    return AccessChange(
        customer,
        change,
        price_id=price if grant else None,
        quantity=subscription_quantity(subscription) if grant else None,
    )


def payment_method(subscription: Mapping[str, Any]) -> bool | None:
    """Whether a payment method backs the subscription (its own default, which Checkout sets
    from the card it collected), None when the object does not say. A trial without one is
    cancelled (or paused) at its end: nobody pays what it consumed beyond its credits."""
    said = [
        subscription[k] for k in ("default_payment_method", "default_source") if k in subscription
    ]
    return any(said) if said else None


def checkout_change(checkout: Checkout) -> GrantChange:
    """The grant a paid checkout makes: its subscription's, or a one-time purchase's."""
    if checkout.subscription_id:
        trial = checkout.trial
        return GrantChange(
            checkout.subscription_id,
            SUBSCRIPTION,
            grant=True,
            status="trialing" if trial else "active",
            price_id=checkout.price_id,
            customer_id=checkout.customer_id,
            current_period_end=trial.trial_end if trial else None,
            trial_end=trial.trial_end if trial else None,
        )
    return GrantChange(
        checkout.session_id,
        PURCHASE,
        grant=True,
        status="paid",
        price_id=checkout.price_id,
        customer_id=checkout.customer_id,
    )


def refund_change(session_id: str) -> GrantChange:
    """A one-time purchase refunded in full: its grant ends."""
    return GrantChange(session_id, PURCHASE, grant=False, status="refunded")


def subscription_price(subscription: Mapping[str, Any]) -> str | None:
    """The price of the subscription's current (first) item: the plan after an up- or downgrade."""
    items = _mapping(subscription.get("items")).get("data")
    first = items[0] if isinstance(items, list) and items else None
    return stripe_id(_mapping(first).get("price"))


def subscription_quantity(subscription: Mapping[str, Any]) -> int | None:
    """The quantity of the subscription's current (first) item: a per-seat plan's seats."""
    return first_quantity(subscription.get("items"))


def _uuid(value: Any) -> str | None:
    """A user id, only if it is one: `client_reference_id` is free text set by the browser side."""
    try:
        return str(uuid.UUID(str(value))) if value else None
    except ValueError:
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def end_reason(subscription: Mapping[str, Any]) -> str:
    """Why a subscription's access ended.

    `payment_failed` when Stripe ended it for want of payment (`cancellation_details.reason`,
    or the status `unpaid` after the last retry); `trial_ended` when a trial ended without a
    payment method (Stripe pauses it, or cancels it at the trial's end with no payment); else
    `subscription_ended` (the customer or the business cancelled it).
    """
    details = _mapping(subscription.get("cancellation_details"))
    if details.get("reason") == "payment_failed" or subscription.get("status") == "unpaid":
        return "payment_failed"
    if subscription.get("status") == "paused" or _trial_ran_out(subscription, details):
        return "trial_ended"
    return "subscription_ended"


def _trial_ran_out(subscription: Mapping[str, Any], details: Mapping[str, Any]) -> bool:
    """Cancelled by Stripe as its trial ended: nobody asked for it, and it ended at the trial's
    end (`trial_settings.end_behavior.missing_payment_method` = cancel)."""
    trial_end, ended = _int(subscription.get("trial_end")), _int(subscription.get("ended_at"))
    asked = details.get("reason") == "cancellation_requested"
    return not asked and trial_end is not None and ended is not None and ended == trial_end


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None
