"""Stripe-shaped sample events for local runs: one per subscribed type, at the current API
version (what a new account's webhook endpoint sends) or at 2023-08-16.

Each is written as 2023-08-16 shaped it, with the fields this service reads and those that make
an object recognisable (`object`, `livemode`, `created`); ids follow Stripe's prefixes. At the
current version it is reshaped as that version moved and removed fields (`current_shape`), then
made whole: every field Stripe sends at that version, as dev/stripe_shapes.py gives a new
test-mode object's (`whole`), so what the service reads is what Stripe would send it
(tests/subscribers/test_sample_versions.py holds the outcome alike at both versions).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.stripe_objects import CURRENT_VERSION, PINNED_VERSION
from dev import stripe_record
from dev import stripe_shapes as shapes
from dev.samples import catalogue

API_VERSIONS = (CURRENT_VERSION, PINNED_VERSION)
API_VERSION = CURRENT_VERSION
DEFAULT_EMAIL = "buyer@example.com"
DEFAULT_PRICE = "price_demo_team_monthly"  # the monthly demo product `make run` seeds
PERIOD = 30 * 24 * 3600


@dataclass(frozen=True)
class Facts:
    """Who bought what: the same e-mail gives the same customer and subscription ids."""

    email: str = DEFAULT_EMAIL
    customer: str | None = None
    price: str = DEFAULT_PRICE
    user_id: str | None = None
    session: str | None = None
    amount: int = 1900
    currency: str = "usd"
    # The product's: a `payment` checkout is a one-time (lifetime) purchase, no subscription.
    mode: str = "subscription"
    interval: str = "month"
    # Bought for a team (its id): the team's account pays as a customer of its own; a per-seat
    # price's quantity is the team's seats.
    team_id: str | None = None
    quantity: int = 1
    # Tax added on top of `amount` (Stripe Tax's, as the checkout session calculated it).
    tax: int = 0

    @property
    def customer_id(self) -> str:
        if self.customer is None and self.team_id:
            return "cus_" + _digest("team", self.team_id)
        return self.customer or "cus_" + _digest("customer", self.email)

    @property
    def subscription_id(self) -> str:
        return "sub_" + _digest("subscription", self.customer_id)


def sample_event(
    event_type: str,
    facts: Facts,
    *,
    created: int,
    api_version: str = API_VERSION,
    variant: str | None = None,
) -> dict[str, Any]:
    """A whole Stripe event body of `event_type` about `facts`, created at `created`, shaped
    as `api_version` shapes it; `variant`: one of the type's situations (VARIANTS)."""
    if event_type not in _OBJECTS:
        raise ValueError(f"no sample for {event_type!r}; one of {', '.join(sorted(_OBJECTS))}")
    if api_version not in API_VERSIONS:
        raise ValueError(f"no samples at {api_version!r}; one of {', '.join(API_VERSIONS)}")
    obj = _OBJECTS[event_type](facts, created)
    if variant is not None:
        obj = variant_of(event_type, variant)(obj, created)
    if api_version != PINNED_VERSION:
        obj = whole(current_shape(obj))
    previous = PREVIOUS.get((event_type, variant or ""))
    event = {
        "id": "evt_" + secrets.token_hex(12),
        "object": "event",
        "api_version": api_version,
        "created": created,
        "data": {"object": obj} | ({"previous_attributes": previous} if previous else {}),
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }
    stripe_record.record("event", event, what="a sample event")
    return event


