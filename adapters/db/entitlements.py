"""Entitlements in Postgres: one row per subscription and per one-time purchase."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from adapters.db.pool import Connection, Database
from core.entitlements import Entitlement

COLUMNS = (
    "user_id, source_id, kind, price_id, status, active, current_period_end,"
    " cancel_at_period_end, trial_end, ended_at, changed_at, event_id"
)
_FIELDS = [name.strip() for name in COLUMNS.split(",")]
_TYPES = (
    "uuid", "text", "text", "text", "text", "bool", "timestamptz",
    "bool", "timestamptz", "timestamptz", "timestamptz", "text",
)  # fmt: skip


def _from_row(row: dict[str, Any]) -> Entitlement:
    return Entitlement(**{**{k: row[k] for k in _FIELDS}, "user_id": str(row["user_id"])})


def lock_for_users(conn: Connection, user_ids: Collection[str]) -> dict[str, list[Entitlement]]:
    """Every entitlement of these users, by user, locked until the transaction ends (the
    profiles are locked first, so two writers never wait on each other in two orders)."""
    if not user_ids:
        return {}
    rows = conn.execute(
        f"select {COLUMNS} from public.entitlements"  # noqa: S608 - constant columns
        " where user_id = any(%s::uuid[]) order by source_id for update",
        (list(user_ids),),
    ).fetchall()
    found: dict[str, list[Entitlement]] = {user: [] for user in user_ids}
    for row in rows:
        found[str(row["user_id"])].append(_from_row(row))
    return found


def save(conn: Connection, entitlements: Iterable[Entitlement], *, adopted: dict[str, str]) -> None:
    """Write these entitlements with one statement, by source; `adopted` maps a carried-over
    row's old source id to the subscription id that now owns it."""
    rows = list(entitlements)
    if adopted:
        conn.execute(
            "update public.entitlements e set source_id = v.new from unnest(%s::text[],"
            " %s::text[]) as v(old, new) where e.source_id = v.old",
            (list(adopted), list(adopted.values())),
        )
    if not rows:
        return
    columns = [[getattr(e, name) for e in rows] for name in _FIELDS]
    casts = ", ".join(f"%s::{kind}[]" for kind in _TYPES)
    updates = ", ".join(f"{name} = excluded.{name}" for name in _FIELDS[2:])
    conn.execute(
        f"insert into public.entitlements ({COLUMNS})"  # noqa: S608 - constant columns
        f" select * from unnest({casts})"
        f" on conflict (source_id) do update set {updates}",
        columns,
    )


@dataclass(frozen=True)
class Held:
    """An entitlement as the user's frontend reads it, with its product when one is sold at
    its price."""

    entitlement: Entitlement
    product_id: str | None
    product_name: str | None
    product_type: str | None


def of_user(db: Database, user_id: str) -> list[Held]:
    """The user's entitlements, newest change first, with their products."""
    rows = db.fetch_all(
        "select e.user_id, e.source_id, e.kind, e.price_id, e.status, e.active,"
        " e.current_period_end, e.cancel_at_period_end, e.trial_end, e.ended_at, e.changed_at,"
        " e.event_id, p.id::text as product_id, p.name as product_name, p.type as product_type"
        " from public.entitlements e left join public.products p on p.stripe_price_id = e.price_id"
        " where e.user_id = %s::uuid order by e.active desc, e.changed_at desc nulls last",
        (user_id,),
    )
    return [
        Held(_from_row(row), row["product_id"], row["product_name"], row["product_type"])
        for row in rows
    ]
