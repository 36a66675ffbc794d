"""Entitlements in Postgres: one row per subscription and per one-time purchase, held by the
account that pays for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from access.entitlements import Entitlement
from adapters.db.pool import Connection, Database

COLUMNS = (
    "account_id, source_id, kind, price_id, status, active, current_period_end,"
    " cancel_at_period_end, trial_end, ended_at, changed_at, event_id, customer_id,"
    " payment_method"
)
_FIELDS = [name.strip() for name in COLUMNS.split(",")]
_TYPES = (
    "uuid", "text", "text", "text", "text", "bool", "timestamptz",
    "bool", "timestamptz", "timestamptz", "timestamptz", "text", "text", "bool",
)  # fmt: skip
# Said by some events only (a subscription's, not an invoice's): an event that does not say
# them leaves what is stored.
_KEPT = ("customer_id", "payment_method")


def _from_row(row: dict[str, Any]) -> Entitlement:
    found: dict[str, Any] = {k: row.get(k) for k in _FIELDS}
    found["account_id"] = str(row["account_id"])
    return Entitlement(**found)


_CASTS = ", ".join(f"%s::{kind}[]" for kind in _TYPES)
# Inserts or updates entitlements by source id, from `columns`.
UPSERT = (
    f"insert into public.entitlements ({COLUMNS}) select * from unnest({_CASTS})"  # noqa: S608
    " on conflict (source_id) do update set "
    + ", ".join(
        f"{name} = coalesce(excluded.{name}, public.entitlements.{name})"
        if name in _KEPT
        else f"{name} = excluded.{name}"
        for name in _FIELDS[2:]
    )
    # A subscription is one customer's: a grant of another account's is never written over.
    + " where public.entitlements.account_id = excluded.account_id"
)


def columns(entitlements: Iterable[Entitlement]) -> list[list[Any]]:
    """The parameters of UPSERT: a list per column."""
    rows = list(entitlements)
    return [[getattr(e, name) for e in rows] for name in _FIELDS]


def save(conn: Connection, entitlements: Iterable[Entitlement]) -> None:
    """Write these entitlements, by source id."""
    conn.execute(UPSERT, columns(entitlements))


@dataclass(frozen=True)
class Held:
    """An entitlement as the user's frontend reads it, with its product when one is sold at
    its price, and the team whose account holds it (None: the user's own)."""

    entitlement: Entitlement
    product_id: str | None
    product_name: str | None
    product_type: str | None
    team_id: str | None = None
    # A `link` product's download (its catalogue metadata), which the purchase unlocks.
    download_url: str | None = None
    # What its words say of the price (access/grant_words.py): one period's or the purchase's
    # amount, its currency, whether it is a seat's, and the credits a pack adds once.
    price: Decimal | None = None
    currency: str | None = None
    billing_interval: str | None = None
    per_seat: bool = False
    pack_credits: dict[str, int] | None = None
    team_name: str | None = None
    feature_names: dict[str, str] | None = None  # key -> display name, from the catalogue
    # A plan change its subscription's schedule holds for the period's end, until it starts.
    scheduled_price_id: str | None = None
    scheduled_quantity: int | None = None
    scheduled_at: datetime | None = None


_HELD = (
    # A comp is active until its end (`current_period_end`), read against the clock.
    "select e.account_id, e.source_id, e.kind, e.price_id, e.status,"
    " e.active and (e.kind <> 'comp' or e.current_period_end is null"
    " or e.current_period_end > now()) as active,"
    " e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,"
    " e.event_id, p.id::text as product_id, p.name as product_name, p.type as product_type,"
    " p.download_url, p.price, p.currency, p.billing_interval, p.per_seat,"
    " case when p.credits_period = 'once' then p.credits end as pack_credits, p.feature_names,"
    " case when a.kind = 'team' then a.id::text end as team_id,"
    " (select t.name from public.teams t where a.kind = 'team' and t.id = a.id) as team_name,"
    " s.price_id as scheduled_price_id, s.quantity as scheduled_quantity,"
    " s.effective_at as scheduled_at"
    " from public.entitlements e join public.accounts a on a.id = e.account_id"
    " left join public.products p on p.stripe_price_id = e.price_id"
    # Until it takes effect: its time has not come, and the grant is not on it yet.
    " left join public.scheduled_changes s on s.source_id = e.source_id and e.active"
    " and s.effective_at > now() and not (s.price_id = e.price_id and s.quantity ="
    " coalesce((select t.quantity from public.teams t where t.id = a.id), 1))"
)
_NEWEST_FIRST = " order by e.active desc, e.changed_at desc nulls last"


def of_user(db: Database, user_id: str) -> list[Held]:
    """The grants the user has access through (those of their own account and of the teams
    where they hold a seat), newest change first, with their products."""
    where = (
        " where (a.kind = 'personal' and a.owner_id = %s::uuid)"
        " or a.id in (select m.team_id from public.team_members m"
        " where m.user_id = %s::uuid and m.has_seat)"
    )
    rows = db.fetch_all(_HELD + where + _NEWEST_FIRST, (user_id, user_id))
    return [_held(row) for row in rows]


def of_account(db: Database, account_id: str) -> list[Held]:
    """An account's grants (a team's, for its members), newest change first."""
    where = " where a.id = %s::uuid"
    rows = db.fetch_all(_HELD + where + _NEWEST_FIRST, (account_id,))
    return [_held(row) for row in rows]


def _held(row: dict[str, Any]) -> Held:
    return Held(
        _from_row(row),
        row["product_id"],
        row["product_name"],
        row["product_type"],
        row["team_id"],
        row["download_url"],
        row["price"],
        row["currency"],
        row["billing_interval"],
        bool(row["per_seat"]),
        row["pack_credits"],
        row["team_name"],
        row["feature_names"],
        row["scheduled_price_id"],
        row["scheduled_quantity"],
        row["scheduled_at"],
    )