def current_shape(obj: dict[str, Any]) -> dict[str, Any]:
    """A 2023-08-16 object as the current versions shape it (core/stripe_objects.py lists the
    moves): an invoice's subscription under `parent`, its lines' price under `pricing`, a
    subscription's period on its items."""
    reshaped = dict(obj)
    if obj.get("object") == "charge":
        # 2025-03-31.basil: an invoice takes several payments; a charge names none.
        reshaped.pop("invoice", None)
    if obj.get("object") == "invoice":
        # 2025-03-31.basil: `paid` left the invoice (its `status` says it).
        reshaped.pop("paid", None)
        subscription = reshaped.pop("subscription", None)
        reshaped["parent"] = (
            {
                "type": "subscription_details",
                "subscription_details": {"subscription": subscription, "metadata": {}},
            }
            if subscription
            else None
        )
        lines = obj.get("lines") or {"data": []}
        data = [_current_line(line) for line in lines.get("data", [])]
        reshaped["lines"] = {**lines, "data": data}
        # 2025-03-31.basil: `tax` and `total_tax_amounts` became `total_taxes`.
        if "total_tax_amounts" in reshaped:
            reshaped.pop("tax", None)
            reshaped["total_taxes"] = [
                {
                    "amount": found["amount"],
                    "tax_behavior": "inclusive" if found["inclusive"] else "exclusive",
                    "taxability_reason": found["taxability_reason"],
                    "taxable_amount": found["taxable_amount"],
                    "type": "tax_rate_details",
                    "tax_rate_details": {"tax_rate": found["tax_rate"]},
                }
                for found in reshaped.pop("total_tax_amounts")
            ]
    elif obj.get("object") == "subscription":
        start = reshaped.pop("current_period_start", None)
        end = reshaped.pop("current_period_end", None)
        items = obj.get("items") or {"data": []}
        period = {"current_period_start": start, "current_period_end": end}
        reshaped["items"] = {**items, "data": [item | period for item in items.get("data", [])]}
    return reshaped


def whole(obj: dict[str, Any]) -> dict[str, Any]:
    """A current-shaped object with every field Stripe sends of its type: its own values over a
    new test-mode object's (dev/stripe_shapes.py)."""
    template = _TEMPLATES.get(str(obj.get("object")))
    return shapes.merged(template(obj), obj) if template else obj


def _whole_session(obj: dict[str, Any]) -> dict[str, Any]:
    made = shapes.checkout_session(
        obj["id"], mode=obj["mode"], url="", created=obj["created"], params={}
    )
    details = obj.get("customer_details")
    if isinstance(details, dict):
        made["customer_details"] = shapes.customer_details(
            str(details.get("email")), details.get("name")
        )
    return made


def _whole_price(obj: dict[str, Any]) -> dict[str, Any]:
    recurring = obj.get("recurring") or {}
    made = shapes.price(
        obj["id"],
        str(obj.get("product") or "prod_demo_team"),
        obj.get("unit_amount") or 0,
        recurring.get("interval"),
        created=obj.get("created") or 0,
        currency=obj.get("currency") or "usd",
    )
    whole_price: dict[str, Any] = shapes.merged(made, obj)
    return whole_price


def _whole_subscription(obj: dict[str, Any]) -> dict[str, Any]:
    items = [
        shapes.subscription_item(
            item["id"],
            obj["id"],
            _whole_price(item["price"]),
            item.get("quantity") or 1,
            created=obj["created"],
        )
        for item in obj["items"]["data"]
    ]
    return shapes.subscription(
        obj["id"], customer_id=obj["customer"], items=items, created=obj["created"]
    )


def _whole_invoice(obj: dict[str, Any]) -> dict[str, Any]:
    subscription = ((obj.get("parent") or {}).get("subscription_details") or {}).get("subscription")
    lines = [
        shapes.invoice_line(
            line["id"],
            invoice_id=obj["id"],
            subscription_id=subscription,
            subscription_item="si_" + _digest("item", subscription) if subscription else None,
            price_id=line["pricing"]["price_details"]["price"],
            product_id=_catalogue_price_of(line["pricing"]["price_details"]["price"])["product"],
            amount=line["amount"],
            currency=line["currency"],
            quantity=line.get("quantity") or 1,
            start=line["period"]["start"],
            end=line["period"]["end"],
        )
        for line in obj["lines"]["data"]
    ]
    return shapes.invoice(
        obj["id"],
        customer_id=obj["customer"],
        subscription_id=subscription,
        lines=lines,
        created=obj["created"],
        currency=obj["currency"],
        paid=obj.get("status") == "paid",
        tax=obj["total"] - obj["subtotal"],
    )


def _whole_charge(obj: dict[str, Any]) -> dict[str, Any]:
    return shapes.charge(
        obj["id"],
        amount=obj["amount"],
        currency=obj["currency"],
        customer_id=obj.get("customer"),
        payment_intent=obj.get("payment_intent"),
        created=obj["created"],
        receipt_url=None,
    )


def _whole_dispute(obj: dict[str, Any]) -> dict[str, Any]:
    return shapes.dispute(
        obj["id"],
        amount=obj["amount"],
        currency=obj["currency"],
        charge_id=obj["charge"],
        payment_intent=obj.get("payment_intent"),
        created=obj["created"],
        due_by=obj["evidence_details"]["due_by"],
        reason=obj["reason"],
        status=obj["status"],
    )


