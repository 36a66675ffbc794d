"""An abandoned checkout expired: a reminder, to those who agreed to promotional mail."""

from __future__ import annotations

from datetime import date
from typing import Any

from catalogue.rules import EmailProduct
from core.brand import Brand
from core.events import Event
from emails.kind import Kind, amount, get
from emails.props import Billing, Day, EmailProps, Link, Text
from emails.subjects import fit


class CheckoutExpiredProps(EmailProps):
    """An abandoned checkout session expired."""

    product_name: Text
    checkout_url: Link
    # True: the link is Stripe's recovery link, which reopens the same cart (until
    # `link_expires`); False: it is the pricing page, where a new checkout starts.
    recovers_cart: bool = False
    link_expires: Day | None = None
    product_description: Text | None = None
    amount: Text | None = None
    billing: Billing | None = None


def subject(p: CheckoutExpiredProps, _: Brand) -> str:
    return fit("Still thinking about ", p.product_name, "?")


def _expired(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any] | None:
    """A reminder, which is promotional mail: where Checkout asked for consent, only to those
    who gave it (Stripe's abandoned-cart guide); never to whoever declined."""
    session = event.object
    consent = get(session, "consent", "promotions")
    asked = get(session, "consent_collection", "promotions") == "auto"
    if consent == "opt_out" or (asked and consent != "opt_in"):
        return None
    # Stripe's recovery link reopens the same cart when enabled; else the pricing page.
    recovery = get(session, "after_expiration", "recovery", "url")
    return {
        "product_name": product.name if product else "your order",
        "checkout_url": recovery or site.rstrip("/") + "/#pricing",
        "recovers_cart": bool(recovery),
        "link_expires": get(session, "after_expiration", "recovery", "expires_at")
        if recovery
        else None,
        "amount": amount(session.get("amount_total"), session.get("currency")),
        "billing": product.billing if product else None,
    }


KIND = Kind(
    name="checkout-expired",
    props=CheckoutExpiredProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "product_name": "Starter Kit Pro",
        "checkout_url": "https://buy.stripe.com/r/live_YWNjdF8xQWNtZQ",
        "recovers_cart": True,
        "link_expires": date(2026, 12, 21),
        "product_description": "Production-ready SaaS boilerplate with auth, billing and e-mail.",
        "amount": "$149.00",
        "billing": "one_time",
    },
    triggers={"checkout.session.expired": _expired},
)
