"""Which e-mail an event calls for, and its props, from plain facts; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.access import (
    ACCESS_GRANTED,
    ACCESS_REVOKED,
    ACCOUNT_INVITED,
    TRIAL_ENDING,
    checkout_from,
    subscription_price,
)
from core.email.render import format_amount
from core.events import Event, is_app_event, stripe_id
from core.stripe_objects import (
    customer_contact,
    invoice_link,
    invoice_period,
    invoice_price,
    subscription_period_end,
)

ACCOUNT_CREATED = "app.account.created"
GITHUB_ACCESS_GRANTED = "app.github_access.granted"
# The sign-in link is made when the e-mail is sent (it expires soon), never carried on the bus.
SIGNIN_LINK = "signin-link"


@dataclass(frozen=True)
class ProductFacts:
    name: str
    type: str
    billing: str  # one_time, month or year
    download_url: str | None
    github_repo: str | None


@dataclass(frozen=True)
class Recipient:
    email: str
    name: str | None = None


@dataclass(frozen=True)
class PlannedEmail:
    kind: str
    to: str
    props: dict[str, Any]


def price_of(event: Event) -> str | None:
    """The Stripe price an event is about, to look the product up."""
    obj = event.object
    if (checkout := checkout_from(event)) is not None:
        return checkout.price_id
    if is_app_event(event.type):
        found = obj.get("price_id")
    elif event.type == "checkout.session.expired":
        found = _get(obj, "metadata", "price_id")
    elif event.type.startswith("invoice."):
        found = invoice_price(obj)
    elif event.type.startswith("customer.subscription."):
        found = subscription_price(obj)
    else:
        found = None
    return found if isinstance(found, str) else None


def customer_of(event: Event) -> str | None:
    """The Stripe customer id, for events that name no e-mail address."""
    return stripe_id(event.object.get("customer"))


def recipient_in(event: Event) -> Recipient | None:
    """The address the event itself carries, if any."""
    email, name = customer_contact(event.object)
    return Recipient(email=email, name=name) if email else None


def plan(
    event: Event, *, to: Recipient, product: ProductFacts | None, site_url: str
) -> PlannedEmail | None:
    """The e-mail for an event, or None when the event calls for none."""
    builder = _BUILDERS.get(event.type)
    if builder is None:
        return None
    props = builder(event, product, site_url)
    if props is None:
        return None
    kind, values = props
    return PlannedEmail(kind=kind, to=to.email, props={"customer_name": to.name, **values})


Props = tuple[str, dict[str, Any]] | None


def _purchase(event: Event, product: ProductFacts | None, site: str) -> Props:
    """Sent from `app.access.granted`: only once the access is committed."""
    grant = event.object
    values: dict[str, Any] = {
        "customer_email": grant.get("email"),
        "order_number": _order_number(str(grant["checkout_session"])),
        "product_name": product.name if product else "Your purchase",
        "amount": _amount(grant.get("amount_total"), grant.get("currency")),
        "purchase_date": grant.get("purchased_at"),
        "invoice_url": grant.get("receipt_url"),
    }
    if product:
        values |= {"product_type": product.type, "billing": product.billing}
        if product.type == "github" and product.github_repo:
            values["repository"] = product.github_repo
        if product.type == "link" and product.download_url:
            values["download_links"] = [{"label": product.name, "url": product.download_url}]
    return "purchase-confirmation", values


def _expired(event: Event, product: ProductFacts | None, site: str) -> Props:
    """A reminder, which is promotional mail: where Checkout asked for consent, only to those
    who gave it (Stripe's abandoned-cart guide); never to whoever declined."""
    session = event.object
    consent = _get(session, "consent", "promotions")
    asked = _get(session, "consent_collection", "promotions") == "auto"
    if consent == "opt_out" or (asked and consent != "opt_in"):
        return None
    # Stripe's recovery link reopens the same cart when enabled; else the pricing page.
    recovery = _get(session, "after_expiration", "recovery", "url")
    return "checkout-expired", {
        "product_name": product.name if product else "your order",
        "checkout_url": recovery or site.rstrip("/") + "/#pricing",
        "recovers_cart": bool(recovery),
        "link_expires": _get(session, "after_expiration", "recovery", "expires_at")
        if recovery
        else None,
        "amount": _amount(session.get("amount_total"), session.get("currency")),
        "billing": product.billing if product else None,
    }


def _invoice_paid(event: Event, product: ProductFacts | None, site: str) -> Props:
    invoice = event.object
    if invoice.get("billing_reason") == "subscription_create":
        return None  # the purchase confirmation already covers the first invoice
    start, end = invoice_period(invoice)
    return "invoice-paid", {
        "amount": _amount(invoice.get("amount_paid"), invoice.get("currency")),
        "invoice_number": invoice.get("number") or str(invoice.get("id")),
        "product_name": product.name if product else None,
        "paid_date": _get(invoice, "status_transitions", "paid_at") or invoice.get("created"),
        "period_start": start,
        "period_end": end,
        "receipt_url": invoice_link(invoice),
    }


def _payment_failed(event: Event, product: ProductFacts | None, site: str) -> Props:
    invoice = event.object
    return "payment-failed", {
        "amount": _amount(invoice.get("amount_due"), invoice.get("currency")),
        "product_name": product.name if product else None,
        "next_attempt_date": invoice.get("next_payment_attempt"),
        "invoice_url": invoice_link(invoice),
    }


def _cancellation_scheduled(event: Event, product: ProductFacts | None, site: str) -> Props:
    """`cancel_at_period_end` turned true: access stays until the period's end, and says so.

    Turning it back (the customer changed their mind) sends nothing: nothing was lost.
    """
    subscription = event.object
    turned_on = subscription.get("cancel_at_period_end") is True and (
        event.previous.get("cancel_at_period_end") is False
    )
    if not turned_on:
        return None
    end = subscription.get("cancel_at") or subscription_period_end(subscription)
    return "subscription-cancelled", {
        "product_name": product.name if product else None,
        "access_end_date": end,
    }


def _access_ended(event: Event, product: ProductFacts | None, site: str) -> Props:
    """Sent from `app.access.revoked` once the revocation of an ended subscription is committed."""
    revoked = event.object
    reason = revoked.get("reason")
    if reason not in ("subscription_ended", "payment_failed", "trial_ended"):
        return None
    return "subscription-cancelled", {
        "product_name": product.name if product else None,
        "access_end_date": revoked.get("ended_at"),
        "access_ended": True,
        # Stripe ended it (for want of payment, or a trial ran out): the customer chose
        # nothing, so nothing asks why.
        "unpaid": reason == "payment_failed",
        "trial_ended": reason == "trial_ended",
        "access_remains": revoked.get("access_remains") is True,
    }


def _trial_ending(event: Event, product: ProductFacts | None, site: str) -> Props:
    """Sent from `app.trial.ending`, three days before a trial the customer holds ends: the
    date, what it will cost, and what happens without a payment method, each as the
    subscription says (a trial that already ended says nothing)."""
    subscription = event.object.get("subscription")
    if not isinstance(subscription, Mapping):
        return None
    trial_end = subscription.get("trial_end")
    if subscription.get("status") != "trialing" or not isinstance(trial_end, int):
        return None
    behaviour = _get(subscription, "trial_settings", "end_behavior", "missing_payment_method")
    discounted = bool(subscription.get("discount") or subscription.get("discounts"))
    return "trial-ending", {
        "trial_end_date": trial_end,
        "product_name": product.name if product else None,
        "amount": None if discounted else _first_period_amount(subscription),
        "billing": _interval(subscription, product),
        "discounted": discounted,
        "plus_tax": _get(subscription, "automatic_tax", "enabled") is True,
        "has_payment_method": bool(
            subscription.get("default_payment_method") or subscription.get("default_source")
        ),
        "without_card": behaviour if behaviour in ("pause", "create_invoice") else "cancel",
    }


def _first_period_amount(subscription: Mapping[str, Any]) -> str | None:
    """The items' prices times their quantities, when every item says so in one currency."""
    items = _get(subscription, "items", "data")
    if not isinstance(items, list) or not items:
        return None
    total, currencies = 0, set()
    for item in items:
        price = _get(item, "price")
        unit, quantity = _get(price, "unit_amount"), _get(item, "quantity")
        if not isinstance(unit, int) or _get(price, "recurring", "usage_type") == "metered":
            return None
        total += unit * (quantity if isinstance(quantity, int) else 1)
        currencies.add(_get(price, "currency"))
    [currency] = currencies if len(currencies) == 1 else [None]
    return _amount(total, currency) if isinstance(currency, str) else None


def _interval(subscription: Mapping[str, Any], product: ProductFacts | None) -> str | None:
    """`month` or `year` when the plan bills once a month or a year (another period: the amount
    is said without one); the product's when the subscription's price does not say."""
    recurring = _get(_first(_get(subscription, "items", "data")), "price", "recurring")
    if not isinstance(recurring, Mapping):
        return product.billing if product and product.billing != "one_time" else None
    found, count = recurring.get("interval"), recurring.get("interval_count")
    return found if found in ("month", "year") and count in (None, 1) else None


def _signin(event: Event, product: ProductFacts | None, site: str) -> Props:
    return SIGNIN_LINK, {
        "customer_email": event.object.get("email"),
        "product_name": product.name if product else None,
    }


def _signup(event: Event, _: ProductFacts | None, site: str) -> Props:
    return "new-signup", {"customer_email": event.object.get("email")}


def _github(event: Event, _: ProductFacts | None, site: str) -> Props:
    grant = event.object
    return "github-access-granted", {
        "repository": grant["repository"],
        "product_name": grant.get("product_name"),
        "github_username": grant.get("github_username"),
    }


_BUILDERS = {
    "checkout.session.expired": _expired,
    "invoice.paid": _invoice_paid,
    "invoice.payment_failed": _payment_failed,
    "customer.subscription.updated": _cancellation_scheduled,
    TRIAL_ENDING: _trial_ending,
    ACCESS_GRANTED: _purchase,
    ACCESS_REVOKED: _access_ended,
    ACCOUNT_INVITED: _signin,
    ACCOUNT_CREATED: _signup,
    GITHUB_ACCESS_GRANTED: _github,
}


def _order_number(session_id: str) -> str:
    return "ORD-" + session_id.rsplit("_", 1)[-1][-10:].upper()


def _amount(minor: Any, currency: Any) -> str:
    if not isinstance(minor, int) or not isinstance(currency, str):
        return "—"
    return format_amount(minor, currency)


def _first(items: Any) -> Any:
    return items[0] if isinstance(items, list) and items else None


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def handled_types() -> frozenset[str]:
    """The event types an e-mail may be planned for (the push filter lets them through)."""
    return frozenset(_BUILDERS)