def _whole_product(obj: dict[str, Any]) -> dict[str, Any]:
    return shapes.product(obj["id"], obj["name"], None, {}, created=obj.get("created") or 0)


_TEMPLATES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "checkout.session": _whole_session,
    "subscription": _whole_subscription,
    "invoice": _whole_invoice,
    "charge": _whole_charge,
    "dispute": _whole_dispute,
    "price": _whole_price,
    "product": _whole_product,
}


def _current_line(line: dict[str, Any]) -> dict[str, Any]:
    reshaped = dict(line)
    # 2025-03-31.basil: a line's `type` became its `parent`'s.
    reshaped.pop("type", None)
    price = reshaped.pop("price", None)
    price_id = price.get("id") if isinstance(price, dict) else price
    reshaped["pricing"] = {"type": "price_details", "price_details": {"price": price_id}}
    return reshaped


def _session(facts: Facts, created: int, *, status: str, paid: str) -> dict[str, Any]:
    session_id = facts.session or "cs_test_" + secrets.token_hex(12)
    subscribed = facts.mode == "subscription"
    metadata = {"price_id": facts.price} | ({"user_id": facts.user_id} if facts.user_id else {})
    metadata |= {"team_id": facts.team_id} if facts.team_id else {}
    paid_invoice = "in_" + _digest("first-invoice", session_id) if subscribed else None
    return {
        "id": session_id,
        "object": "checkout.session",
        "amount_subtotal": facts.amount,
        "amount_total": facts.amount + facts.tax,
        "client_reference_id": facts.user_id,
        "created": created,
        "currency": facts.currency,
        "customer": facts.customer_id,
        "customer_details": {"email": facts.email, "name": None, "tax_exempt": "none"},
        "customer_email": facts.email,
        "expires_at": created + 24 * 3600,
        # A subscription's checkout pays its first invoice, which the session names.
        "invoice": paid_invoice if paid == "paid" else None,
        "livemode": False,
        "metadata": metadata,
        "mode": facts.mode,
        "payment_intent": None if subscribed else "pi_" + _digest("intent", session_id),
        "payment_status": paid,
        "status": status,
        "subscription": facts.subscription_id if subscribed else None,
        "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": facts.tax},
        "url": None,
    }


def _completed(facts: Facts, created: int) -> dict[str, Any]:
    return _session(facts, created, status="complete", paid="paid")


def _expired(facts: Facts, created: int) -> dict[str, Any]:
    session = _session(facts, created, status="expired", paid="unpaid")
    return session | {
        "customer": None,
        "subscription": None,
        "invoice": None,
        "after_expiration": None,
    }


def _invoice(facts: Facts, created: int, *, paid: bool) -> dict[str, Any]:
    number = _digest("invoice", f"{facts.customer_id}{created}")[:8].upper()
    total = facts.amount + facts.tax
    taxed = {
        "tax": facts.tax,
        "total_tax_amounts": [
            {
                "amount": facts.tax,
                "inclusive": False,
                "tax_rate": "txr_sample",
                "taxability_reason": "standard_rated",
                "taxable_amount": facts.amount,
            }
        ],
    }
    return (taxed if facts.tax else {}) | {
        "id": "in_" + secrets.token_hex(12),
        "object": "invoice",
        # Stripe always sends them, taxed or not.
        "subtotal": facts.amount,
        "total": total,
        "amount_due": total,
        "amount_paid": total if paid else 0,
        "attempt_count": 1,
        "billing_reason": "subscription_cycle",
        "created": created,
        "currency": facts.currency,
        "customer": facts.customer_id,
        "customer_email": facts.email,
        "customer_name": None,
        "hosted_invoice_url": None,
        "lines": {
            "object": "list",
            "data": [_line(facts, created)],
            "has_more": False,
            "url": "/v1/invoices/upcoming/lines",
        },
        "livemode": False,
        "next_payment_attempt": None if paid else created + 3 * 24 * 3600,
        "number": f"{number}-0001",
        "paid": paid,
        "status": "paid" if paid else "open",
        "status_transitions": {"paid_at": created if paid else None},
        "subscription": facts.subscription_id,
    }


def _line(facts: Facts, created: int) -> dict[str, Any]:
    return {
        "id": "il_" + secrets.token_hex(12),
        "object": "line_item",
        "amount": facts.amount,
        "currency": facts.currency,
        "period": {"start": created, "end": created + PERIOD},
        "price": _price(facts),
        "quantity": facts.quantity,
        "type": "subscription",
    }


