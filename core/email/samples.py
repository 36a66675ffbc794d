"""Realistic props of every e-mail kind, for previews and the sample-mail route (each kind's
entry in `core.email.kinds` takes its sample from here)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

_SHOP = "https://acme.example.com"
SAMPLES: dict[str, dict[str, Any]] = {
    "purchase-confirmation": {
        "customer_name": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "order_number": "ORD-2026-004817",
        "product_name": "Starter Kit Pro",
        "amount": "$149.00",
        "product_type": "link",
        "billing": "one_time",
        "purchase_date": date(2026, 11, 21),
        "download_links": [
            {"label": "Starter Kit Pro v2.4 (zip, 18 MB)", "url": f"{_SHOP}/downloads/starter-kit"},
            {"label": "Design assets (Figma)", "url": f"{_SHOP}/downloads/design-assets"},
        ],
        "repository": None,
        "invoice_url": "https://invoice.stripe.com/i/acct_1Acme/test_inv_4817",
        "products_url": f"{_SHOP}/dashboard/products",
        "dashboard_url": f"{_SHOP}/dashboard",
    },
    "payment-failed": {
        "customer_name": "Ada Lovelace",
        "amount": "€19.99",
        "product_name": "Team plan (monthly)",
        "failure_reason": "Your card was declined.",
        "next_attempt_date": date(2026, 11, 24),
        "update_payment_url": f"{_SHOP}/dashboard/billing",
        "invoice_url": "https://invoice.stripe.com/i/acct_1Acme/test_inv_5120",
    },
    "invoice-paid": {
        "customer_name": "Ada Lovelace",
        "amount": "$29.00",
        "invoice_number": "ACME-0042-0007",
        "product_name": "Team plan",
        "paid_date": date(2026, 11, 21),
        "period_start": date(2026, 11, 21),
        "period_end": date(2026, 12, 20),
        "next_billing_date": date(2026, 12, 21),
        "receipt_url": "https://pay.stripe.com/receipts/acct_1Acme/test_rcpt_0007",
        "dashboard_url": f"{_SHOP}/dashboard",
    },
    "new-signup": {
        "customer_name": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "temporary_password": "mauve-Otter-42-lantern",
        "dashboard_url": f"{_SHOP}/dashboard",
        "signin_url": f"{_SHOP}/signin",
        "docs_url": f"{_SHOP}/docs/getting-started",
    },
    "github-access-granted": {
        "customer_name": "Ada Lovelace",
        "repository": "acme-labs/saas-starter",
        "product_name": "SaaS Starter Source",
        "github_username": "adalovelace",
        "docs_links": [
            {"label": "Quick start", "url": f"{_SHOP}/docs/quick-start"},
            {"label": "Deploying to Cloud Run", "url": f"{_SHOP}/docs/deploy"},
        ],
    },
    "checkout-expired": {
        "customer_name": "Ada Lovelace",
        "product_name": "Starter Kit Pro",
        "checkout_url": "https://buy.stripe.com/r/live_YWNjdF8xQWNtZQ",
        "recovers_cart": True,
        "link_expires": date(2026, 12, 21),
        "product_description": "Production-ready SaaS boilerplate with auth, billing and e-mail.",
        "amount": "$149.00",
        "billing": "one_time",
    },
    "subscription-cancelled": {
        "customer_name": "Ada Lovelace",
        "product_name": "Team plan",
        "access_end_date": date(2026, 12, 20),
        "access_ended": False,
        "unpaid": False,
        "trial_ended": False,
        "access_remains": False,
        "reactivate_url": f"{_SHOP}/dashboard/billing",
        "feedback_url": f"{_SHOP}/feedback?topic=cancellation",
    },
    "signin-link": {
        "customer_name": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "signin_url": "https://abcdefgh.supabase.co/auth/v1/verify?token=pkce_4817&type=magiclink"
        f"&redirect_to={_SHOP}/dashboard",
        "link_expires_at": datetime(2026, 11, 21, 15, 30, tzinfo=UTC),
        "product_name": "Starter Kit Pro",
        "dashboard_url": f"{_SHOP}/dashboard",
    },
    "trial-ending": {
        "customer_name": "Ada Lovelace",
        "trial_end_date": date(2026, 12, 8),
        "product_name": "Team plan",
        "amount": "$29.00",
        "billing": "month",
        "discounted": False,
        "plus_tax": False,
        "has_payment_method": True,
        "without_card": "cancel",
        "manage_url": f"{_SHOP}/dashboard/billing",
    },
}
