"""Profiles in Postgres, as the service role (row-level security does not apply)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.db.pool import Database, Statement

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


def _oldest(where: str) -> str:
    return f"select {COLUMNS} from public.profiles where {where} order by created_at limit 1"  # noqa: S608


def _read(db: Database, where: str, value: str) -> Profile | None:
    """The oldest profile matching, in one round trip, unlocked."""
    return first(db.fetch_all(_oldest(where), (value,)))
