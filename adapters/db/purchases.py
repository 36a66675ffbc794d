"""Purchases in Postgres."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.db.pool import Database


@dataclass(frozen=True)
class RepositoryPurchase:
    id: str
    product_id: str
    product_name: str
    repository: str


def repository_purchases(db: Database, user_id: str) -> list[RepositoryPurchase]:
    """The paid, unrefunded purchases of `github` products of the user's own account, oldest
    first. A team's purchases are the team's (its seated members get their access through
    `team_github_grants`), whoever bought them."""
    rows = db.fetch_all(
        "select pu.id::text, pr.id::text as product_id, pr.name as product_name,"
        " pr.github_repo as repository"
        " from public.purchases pu join public.products pr on pr.id = pu.product_id"
        " join public.accounts a on a.id = pu.account_id and a.kind = 'personal'"
        " where a.owner_id = %s::uuid and pu.paid and pu.refunded_at is null"
        " and pr.type = 'github' and pr.github_repo is not null"
        " order by pu.created_at",
        (user_id,),
    )
    return [RepositoryPurchase(**row) for row in rows]


def buyer_of(db: Database, session_id: str) -> str | None:
    """Who bought in this checkout session, once its purchase is recorded."""
    rows = db.fetch_all(
        "select user_id::text as user_id from public.purchases"
        " where stripe_checkout_session_id = %s",
        (session_id,),
    )
    return str(rows[0]["user_id"]) if rows and rows[0]["user_id"] else None
