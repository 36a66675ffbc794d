"""Purchases in Postgres."""

from __future__ import annotations

from dataclasses import dataclass

from access import entitlements_store as entitlements
from access.entitlements import GrantKind
from access.entitlements_store import Held
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


@dataclass(frozen=True)
class SessionGrant:
    """The grant one checkout session made, as its success page may be told it: its own
    product and features, and nothing else of the account it landed on."""

    kind: GrantKind
    price_id: str | None
    active: bool
    product_name: str | None  # None: a price no product row is sold at
    features: list[str]  # sorted: what the product sold at its price grants
    # What its words say (access/grant_words.py): the grant as stored, its product's price.
    held: Held | None = None


def of_session(db: Database, session_id: str, source_id: str) -> SessionGrant | None:
    """The grant `source_id` (a checkout's subscription, or its one-time purchase) held by the
    account that paid in this checkout session, once its purchase is recorded; None before."""
    rows = db.fetch_all(
        "select e.kind, e.price_id, e.active, p.name as product_name,"
        " pu.account_id::text as account_id,"
        ' array(select distinct f collate "C" from unnest(public.product_features(p)) as f'
        ' order by f collate "C") as features'
        " from public.purchases pu"
        " join public.entitlements e on e.account_id = pu.account_id and e.source_id = %s"
        " left join public.products p on p.stripe_price_id = e.price_id"
        " where pu.stripe_checkout_session_id = %s",
        (source_id, session_id),
    )
    if not rows:
        return None
    row = rows[0]
    held = next(
        (
            h
            for h in entitlements.of_account(db, row["account_id"])
            if h.entitlement.source_id == source_id
        ),
        None,
    )
    return SessionGrant(
        kind=row["kind"],
        price_id=row["price_id"],
        active=row["active"],
        product_name=row["product_name"],
        features=list(row["features"]),
        held=held,
    )
