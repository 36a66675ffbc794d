"""A person's and a customer's features, as Postgres derives them (`public.features_of`)."""

from __future__ import annotations

from adapters.db.pool import Database


def of_user(db: Database, user_id: str) -> list[str]:
    """The sorted features of the accounts the user has access through."""
    rows = db.fetch_all("select public.features_of(%s::uuid) as features", (user_id,))
    return list(rows[0]["features"]) if rows else []


def of_customer_subscriptions(db: Database, customer_id: str) -> list[str] | None:
    """The sorted features of the active subscriptions of the account this customer belongs
    to; None when it belongs to none."""
    rows = db.fetch_all(
        "select public.grant_features(array[c.account_id], array['subscription']) as features"
        " from public.stripe_customers c where c.customer_id = %s",
        (customer_id,),
    )
    return list(rows[0]["features"]) if rows else None


def has_access(db: Database, user_id: str) -> bool:
    """Whether the person has access: their profile's (Stripe's grants) or a running comp."""
    rows = db.fetch_all("select public.access_of(%s::uuid) as has_access", (user_id,))
    return bool(rows and rows[0]["has_access"])
