"""Purchases in Postgres."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.db.pool import Connection, Database
from core.access import Checkout


def record(
    conn: Connection, checkout: Checkout, *, user_id: str | None, product_id: str | None
) -> bool:
    """Record a completed checkout once, and its payment when it comes; True when it is new."""
    row = conn.execute(
        "insert into public.purchases (user_id, product_id, stripe_checkout_session_id,"
        " stripe_customer_id, customer_email, amount_total, currency, paid)"
        " values (%s, %s, %s, %s, %s, %s, %s, %s)"
        " on conflict (stripe_checkout_session_id) do update set paid = true"
        " where excluded.paid and not public.purchases.paid"
        " returning (xmax = 0) as inserted",
        (
            user_id,
            product_id,
            checkout.session_id,
            checkout.customer_id,
            checkout.email,
            checkout.amount_total,
            checkout.currency,
            checkout.paid,
        ),
    ).fetchone()
    return bool(row and row["inserted"])


@dataclass(frozen=True)
class RepositoryPurchase:
    id: str
    product_id: str
    product_name: str
    repository: str


def repository_purchases(db: Database, user_id: str) -> list[RepositoryPurchase]:
    """The user's paid, unrefunded purchases of `github` products, oldest first."""
    rows = db.fetch_all(
        "select pu.id::text, pr.id::text as product_id, pr.name as product_name,"
        " pr.github_repo as repository"
        " from public.purchases pu join public.products pr on pr.id = pu.product_id"
        " where pu.user_id = %s and pu.paid and pu.refunded_at is null"
        " and pr.type = 'github' and pr.github_repo is not null"
        " order by pu.created_at",
        (user_id,),
    )
    return [RepositoryPurchase(**row) for row in rows]
