"""Which e-mail an event calls for, and its props, from plain facts; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.access import PAID_STATUSES, checkout_from
from core.email.render import format_amount
from core.events import Event, stripe_id

ACCOUNT_CREATED = "app.account.created"
GITHUB_ACCESS_GRANTED = "app.github_access.granted"


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
    if event.type == "checkout.session.expired":
        found = _get(obj, "metadata", "price_id")
    elif event.type.startswith("invoice."):
        found = _get(_first(_get(obj, "lines", "data")), "price", "id")
    elif event.type.startswith("customer.subscription."):
        found = _get(_first(_get(obj, "items", "data")), "price", "id")
    else:
        found = None
    return found if isinstance(found, str) else None


def customer_of(event: Event) -> str | None:
    """The Stripe customer id, for events that name no e-mail address."""
    return stripe_id(event.object.get("customer"))


def recipient_in(event: Event) -> Recipient | None:
    """The address the event itself carries, if any."""
    obj = event.object
    email = _get(obj, "customer_details", "email") or obj.get("customer_email") or obj.get("email")
    name = _get(obj, "customer_details", "name") or obj.get("customer_name") or obj.get("name")
    return Recipient(email=str(email), name=name) if email else None


def plan(
    event: Event, *, to: Recipient, product: ProductFacts | None, site_url: str
) -> PlannedEmail | None:
    """The e-mail for an event, or None when the event calls for none."""
    builder = _BUILDERS.get(event.type)
    if builder is None:
        return None
    props = builder(event.object, product, site_url)
    if props is None:
        return None
    kind, values = props
    return PlannedEmail(kind=kind, to=to.email, props={"customer_name": to.name, **values})


Props = tuple[str, dict[str, Any]] | None


def _purchase(session: Mapping[str, Any], product: ProductFacts | None, site: str) -> Props:
    if session.get("payment_status") not in PAID_STATUSES:
        return None  # a delayed payment: the confirmation waits for async_payment_succeeded
    values: dict[str, Any] = {
        "customer_email": _get(session, "customer_details", "email")
        or session.get("customer_email"),
        "order_number": _order_number(str(session["id"])),
        "product_name": product.name if product else "Your purchase",
        "amount": _amount(session.get("amount_total"), session.get("currency")),
        "purchase_date": session.get("created"),
    }
    if product:
        values |= {"product_type": product.type, "billing": product.billing}
        if product.type == "github" and product.github_repo:
            values["repository"] = product.github_repo
        if product.type == "link" and product.download_url:
            values["download_links"] = [{"label": product.name, "url": product.download_url}]
    return "purchase-confirmation", values


def _expired(session: Mapping[str, Any], product: ProductFacts | None, site: str) -> Props:
    # Stripe's recovery link reopens the same cart when enabled; else the pricing page.
    recovery = _get(session, "after_expiration", "recovery", "url")
    return "checkout-expired", {
        "product_name": product.name if product else "your order",
        "checkout_url": recovery or site.rstrip("/") + "/#pricing",
        "amount": _amount(session.get("amount_total"), session.get("currency")),
        "billing": product.billing if product else None,
    }


def _invoice_paid(invoice: Mapping[str, Any], product: ProductFacts | None, site: str) -> Props:
    if invoice.get("billing_reason") == "subscription_create":
        return None  # the purchase confirmation already covers the first invoice
    period = _get(_first(_get(invoice, "lines", "data")), "period") or {}
    return "invoice-paid", {
        "amount": _amount(invoice.get("amount_paid"), invoice.get("currency")),
        "invoice_number": invoice.get("number") or str(invoice.get("id")),
        "product_name": product.name if product else None,
        "paid_date": _get(invoice, "status_transitions", "paid_at") or invoice.get("created"),
        "period_start": period.get("start"),
        "period_end": period.get("end"),
        "receipt_url": invoice.get("hosted_invoice_url"),
    }


def _payment_failed(invoice: Mapping[str, Any], product: ProductFacts | None, site: str) -> Props:
    return "payment-failed", {
        "amount": _amount(invoice.get("amount_due"), invoice.get("currency")),
        "product_name": product.name if product else None,
        "next_attempt_date": invoice.get("next_payment_attempt"),
        "invoice_url": invoice.get("hosted_invoice_url"),
    }


def _cancelled(subscription: Mapping[str, Any], product: ProductFacts | None, site: str) -> Props:
    return "subscription-cancelled", {
        "product_name": product.name if product else None,
        "access_end_date": subscription.get("ended_at") or subscription.get("current_period_end"),
    }


def _signup(account: Mapping[str, Any], _: ProductFacts | None, site: str) -> Props:
    return "new-signup", {"customer_email": account.get("email")}


def _github(grant: Mapping[str, Any], _: ProductFacts | None, site: str) -> Props:
    return "github-access-granted", {
        "repository": grant["repository"],
        "product_name": grant.get("product_name"),
        "github_username": grant.get("github_username"),
    }


_BUILDERS = {
    "checkout.session.completed": _purchase,
    "checkout.session.async_payment_succeeded": _purchase,
    "checkout.session.expired": _expired,
    "invoice.paid": _invoice_paid,
    "invoice.payment_failed": _payment_failed,
    "customer.subscription.deleted": _cancelled,
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
