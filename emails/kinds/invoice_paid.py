"""A recurring payment succeeded: the receipt."""

from __future__ import annotations

from datetime import date
from typing import Any

from catalogue.rules import EmailProduct
from core.brand import Brand
from core.events import Event
from core.stripe_objects import charged_line, invoice_amounts, invoice_link, invoice_period
from emails.kind import Kind, amount, charged, get
from emails.props import ChargeProps, Day, Link, Text
from emails.subjects import SUBJECT_LIMIT, fit, fits


class InvoicePaidProps(ChargeProps):
    """A recurring payment succeeded."""

    amount: Text
    total: Text | None = None  # the invoice's total, when a credit balance paid part of it
    invoice_number: Text
    product_name: Text | None = None
    paid_date: Day | None = None
    period_start: Day | None = None
    period_end: Day | None = None
    next_billing_date: Day | None = None
    receipt_url: Link | None = None
    dashboard_url: Link | None = None


def subject(p: InvoicePaidProps, _: Brand) -> str:
    prefix = f"Receipt: {p.amount} for "
    # The product name needs room to say something; else the amount alone.
    if p.product_name is not None and len(prefix) <= SUBJECT_LIMIT - 15:
        return fit(prefix, p.product_name)
    subject = f"Receipt: {p.amount} paid"
    return subject if fits(subject) else fit("Receipt for invoice ", p.invoice_number)


def _paid(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any] | None:
    invoice = event.object
    if invoice.get("billing_reason") == "subscription_create":
        return None  # the purchase confirmation already covers the first invoice
    start, end = invoice_period(invoice)
    if invoice.get("billing_reason") == "subscription_update":
        # A plan change charged now: the new plan's rest of the period, renewed at its end.
        period = get(charged_line(invoice), "period") or {}
        start, end = period.get("start", start), period.get("end", end)
    amounts = invoice_amounts(invoice)
    paid = amount(invoice.get("amount_paid"), invoice.get("currency"))
    total = amount(amounts.total, amounts.currency) if amounts.total is not None else None
    return charged(amounts) | {
        "amount": paid,
        "total": total if total != paid else None,
        "invoice_number": invoice.get("number") or str(invoice.get("id")),
        "product_name": product.name if product else None,
        "paid_date": get(invoice, "status_transitions", "paid_at") or invoice.get("created"),
        "period_start": start,
        "period_end": end,
        "next_billing_date": end
        if invoice.get("billing_reason") == "subscription_update"
        else None,
        "receipt_url": invoice_link(invoice),
    }


KIND = Kind(
    name="invoice-paid",
    props=InvoicePaidProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        # A $5.00 coupon, 20% tax on top, $1.00 of credit: $29.00 paid.
        "amount": "$29.00",
        "subtotal": "$30.00",
        "discount": "-$5.00",
        "tax_label": "Tax",
        "tax": "$5.00",
        "total": "$30.00",
        "tax_id": "DE123456789 (EU VAT)",
        "invoice_number": "ACME-0042-0007",
        "product_name": "Team plan",
        "paid_date": date(2026, 11, 21),
        "period_start": date(2026, 11, 21),
        "period_end": date(2026, 12, 20),
        "next_billing_date": date(2026, 12, 21),
        "receipt_url": "https://pay.stripe.com/receipts/acct_1Acme/test_rcpt_0007",
    },
    triggers={"invoice.paid": _paid},
)
