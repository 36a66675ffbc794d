"""A renewal or invoice payment was declined: how much, and where to fix the card."""

from __future__ import annotations

from datetime import date
from typing import Any

from catalogue.rules import EmailProduct
from core.brand import Brand
from core.events import Event
from core.stripe_objects import invoice_link
from emails.kind import Kind, amount
from emails.props import Day, EmailProps, Link, Text
from emails.subjects import fits


class PaymentFailedProps(EmailProps):
    """A renewal or invoice payment was declined."""

    amount: Text
    product_name: Text | None = None
    failure_reason: Text | None = None
    next_attempt_date: Day | None = None
    update_payment_url: Link | None = None
    invoice_url: Link | None = None


def subject(p: PaymentFailedProps, _: Brand) -> str:
    subject = f"Action needed: your {p.amount} payment failed"
    return subject if fits(subject) else "Action needed: your payment failed"


def _failed(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any]:
    invoice = event.object
    return {
        "amount": amount(invoice.get("amount_due"), invoice.get("currency")),
        "product_name": product.name if product else None,
        "next_attempt_date": invoice.get("next_payment_attempt"),
        "invoice_url": invoice_link(invoice),
    }


KIND = Kind(
    name="payment-failed",
    props=PaymentFailedProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "amount": "€19.99",
        "product_name": "Team plan (monthly)",
        "failure_reason": "Your card was declined.",
        "next_attempt_date": date(2026, 11, 24),
        "invoice_url": "https://invoice.stripe.com/i/acct_1Acme/test_inv_5120",
    },
    triggers={"invoice.payment_failed": _failed},
)
