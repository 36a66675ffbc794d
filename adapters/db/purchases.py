"""Purchases in Postgres."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from adapters.db.pool import Connection, Database
from core.access import Checkout


def record(
    conn: Connection, checkout: Checkout, *, user_id: str | None, product_id: str | None
) -> bool:
    """Record a completed checkout once, and its payment when it comes; True when it is new."""
    row = conn.execute(
        "insert into public.purchases (user_id, product_id, stripe_checkout_session_id,"
        " stripe_customer_id, customer_email, amount_total, currency, paid,"
        " stripe_payment_intent_id) values (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " on conflict (stripe_checkout_session_id) do update set paid = true,"
        " stripe_payment_intent_id = coalesce(public.purchases.stripe_payment_intent_id,"
        " excluded.stripe_payment_intent_id)"
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
            checkout.payment_intent,
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


@dataclass(frozen=True)
class PaidPurchase:
    """A purchase as a refund sees it: whose, of what, delivered where."""

    id: str
    session_id: str
    user_id: str | None
    one_time: bool
    repository: str | None
    github_username: str | None


def by_payment_intent(db: Database, payment_intent: str) -> PaidPurchase | None:
    """The purchase paid with this payment intent."""
    rows = db.fetch_all(
        "select pu.id::text, pu.stripe_checkout_session_id as session_id, pu.user_id::text,"
        " coalesce(pr.billing_type = 'one_time', true) as one_time,"
        " pr.github_repo as repository, gg.github_username"
        " from public.purchases pu left join public.products pr on pr.id = pu.product_id"
        " left join public.github_grants gg on gg.purchase_id = pu.id"
        " where pu.stripe_payment_intent_id = %s order by pu.created_at limit 1",
        (payment_intent,),
    )
    return PaidPurchase(**rows[0]) if rows else None


def record_refund(
    conn: Connection, purchase_id: str, *, amount_refunded: int, refunded_at: datetime | None
) -> None:
    """Keep the refunded total; `refunded_at` marks a purchase refunded in full."""
    conn.execute(
        "update public.purchases set amount_refunded = greatest(amount_refunded, %s),"
        " refunded_at = coalesce(refunded_at, %s) where id = %s",
        (amount_refunded, refunded_at, purchase_id),
    )
