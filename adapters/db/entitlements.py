"""Entitlements in Postgres: one row per subscription and per one-time purchase."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
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


_CASTS = ", ".join(f"%s::{kind}[]" for kind in _TYPES)
# Inserts or updates entitlements by source id, from `columns`.
UPSERT = (
    f"insert into public.entitlements ({COLUMNS}) select * from unnest({_CASTS})"  # noqa: S608
    " on conflict (source_id) do update set "
    + ", ".join(f"{name} = excluded.{name}" for name in _FIELDS[2:])
    # A subscription is one customer's: a grant of another user's is never written over.
    + " where public.entitlements.user_id = excluded.user_id"
)
# Moves carried-over rows to the subscription that adopted them, with its state: (old source
# ids, then `columns` of the new state).
ADOPT = (
    f"update public.entitlements e set {', '.join(f'{n} = v.{n}' for n in _FIELDS[1:])}"  # noqa: S608
    f" from unnest(%s::text[], {_CASTS}) as v(old, {COLUMNS}) where e.source_id = v.old"
)


def columns(entitlements: Iterable[Entitlement]) -> list[list[Any]]:
    """The parameters of UPSERT: a list per column."""
    rows = list(entitlements)
    return [[getattr(e, name) for e in rows] for name in _FIELDS]


def writes(
    entitlements: Iterable[Entitlement], *, adopted: Mapping[str, str]
) -> list[tuple[str, list[Any]]]:
    """The statements (SQL, parameters) that write these entitlements, by source; `adopted`
    maps a carried-over row's old source id to the subscription id that now owns it (that row
    is moved and written; the others are upserted). They touch disjoint rows."""
    rows = list(entitlements)
    moved = {new: old for old, new in adopted.items()}
    adopting = [e for e in rows if e.source_id in moved]
    rest = [e for e in rows if e.source_id not in moved]
    found: list[tuple[str, list[Any]]] = []
    if adopting:
        found.append((ADOPT, [[moved[e.source_id] for e in adopting], *columns(adopting)]))
    if rest:
        found.append((UPSERT, columns(rest)))
    return found


def save(
    conn: Connection, entitlements: Iterable[Entitlement], *, adopted: Mapping[str, str]
) -> None:
    """Write these entitlements (see `writes`)."""
    for query, params in writes(entitlements, adopted=adopted):
        conn.execute(query, params)


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