def _price(facts: Facts) -> dict[str, Any]:
    return {
        "id": facts.price,
        "object": "price",
        "currency": facts.currency,
        "recurring": {"interval": facts.interval, "interval_count": 1},
        "type": "recurring",
        "unit_amount": facts.amount,
    }


CATALOGUE_VERBS = ("created", "updated", "deleted")


def _catalogue_price(facts: Facts) -> dict[str, Any]:
    found = next((p for p in catalogue.PRICES if p["id"] == facts.price), None)
    return dict(found) if found else {**_price(facts), "product": "prod_demo_team"}


def _catalogue_price_of(price_id: str) -> dict[str, Any]:
    found = next((p for p in catalogue.PRICES if p["id"] == price_id), None)
    return found or {"id": price_id, "product": "prod_demo_team"}


def _catalogue_product(facts: Facts) -> dict[str, Any]:
    product_id = _catalogue_price(facts)["product"]
    return dict(next(p for p in catalogue.PRODUCTS if p["id"] == product_id))


def _subscription(facts: Facts, created: int, *, status: str) -> dict[str, Any]:
    ended = status == "canceled"
    item = {"id": "si_" + _digest("item", facts.subscription_id), "object": "subscription_item"}
    return {
        "id": facts.subscription_id,
        "object": "subscription",
        "cancel_at_period_end": False,
        "canceled_at": created if ended else None,
        "created": created,
        # The period that `created` falls in, as Stripe reports a live subscription's; at the
        # current versions it moves onto the items (`current_shape`), where Stripe puts it.
        "current_period_end": created + PERIOD,
        "current_period_start": created,
        "customer": facts.customer_id,
        "ended_at": created if ended else None,
        "items": {
            "object": "list",
            "data": [item | {"price": _price(facts), "quantity": facts.quantity}],
            "has_more": False,
            "url": f"/v1/subscription_items?subscription={facts.subscription_id}",
        },
        "livemode": False,
        "metadata": {},
        "status": status,
    }


def _charge(facts: Facts, created: int) -> dict[str, Any]:
    """A renewal's charge refunded in full: the samples' checkouts are subscriptions."""
    return {
        "id": "ch_" + _digest("charge", facts.customer_id),
        "object": "charge",
        "amount": facts.amount,
        "amount_refunded": facts.amount,
        "created": created,
        "currency": facts.currency,
        "customer": facts.customer_id,
        "invoice": "in_" + _digest("invoice", facts.customer_id),
        "livemode": False,
        "paid": True,
        "payment_intent": "pi_" + _digest("intent", facts.customer_id),
        "refunded": True,
        "status": "succeeded",
    }


def _intent(facts: Facts, created: int, *, paid: bool) -> dict[str, Any]:
    """A payment intent paid (or refused) on its own, as an automatic top-up's is; these carry
    no top-up's metadata, so the service records them and changes nothing."""
    intent = shapes.payment_intent(
        "pi_" + _digest("intent", facts.customer_id),
        amount=facts.amount,
        currency=facts.currency,
        customer_id=facts.customer_id,
        latest_charge="ch_" + _digest("charge", facts.customer_id) if paid else None,
        created=created,
    )
    if not paid:
        intent |= {
            "amount_received": 0,
            "status": "requires_payment_method",
            "last_payment_error": shapes.card_error("card_declined", payment_method="pm_card"),
        }
    return intent


def _dispute(facts: Facts, created: int) -> dict[str, Any]:
    return {
        "id": "dp_" + secrets.token_hex(12),
        "object": "dispute",
        "amount": facts.amount,
        "charge": "ch_" + _digest("charge", facts.customer_id),
        "created": created,
        "currency": facts.currency,
        "evidence_details": {"due_by": created + 7 * 24 * 3600, "has_evidence": False},
        "livemode": False,
        "payment_intent": "pi_" + _digest("intent", facts.customer_id),
        "reason": "fraudulent",
        "status": "needs_response",
    }


def _summary(facts: Facts, created: int) -> dict[str, Any]:
    """Stripe's active entitlements of the customer: none (the demo products grant none)."""
    return {
        "object": "entitlements.active_entitlement_summary",
        "customer": facts.customer_id,
        "entitlements": {
            "object": "list",
            "data": [],
            "has_more": False,
            "url": "/v1/entitlements/active_entitlements",
        },
        "livemode": False,
    }


