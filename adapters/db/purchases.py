"""Purchases in Postgres."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.db.pool import Connection, Database
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


@dataclass(frozen=True)
class RepositoryPurchase:
    id: str
    product_id: str
    product_name: str
    repository: str
    github_username: str | None


def repository_purchases(db: Database, user_id: str) -> list[RepositoryPurchase]:
    """The user's purchases of `github` products, oldest first."""
    rows = db.fetch_all(
        "select pu.id::text, pr.id::text as product_id, pr.name as product_name,"
        " pr.github_repo as repository, pu.github_username"
        " from public.purchases pu join public.products pr on pr.id = pu.product_id"
        " where pu.user_id = %s and pr.type = 'github' and pr.github_repo is not null"
        " order by pu.created_at",
        (user_id,),
    )
    return [RepositoryPurchase(**row) for row in rows]


def mark_delivered(db: Database, purchase_id: str, username: str) -> None:
    """Remember which GitHub account a purchase was delivered to."""
    with db.transaction() as conn:
        conn.execute(
            "update public.purchases set github_username = %s, github_invited_at = now()"
            " where id = %s",
            (username, purchase_id),
        )
