"""What a buyer is told they paid is what Stripe says: a purchase confirmation repeats a checkout
session's subtotal, tax and total in the currency charged (the buyer's own under Adaptive
Pricing) and the tax id they gave, and says when Stripe sold as merchant of record; an
invoice-paid mail does the same from the invoice. Each is built as the service builds it: the
session's event read as a checkout, announced, and the mail built from the announcement."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import html5lib

from access.announcements import Recipient, access_granted
from access.checkouts import checkout_from
from catalogue.rules import EmailProduct
from core.events import Event, parse_event
from emails.kinds import kind_of
from emails.render import Brand, EmailContent, render
from tests.helpers import stripe_event

BRAND = Brand(product_name="Acme", site_url="https://acme.example.com", support_email="a@b.co")
KIT = EmailProduct("Starter Kit", "link", "one_time", "https://example.com/kit.zip", None)
PLAN = EmailProduct("Team Monthly", "link", "month", None, None)
VAT_ID = [{"type": "eu_vat", "value": "DE123456789"}]


def session(**overrides: Any) -> dict[str, Any]:
    """A paid session of 49.00 with 20% tax on top (its fields as Stripe names them)."""
    return {
        "id": "cs_test_0123456789abcdef",
        "object": "checkout.session",
        "created": 1_795_000_000,
        "mode": "payment",
        "payment_status": "paid",
        "currency": "usd",
        "amount_subtotal": 4900,
        "amount_total": 5880,
        "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 980},
        "customer_details": {"email": "ada@example.com", "name": "Ada", "tax_ids": VAT_ID},
        "managed_payments": {"enabled": False},
        "metadata": {"price_id": "price_kit"},
        **overrides,
    }


def confirmation(paid: dict[str, Any], product: EmailProduct = KIT) -> EmailContent:
    body = stripe_event("checkout.session.completed", paid, created=1_795_000_001)
    event = parse_event(json.loads(body))
    checkout = checkout_from(event)
    assert checkout is not None
    granted, _ = access_granted(
        event,
        checkout,
        to=Recipient("ada@example.com", "Ada"),
        price_id="price_kit",
        receipt_url=None,
    )
    props = kind_of("purchase-confirmation").triggers[granted.type](
        granted, product, BRAND.site_url
    )
    assert props is not None
    return render("purchase-confirmation", props, brand=BRAND)


def invoice_paid(invoice: dict[str, Any]) -> EmailContent:
    event = Event(
        id="evt_invoice_paid",
        type="invoice.paid",
        created=datetime(2026, 12, 1, tzinfo=UTC),
        livemode=False,
        object=invoice,
    )
    props = kind_of("invoice-paid").triggers["invoice.paid"](event, PLAN, BRAND.site_url)
    assert props is not None
    return render("invoice-paid", props, brand=BRAND)


def both(content: EmailContent) -> list[str]:
    """The text part, and the words a reader sees of the HTML part."""
    body = html5lib.parse(content.html).find(".//{http://www.w3.org/1999/xhtml}body")
    assert body is not None
    return [" ".join(content.text.split()), " ".join("".join(body.itertext()).split())]


def says(part: str, *texts: str) -> None:
    for text in texts:
        assert text in part


def test_a_confirmation_shows_the_sessions_subtotal_tax_total_and_tax_id() -> None:
    for part in both(confirmation(session())):
        says(part.replace(":", ""), "Subtotal $49.00", "Tax $9.80", "Total paid $58.80")
        assert "DE123456789 (EU VAT)" in part
        assert "merchant of record" not in part


def test_an_inclusive_tax_is_said_to_be_included_and_a_discount_shown() -> None:
    paid = session(
        amount_subtotal=5000,
        amount_total=4500,
        total_details={"amount_discount": 500, "amount_shipping": 0, "amount_tax": 750},
        currency="eur",
        customer_details={"email": "ada@example.com", "name": "Ada", "tax_ids": []},
    )
    for part in both(confirmation(paid)):
        says(part, "€50.00", "-€5.00", "€45.00")
        says(part, "Tax (included)", "€7.50")
        assert "Tax ID" not in part


def test_under_adaptive_pricing_the_buyers_currency_is_what_was_charged() -> None:
    paid = session(presentment_details={"presentment_amount": 5412, "presentment_currency": "eur"})
    for part in both(confirmation(paid)):
        says(part, "You paid", "€54.12")
        assert "$58.80" in part  # the session's own total, in its currency, above it


def test_a_merchant_of_record_sale_says_stripe_sold_it() -> None:
    for part in both(confirmation(session(managed_payments={"enabled": True}))):
        assert "Stripe sold this purchase as merchant of record for Acme" in part
        assert "Link" in part


def test_a_session_without_tax_shows_its_total_alone() -> None:
    paid = session(
        amount_total=4900,
        total_details={"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0},
        customer_details={"email": "ada@example.com", "name": "Ada", "tax_ids": []},
    )
    for part in both(confirmation(paid)):
        assert "$49.00" in part
        assert "Subtotal" not in part
        assert "Tax" not in part


def test_a_tax_id_that_carries_a_link_is_not_shown() -> None:
    links = [{"type": "eu_vat", "value": "https://evil.example"}]
    paid = session(customer_details={"email": "ada@example.com", "name": "Ada", "tax_ids": links})
    for part in both(confirmation(paid)):
        assert "evil" not in part
        assert "Tax ID" not in part


def invoice(**overrides: Any) -> dict[str, Any]:
    """A renewal of 19.00 with 19% tax on top, as the current API version gives it."""
    return {
        "id": "in_0123",
        "object": "invoice",
        "number": "ACME-0042-0007",
        "billing_reason": "subscription_cycle",
        "currency": "eur",
        "subtotal": 1900,
        "total": 2261,
        "amount_paid": 2261,
        "total_taxes": [
            {"amount": 361, "tax_behavior": "exclusive", "taxability_reason": "standard_rated"}
        ],
        "total_discount_amounts": [],
        "customer_tax_ids": VAT_ID,
        "created": 1_795_000_000,
        **overrides,
    }


def test_an_invoice_paid_mail_shows_the_invoices_subtotal_tax_and_total() -> None:
    for part in both(invoice_paid(invoice())):
        says(part, "€19.00", "€3.61", "€22.61")
        assert "DE123456789 (EU VAT)" in part
        assert "Amount paid" in part


def test_an_invoice_of_the_older_version_reads_its_tax_too() -> None:
    older = invoice(
        total_taxes=None, tax=361, total_tax_amounts=[{"amount": 361, "inclusive": False}]
    )
    for part in both(invoice_paid(older)):
        says(part, "€3.61", "€22.61")


def test_an_invoice_partly_paid_by_credit_says_its_total_and_what_was_paid() -> None:
    for part in both(invoice_paid(invoice(amount_paid=1261))):
        says(part, "€22.61", "€12.61")
