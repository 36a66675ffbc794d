"""Profiles in Postgres, as the service role (row-level security does not apply)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.db.pool import Connection, Database, Statement

COLUMNS = (
    "id, email, name, customer_id, price_id, has_access, is_admin, access_changed_at,"
    " price_changed_at"
)


@dataclass(frozen=True)
class Profile:
    id: str
    email: str | None
    name: str | None
    customer_id: str | None
    price_id: str | None
    has_access: bool
    is_admin: bool
    access_changed_at: datetime | None
    price_changed_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Profile:
        return cls(**{**row, "id": str(row["id"])})


def by_id(db: Database, user_id: str) -> Profile | None:
    """A profile by user id."""
    return _read(db, "id = %s::uuid", user_id)


def by_email(db: Database, email: str) -> Profile | None:
    """The oldest profile with this e-mail, ignoring case."""
    return _read(db, "lower(email) = lower(%s)", email)


def by_customer(db: Database, customer_id: str) -> Profile | None:
    """The profile linked to a Stripe customer."""
    return _read(db, "customer_id = %s", customer_id)


def by_customers_statement(customer_ids: Sequence[str]) -> Statement:
    """The oldest profile linked to each of these Stripe customers, as a statement to read
    with others in one round trip (`Profile.from_row` makes each row a profile)."""
    return Statement(
        f"select distinct on (customer_id) {COLUMNS} from public.profiles"  # noqa: S608
        " where customer_id = any(%s) order by customer_id, created_at",
        (list(customer_ids),),
    )


def first(rows: Sequence[dict[str, Any]]) -> Profile | None:
    """The profile in a read's rows, if any."""
    return Profile.from_row(rows[0]) if rows else None


def lock_by_id(conn: Connection, user_id: str) -> Profile | None:
    """A profile by user id, locked until the transaction ends."""
    return _one(conn, "id = %s::uuid", user_id)


def lock_by_customer(conn: Connection, customer_id: str) -> Profile | None:
    """The profile linked to a Stripe customer, locked until the transaction ends."""
    return _one(conn, "customer_id = %s", customer_id)


def lock_by_email(conn: Connection, email: str) -> Profile | None:
    """The oldest profile with this e-mail (ignoring case), locked."""
    return _one(conn, "lower(email) = lower(%s)", email)


def _oldest(where: str) -> str:
    return f"select {COLUMNS} from public.profiles where {where} order by created_at limit 1"  # noqa: S608


def _read(db: Database, where: str, value: str) -> Profile | None:
    """The oldest profile matching, in one round trip, unlocked."""
    return first(db.fetch_all(_oldest(where), (value,)))


def _one(conn: Connection, where: str, value: str) -> Profile | None:
    """The oldest profile matching, locked until the transaction ends."""
    row = conn.execute(_oldest(where) + " for update", (value,)).fetchone()
    return Profile.from_row(row) if row else None


def link_customer(conn: Connection, user_id: str, *, customer_id: str | None) -> None:
    """Record the Stripe customer a profile bought with (kept when not given)."""
    conn.execute(
        "update public.profiles set customer_id = coalesce(%s, customer_id) where id = %s::uuid",
        (customer_id, user_id),
    )


# Writes the access and plan of profiles by id, from unnest'ed columns (`state_columns`).
SAVE_STATES = (
    "update public.profiles p set has_access = v.has_access,"
    " access_changed_at = v.access_changed_at,"
    " access_event_id = coalesce(v.access_event_id, p.access_event_id),"
    " price_id = v.price_id, price_changed_at = v.price_changed_at"
    " from unnest(%s::uuid[], %s::bool[], %s::timestamptz[], %s::text[], %s::text[],"
    " %s::timestamptz[]) as v(id, has_access, access_changed_at, access_event_id, price_id,"
    " price_changed_at) where p.id = v.id"
)


def state_columns(states: Mapping[str, tuple[Profile, str | None]]) -> tuple[list[Any], ...]:
    """The parameters of SAVE_STATES, a list per column."""
    columns: tuple[list[Any], ...] = ([], [], [], [], [], [])
    for profile, event_id in states.values():
        values = (
            profile.id,
            profile.has_access,
            profile.access_changed_at,
            event_id,
            profile.price_id,
            profile.price_changed_at,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return columns


def save_states(conn: Connection, states: Mapping[str, tuple[Profile, str | None]]) -> None:
    """Write the access and plan of locked profiles, by id, with one statement.

    Each comes with the id of the event that last set its access (kept when None), for operators.
    """
    if len(states) < 2:
        for profile, event_id in states.values():
            _save_state(conn, profile, event_id)
        return
    conn.execute(SAVE_STATES, state_columns(states))


def _save_state(conn: Connection, profile: Profile, event_id: str | None) -> None:
    conn.execute(
        "update public.profiles set has_access = %s, access_changed_at = %s,"
        " access_event_id = coalesce(%s, access_event_id), price_id = %s, price_changed_at = %s"
        " where id = %s::uuid",
        (
            profile.has_access,
            profile.access_changed_at,
            event_id,
            profile.price_id,
            profile.price_changed_at,
            profile.id,
        ),
    )
