"""Purchases in Postgres."""

from __future__ import annotations

from adapters.postgres import Connection
from core.access import Checkout


def record(
    conn: Connection, checkout: Checkout, *, user_id: str | None, product_id: str | None
) -> bool:
    """Record a completed checkout once; True when it is new."""
    row = conn.execute(
        "insert into public.purchases (user_id, product_id, stripe_checkout_session_id,"
        " stripe_customer_id, customer_email, amount_total, currency)"
        " values (%s, %s, %s, %s, %s, %s, %s)"
        " on conflict (stripe_checkout_session_id) do nothing returning id",
        (
            user_id,
            product_id,
            checkout.session_id,
            checkout.customer_id,
            checkout.email,
            checkout.amount_total,
            checkout.currency,
        ),
    ).fetchone()
    return row is not None
