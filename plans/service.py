"""A subscription's plan or seats changed, previewed first (plans/rules.py's rules applied to
the subscription as Stripe holds it now). Who may change it is the caller's to check."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from adapters.db.pool import Database
from adapters.stripe_api import (
    PaymentsNotConfigured,
    PaymentsUnavailable,
    StripeCallFailed,
    StripeGateway,
)
from core.errors import Conflict, ConflictWithAnswer, InvalidRequest, NotConfigured, Unavailable
from plans import rules, store
from plans.rules import Plan, Preview

STALE_PREVIEW = "The preview is out of date: confirm the fresh one (preview)"
PAYMENT_REFUSED = (
    "The payment for the change was refused: the plan is unchanged. Update the payment method"
    " in the billing portal, then try again"
)
ENDING = (
    "This subscription is set to end at its period's end: resume it first"
    " (POST /api/payments/resume), then change it"
)
UNSCHEDULED = ". The change scheduled for the period's end was undone: schedule it again if wanted"


@dataclass(frozen=True)
class Wanted:
    """The plan asked for: a price (None: the current one) and a quantity (None: the current)."""

    price_id: str | None = None
    quantity: int | None = None


@dataclass(frozen=True)
class Applied:
    """A change made: what it charged or scheduled (the preview confirmed)."""

    preview: Preview
    subscription: dict[str, Any]


def preview(
    subscription_id: str, wanted: Wanted, *, stripe: StripeGateway, secret: str, db: Database
) -> Preview:
    """What the change would cost now and next; nothing changes."""
    with _stripe_errors():
        sub = stripe.subscription(subscription_id)
        plan = _wanted_plan(sub, wanted, stripe, db)
        return _preview(sub, plan, stripe=stripe, secret=secret, at=int(time.time()))


def change(
    subscription_id: str,
    wanted: Wanted,
    *,
    proration_date: str | None,
    stripe: StripeGateway,
    secret: str,
    db: Database,
) -> Applied:
    """Apply a previewed change at its proration date (so it charges what the preview said):
    an upgrade now, invoiced now; anything else scheduled for the period's end. A preview
    that no longer holds (older than its lifetime, of another change, from before the
    subscription last changed, or altered) is answered with a fresh one (409). Without a
    proration date (a team's seats route) the change is made at the present time."""
    now = int(time.time())
    with _stripe_errors():
        sub = stripe.subscription(subscription_id)
        plan = _wanted_plan(sub, wanted, stripe, db)
        state = rules.state_of(sub)
        at = now
        if proration_date is not None:
            try:
                holds = rules.proration_holds(
                    secret,
                    proration_date,
                    subscription_id=subscription_id,
                    wanted=plan,
                    state=state,
                    now=now,
                )
            except rules.BadProrationDate as exc:
                raise InvalidRequest(str(exc)) from exc
            if not holds:
                fresh = _preview(sub, plan, stripe=stripe, secret=secret, at=now)
                raise ConflictWithAnswer(STALE_PREVIEW, extra={"preview": answer_of(fresh)})
            at = rules.proration_at(proration_date)
        shown = _preview(sub, plan, stripe=stripe, secret=secret, at=at)
        current = rules.current_plan(sub)
        if shown.effective == "now":
            schedule = _schedule_id(sub)
            if schedule is not None:  # an upgrade replaces a change scheduled before it
                stripe.release_schedule(schedule)
                # Gone at Stripe whatever the payment does: the page no longer shows it.
                store.clear_scheduled(db, subscription_id)
            updated = stripe.update_subscription(
                subscription_id,
                rules.upgrade_params(sub, plan, at=at),
                idempotency_key=f"plan-{subscription_id}-{state}-{plan.price_id}-{plan.quantity}",
            )
            if updated.get("pending_update"):
                raise Conflict(PAYMENT_REFUSED + (UNSCHEDULED if schedule is not None else ""))
            store.clear_scheduled(db, subscription_id)
            return Applied(shown, updated)
        del current
        schedule = _schedule_id(sub) or str(stripe.schedule_from(subscription_id)["id"])
        stripe.update_schedule(schedule, rules.schedule_phases(sub, plan))
        store.record_scheduled(
            db,
            source_id=subscription_id,
            price_id=plan.price_id,
            quantity=plan.quantity,
            effective_at=datetime.fromtimestamp(shown.effective_at, UTC),
            schedule_id=schedule,
        )
        return Applied(shown, stripe.subscription(subscription_id))


def answer_of(found: Preview) -> dict[str, Any]:
    """A preview as the routes answer it."""
    return {
        "effective": found.effective,
        "effectiveAt": found.effective_at,
        "amountDue": found.amount_due,
        "currency": found.currency,
        "prorationDate": found.proration_date,
        "lines": [{"description": line.description, "amount": line.amount} for line in found.lines],
        "nextCharge": {"amount": found.next_amount, "at": found.next_at},
    }


def _preview(
    sub: Mapping[str, Any], plan: Plan, *, stripe: StripeGateway, secret: str, at: int
) -> Preview:
    current = rules.current_plan(sub)
    if not rules.is_change(current, plan):
        raise InvalidRequest("That is the plan and quantity already held: nothing to change")
    if plan.currency != current.currency:
        raise InvalidRequest(
            f"The new price is in {plan.currency.upper()}, the subscription in"
            f" {current.currency.upper()}: choose a price in the same currency (newPriceId)"
        )
    when = rules.effective(current, plan)
    start, end = rules.period(sub)
    at = min(max(at, start), end)
    invoice = stripe.preview_invoice(rules.preview_params(sub, plan, when=when, at=at))
    token = rules.sign_proration(
        secret, subscription_id=str(sub["id"]), wanted=plan, at=at, state=rules.state_of(sub)
    )
    return rules.preview_of(
        invoice, subscription=sub, wanted=plan, when=when, at=at, proration_date=token
    )


def _wanted_plan(
    sub: Mapping[str, Any], wanted: Wanted, stripe: StripeGateway, db: Database
) -> Plan:
    if sub.get("status") not in ("active", "trialing", "past_due"):
        raise Conflict("This subscription has ended: buy a plan with create-checkout")
    if sub.get("cancel_at_period_end") or sub.get("cancel_at"):
        # Set to end: no next charge to preview, no period after it for a change to start in.
        raise Conflict(ENDING)
    current = rules.current_plan(sub)
    price_id = wanted.price_id or current.price_id
    quantity = wanted.quantity if wanted.quantity is not None else current.quantity
    # Only a plan this service sells, and seats only of a plan sold per seat (the plan held
    # now may be one no longer sold: its seats still change).
    per_seat = store.sold_per_seat(db, price_id)
    if per_seat is None and price_id != current.price_id:
        raise InvalidRequest("Unknown or inactive price ID (newPriceId)")
    if per_seat is None:  # the plan held now, no longer sold: seats only if it was sold per seat
        per_seat = store.was_per_seat(db, price_id)
    if per_seat is False and quantity != 1:
        raise InvalidRequest("Quantity is only for a per-seat price (quantity)")
    if price_id == current.price_id:
        return rules.Plan(**{**current.__dict__, "quantity": quantity})
    try:
        price = stripe.price(price_id)
    except StripeCallFailed as exc:
        raise InvalidRequest("Unknown price (newPriceId)") from exc
    if not price.get("active", True) or not price.get("recurring"):
        raise InvalidRequest("The new price is not an active recurring price (newPriceId)")
    return rules.plan_of(price, quantity)


def _schedule_id(sub: Mapping[str, Any]) -> str | None:
    schedule = sub.get("schedule")
    if isinstance(schedule, Mapping):
        if schedule.get("status") not in ("active", "not_started"):
            return None
        return str(schedule["id"])
    return str(schedule) if schedule else None


@contextmanager
def _stripe_errors() -> Iterator[None]:
    try:
        yield
    except PaymentsNotConfigured as exc:
        raise NotConfigured(str(exc)) from exc
    except PaymentsUnavailable as exc:
        raise Unavailable("Payments are unavailable right now; please try again shortly") from exc
    except StripeCallFailed as exc:
        raise InvalidRequest(f"Stripe refused the change: {exc}") from exc


NOTHING_TO_RESUME = (
    "Nothing is scheduled to undo: no cancellation is pending and no change is still to come"
    " (a change that has taken effect is changed back with change-plan)"
)


@dataclass(frozen=True)
class RetentionOffer:
    """The retention coupon as the person cancelling is offered it."""

    coupon: str
    percent_off: float | None
    amount_off: int | None
    duration: str
    duration_in_months: int | None


@dataclass(frozen=True)
class Cancelled:
    """What a cancellation call did: an offer shown (nothing changed), the offer accepted (the
    subscription kept, discounted), or the cancellation made (ending at `cancel_at`)."""

    offer: RetentionOffer | None = None
    kept: bool = False
    cancel_at: int | None = None


def cancel(
    subscription_id: str,
    *,
    reason: str,
    comment: str | None,
    offer: str | None,
    coupon: str | None,
    db: Database,
    stripe: StripeGateway,
) -> Cancelled:
    """Cancel at the period's end with the reason and comment recorded in Stripe; first, once
    per customer, the retention coupon is offered (nothing changes), then applied when
    accepted (the subscription kept) or the cancellation made when declined."""
    with _stripe_errors():
        sub = stripe.subscription(subscription_id)
        if sub.get("cancel_at_period_end"):
            return Cancelled(cancel_at=_int(sub.get("cancel_at")) or rules.period(sub)[1])
        customer = rules.customer_of(sub)
        offerable = coupon is not None and not (
            store.retention_taken(db, customer) or rules.has_coupon(sub, coupon)
        )
        if offer == "accept":
            if coupon is None or not offerable:
                raise Conflict("No offer to accept: the subscription is unchanged")
            return _accept(sub, coupon, db=db, stripe=stripe)
        if offerable and offer is None and coupon is not None:
            return Cancelled(offer=_offer_of(stripe.coupon(coupon)))
        schedule = _schedule_id(sub)
        if schedule is not None:  # a scheduled change gives way to the cancellation
            stripe.release_schedule(schedule)
            store.clear_scheduled(db, subscription_id)
        details: dict[str, Any] = {"feedback": reason}
        if comment:
            details["comment"] = comment
        updated = stripe.update_subscription(
            subscription_id,
            {"cancel_at_period_end": True, "cancellation_details": details},
        )
        return Cancelled(cancel_at=_int(updated.get("cancel_at")) or rules.period(updated)[1])


def _accept(
    sub: Mapping[str, Any], coupon: str, *, db: Database, stripe: StripeGateway
) -> Cancelled:
    customer, sid = rules.customer_of(sub), str(sub["id"])
    if not store.claim_retention(db, customer, coupon, sid):
        raise Conflict("No offer to accept: the subscription is unchanged")
    try:
        # Stripe replaces the discounts with the list given: those held already stay on it.
        held = [{"discount": d} for d in _discount_ids(sub)]
        stripe.update_subscription(
            sid,
            {"discounts": [*held, {"coupon": coupon}]},
            idempotency_key=f"retention-{customer}",
        )
    except Exception:
        store.release_retention(db, customer)
        raise
    return Cancelled(kept=True, offer=_offer_of(stripe.coupon(coupon)))


def _discount_ids(sub: Mapping[str, Any]) -> list[str]:
    return [
        str(d.get("id")) if isinstance(d, Mapping) else str(d)
        for d in sub.get("discounts") or []
        if d
    ]


def resume(
    subscription_id: str, *, stripe: StripeGateway, db: Database
) -> Literal["cancellation", "change"]:
    """Undo what is scheduled: a cancellation at the period's end ("cancellation"), or a
    change still to come ("change"); 409 when nothing is (a change that took effect stays)."""
    with _stripe_errors():
        sub = stripe.subscription(subscription_id)
        if sub.get("cancel_at_period_end"):
            stripe.update_subscription(subscription_id, {"cancel_at_period_end": False})
            return "cancellation"
        schedule = sub.get("schedule")
        still = rules.scheduled_change(
            schedule if isinstance(schedule, Mapping) else None, now=int(time.time())
        )
        schedule_id = _schedule_id(sub)
        if still is None or schedule_id is None:
            store.clear_scheduled(db, subscription_id)
            raise Conflict(NOTHING_TO_RESUME)
        stripe.release_schedule(schedule_id)
        store.clear_scheduled(db, subscription_id)
        return "change"


def _offer_of(coupon: Mapping[str, Any]) -> RetentionOffer:
    off = coupon.get("percent_off")
    return RetentionOffer(
        coupon=str(coupon["id"]),
        percent_off=float(off) if off is not None else None,
        amount_off=_int(coupon.get("amount_off")),
        duration=str(coupon.get("duration") or "once"),
        duration_in_months=_int(coupon.get("duration_in_months")),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
