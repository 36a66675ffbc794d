"""Profiles in Postgres, as the service role (row-level security does not apply)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.db.pool import Connection, Database

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
    with db.transaction() as conn:
        return _one(conn, "id = %s::uuid", user_id, lock=False)


def by_email(db: Database, email: str) -> Profile | None:
    """The oldest profile with this e-mail, ignoring case."""
    with db.transaction() as conn:
        return _one(conn, "lower(email) = lower(%s)", email, lock=False)


def by_customer(db: Database, customer_id: str) -> Profile | None:
    """The profile linked to a Stripe customer."""
    with db.transaction() as conn:
        return _one(conn, "customer_id = %s", customer_id, lock=False)


def lock_by_id(conn: Connection, user_id: str) -> Profile | None:
    """A profile by user id, locked until the transaction ends."""
    return _one(conn, "id = %s::uuid", user_id, lock=True)


def lock_by_customer(conn: Connection, customer_id: str) -> Profile | None:
    """The profile linked to a Stripe customer, locked until the transaction ends."""
    return _one(conn, "customer_id = %s", customer_id, lock=True)


def lock_by_email(conn: Connection, email: str) -> Profile | None:
    """The oldest profile with this e-mail (ignoring case), locked."""
    return _one(conn, "lower(email) = lower(%s)", email, lock=True)


def _one(conn: Connection, where: str, value: str, *, lock: bool) -> Profile | None:
    suffix = " order by created_at limit 1" + (" for update" if lock else "")
    row = conn.execute(
        f"select {COLUMNS} from public.profiles where {where}{suffix}",  # noqa: S608 - constants
        (value,),
    ).fetchone()
    return Profile.from_row(row) if row else None


def link_customer(conn: Connection, user_id: str, *, customer_id: str | None) -> None:
    """Record the Stripe customer a profile bought with (kept when not given)."""
    conn.execute(
        "update public.profiles set customer_id = coalesce(%s, customer_id) where id = %s::uuid",
        (customer_id, user_id),
    )


def set_access(
    conn: Connection, user_id: str, *, grant: bool, changed_at: datetime, event_id: str
) -> None:
    """Set `has_access`; remember which event set it, for ordering."""
    conn.execute(
        "update public.profiles set has_access = %s, access_changed_at = %s, access_event_id = %s"
        " where id = %s::uuid",
        (grant, changed_at, event_id, user_id),
    )


def set_plan(conn: Connection, user_id: str, *, price_id: str, changed_at: datetime) -> None:
    """Set the plan (the price bought); remember when it changed, for ordering."""
    conn.execute(
        "update public.profiles set price_id = %s, price_changed_at = %s where id = %s::uuid",
        (price_id, changed_at, user_id),
    )