_OBJECTS: dict[str, Callable[[Facts, int], dict[str, Any]]] = {
    "checkout.session.completed": _completed,
    "checkout.session.async_payment_succeeded": _completed,
    "checkout.session.expired": _expired,
    "invoice.paid": lambda f, t: _invoice(f, t, paid=True),
    "invoice.payment_failed": lambda f, t: _invoice(f, t, paid=False),
    "customer.subscription.created": lambda f, t: _subscription(f, t, status="active"),
    "customer.subscription.updated": lambda f, t: _subscription(f, t, status="active"),
    "customer.subscription.trial_will_end": lambda f, t: _trialing(
        _subscription(f, t, status="trialing"), t + 3 * DAY
    ),
    "customer.subscription.deleted": lambda f, t: _subscription(f, t, status="canceled"),
    "charge.refunded": _charge,
    "charge.dispute.created": _dispute,
    "payment_intent.succeeded": lambda f, t: _intent(f, t, paid=True),
    "payment_intent.payment_failed": lambda f, t: _intent(f, t, paid=False),
    # The demo catalogue's objects (the stand-in's): the price of the facts, and its product.
    **{f"price.{verb}": lambda f, t: _catalogue_price(f) for verb in CATALOGUE_VERBS},
    **{f"product.{verb}": lambda f, t: _catalogue_product(f) for verb in CATALOGUE_VERBS},
    "entitlements.active_entitlement_summary.updated": _summary,
}
SAMPLE_TYPES = tuple(sorted(_OBJECTS))

DAY = 24 * 3600
Variant = Callable[[dict[str, Any], int], dict[str, Any]]


def _trialing(subscription: dict[str, Any], trial_end: int) -> dict[str, Any]:
    return subscription | {
        "status": "trialing",
        "trial_start": trial_end - 14 * DAY,
        "trial_end": trial_end,
        "trial_settings": {"end_behavior": {"missing_payment_method": "cancel"}},
        "default_payment_method": None,
    }


def _cancelled_by(reason: str) -> Variant:
    def ended(subscription: dict[str, Any], created: int) -> dict[str, Any]:
        details = {"reason": reason, "comment": None, "feedback": None}
        return subscription | {"cancellation_details": details}

    return ended


def _trial_ran_out(subscription: dict[str, Any], created: int) -> dict[str, Any]:
    trial = _trialing(subscription, created)
    details = {"reason": None, "comment": None, "feedback": None}
    return trial | {"status": "canceled", "ended_at": created, "cancellation_details": details}


# The situations of a customer's life each type can describe, beyond its default: what
# `events send TYPE --variant NAME` sends.
VARIANTS: dict[str, dict[str, Variant]] = {
    "customer.subscription.updated": {
        "cancel-at-period-end": lambda o, t: (
            o | {"cancel_at_period_end": True, "cancel_at": t + 30 * DAY}
        ),
        "past-due": lambda o, t: o | {"status": "past_due"},
        "unpaid": lambda o, t: o | {"status": "unpaid"},
        "trialing": lambda o, t: _trialing(o, t + 14 * DAY),
    },
    "customer.subscription.created": {
        "trialing": lambda o, t: _trialing(o, t + 14 * DAY),
    },
    "customer.subscription.trial_will_end": {
        "with-card": lambda o, t: o | {"default_payment_method": "pm_" + _digest("pm", o["id"])},
    },
    "customer.subscription.deleted": {
        "payment-failed": _cancelled_by("payment_failed"),
        "requested": _cancelled_by("cancellation_requested"),
        "trial-ended": _trial_ran_out,
    },
    "invoice.payment_failed": {
        "last-attempt": lambda o, t: o | {"attempt_count": 4, "next_payment_attempt": None},
    },
}
# The `previous_attributes` Stripe sends with an update, where what changed matters.
PREVIOUS = {
    ("customer.subscription.updated", "cancel-at-period-end"): {"cancel_at_period_end": False}
}


def variant_of(event_type: str, name: str) -> Variant:
    """A situation of `event_type` (VARIANTS), or ValueError naming those there are."""
    found = VARIANTS.get(event_type, {})
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise ValueError(f"{event_type} has no variant {name!r}; its variants: {known}")
    return found[name]


def _digest(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value.lower()}".encode()).hexdigest()[:14]
