"""Automatic top-up in Postgres (`public.credit_top_ups`, supabase/schemas/credits.sql): the
holders' settings, the charge's claim read and settled under its row's lock, and the pack's
credits granted once per payment intent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from adapters.db.pool import Connection, Database
from credits.rules import CreditGrant
from credits.store import GRANT, grant_columns
from topups.rules import Claim


@dataclass(frozen=True)
class Pack:
    """A price as the catalogue holds it, for choosing it as a top-up."""

    price_id: str
    name: str
    active: bool
    one_time: bool
    top_up: bool
    credits: dict[str, int]
    credits_period: str | None
    price: Decimal
    currency: str | None


PACK = (
    "select stripe_price_id, name, is_active, billing_type, top_up, credits, credits_period,"
    " price, currency from public.products where stripe_price_id = %s"
)


def pack(db: Database, price_id: str) -> Pack | None:
    rows = db.fetch_all(PACK, (price_id,))
    return _pack(rows[0]) if rows else None


def pack_in(conn: Connection, price_id: str) -> Pack | None:
    """The pack, read in the transaction that holds a claim (no second connection)."""
    row = conn.execute(PACK, (price_id,)).fetchone()
    return _pack(row) if row else None


def _pack(r: dict[str, Any]) -> Pack:
    return Pack(
        price_id=r["stripe_price_id"],
        name=r["name"],
        active=r["is_active"],
        one_time=r["billing_type"] == "one_time",
        top_up=r["top_up"],
        credits={str(k): int(v) for k, v in (r["credits"] or {}).items()},
        credits_period=r["credits_period"],
        price=Decimal(r["price"]),
        currency=r["currency"],
    )


def personal_account(db: Database, user_id: str) -> str | None:
    rows = db.fetch_all(
        "select id from public.accounts where owner_id = %s::uuid and kind = 'personal'",
        (user_id,),
    )
    return str(rows[0]["id"]) if rows else None


def customer_of(db: Database, account_id: str) -> str | None:
    """The Stripe customer an account pays as (a top-up is charged on it)."""
    rows = db.fetch_all(
        "select customer_id from public.accounts where id = %s::uuid", (account_id,)
    )
    return rows[0]["customer_id"] if rows else None


def turn_on(db: Database, account_id: str, feature: str, price_id: str, below: int) -> None:
    """Top-up on (or changed) for the account's feature; a claim in flight stays as it is."""
    db.fetch_all(
        "insert into public.credit_top_ups (account_id, feature, price_id, below)"
        " values (%s::uuid, %s, %s, %s)"
        " on conflict (account_id, feature) do update set price_id = excluded.price_id,"
        " below = excluded.below, enabled = true, updated_at = now() returning account_id",
        (account_id, feature, price_id, below),
    )


def turn_off(db: Database, account_id: str, feature: str) -> None:
    """Top-up off for the account's feature. A charge in progress holds the row's lock until it
    is recorded, so this waits for it; a claim not charged yet is charged never (its charge
    reads the setting under that lock first)."""
    db.fetch_all(
        "update public.credit_top_ups set enabled = false, updated_at = now()"
        " where account_id = %s::uuid and feature = %s returning account_id",
        (account_id, feature),
    )


def of_user(db: Database, user_id: str) -> dict[tuple[str | None, str], dict[str, Any]]:
    """The top-ups turned on in the accounts the person has credits through, by (team id, None
    for their own; feature)."""
    rows = db.fetch_all(
        "select case when a.kind = 'team' then a.id::text end as team_id, t.feature, t.price_id,"
        " t.below from public.credit_top_ups t join public.accounts a on a.id = t.account_id"
        " where t.enabled and ((a.kind = 'personal' and a.owner_id = %(u)s::uuid)"
        " or (a.kind = 'team' and exists (select 1 from public.team_members m"
        " where m.team_id = a.id and m.user_id = %(u)s::uuid)))",
        {"u": user_id},
    )
    return {
        (r["team_id"], r["feature"]): {"priceId": r["price_id"], "below": r["below"]} for r in rows
    }


@dataclass(frozen=True)
class Held:
    """A claim's row as its charge reads it under the row's lock."""

    enabled: bool
    crossing: int
    claimed: bool
    payment_intent: str | None
    price_id: str
    customer_id: str | None
    # The balance is below the threshold now (the holder may have lowered it, or bought credits,
    # since the claim was made).
    below: bool


def held(conn: Connection, claim: Claim) -> Held | None:
    """The claim's row, locked until the transaction ends (a turn-off waits for the charge)."""
    row = conn.execute(
        "select t.enabled, t.crossings, t.claimed_at is not null as claimed, t.payment_intent,"
        " t.price_id, a.customer_id, (select b.balance from"
        " public.credit_balance(t.account_id, t.feature) b) < t.below as below"
        " from public.credit_top_ups t"
        " join public.accounts a on a.id = t.account_id"
        " where t.account_id = %s::uuid and t.feature = %s for update of t",
        (claim.account_id, claim.feature),
    ).fetchone()
    if row is None:
        return None
    return Held(
        enabled=row["enabled"],
        crossing=int(row["crossings"]),
        claimed=row["claimed"],
        payment_intent=row["payment_intent"],
        price_id=row["price_id"],
        customer_id=row["customer_id"],
        below=bool(row["below"]),
    )


def charged(conn: Connection, claim: Claim, intent_id: str) -> None:
    """The claim's charge made: it stays claimed until its pack is granted."""
    conn.execute(
        "update public.credit_top_ups set payment_intent = %s, updated_at = now()"
        " where account_id = %s::uuid and feature = %s and crossings = %s",
        (intent_id, claim.account_id, claim.feature, claim.crossing),
    )


def failed(conn: Connection, claim: Claim, intent_id: str | None) -> bool:
    """The claim's charge failed: top-up off for the feature and the claim released. True also
    when this intent's failure was recorded before (its payer is told again, once by the
    mail's id); False when the claim was settled otherwise (a newer claim, or its grant)."""
    row = conn.execute(
        "update public.credit_top_ups set enabled = false, claimed_at = null,"
        " payment_intent = coalesce(%s, payment_intent), updated_at = now()"
        " where account_id = %s::uuid and feature = %s and crossings = %s"
        " and (claimed_at is not null or (not enabled and payment_intent = %s))"
        " returning account_id",
        (intent_id, claim.account_id, claim.feature, claim.crossing, intent_id),
    ).fetchone()
    return row is not None


def release(conn: Connection, claim: Claim) -> None:
    """The claim let go without a charge (top-up turned off before it was charged)."""
    conn.execute(
        "update public.credit_top_ups set claimed_at = null, updated_at = now()"
        " where account_id = %s::uuid and feature = %s and crossings = %s",
        (claim.account_id, claim.feature, claim.crossing),
    )


def grant(
    db: Database, claim: Claim, *, price_id: str, intent_id: str, at: datetime, event_id: str
) -> int:
    """The pack's credits granted to the claim's account (once per payment intent: its id is the
    grant's source) and the claim released, in one transaction; how many grants were written."""
    given = CreditGrant(
        account_id=claim.account_id,
        source=intent_id,
        subscription_id=None,
        price_id=price_id,
        starts_at=at,
        ends_at=None,
        event_id=event_id,
    )
    with db.transaction() as conn:
        written = conn.execute(GRANT, grant_columns([given])).rowcount
        conn.execute(
            "update public.credit_top_ups set claimed_at = null, updated_at = now()"
            " where account_id = %s::uuid and feature = %s and crossings = %s",
            (claim.account_id, claim.feature, claim.crossing),
        )
    return max(written, 0)
