"""Profiles in Postgres, as the service role (row-level security does not apply)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.db.pool import Database, Statement

COLUMNS = (
    "id, email, name, customer_id, price_id, has_access, is_admin, access_changed_at,"
    " price_changed_at, created_at, welcomed_at"
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
    created_at: datetime | None = None
    welcomed_at: datetime | None = None  # when their welcome mail was handed on

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Profile:
        return cls(**{**row, "id": str(row["id"])})


@dataclass(frozen=True)
class Standing:
    """What decides whether a valid token's user may still call (accounts/leaving_rules.py)."""

    present: bool  # their profile is there: it goes with their auth user
    leaving: bool  # a deletion of their account is under way


def standing(db: Database, user_id: str) -> Standing:
    """The user's standing, in one round trip on two primary-key (or unique) lookups: every
    signed-in request reads it."""
    [row] = db.fetch_all(
        "select exists(select 1 from public.profiles where id = %(u)s::uuid) as present,"
        " exists(select 1 from public.account_deletions where user_id = %(u)s::uuid"
        " and finished_at is null) as leaving",
        {"u": user_id},
    )
    return Standing(present=bool(row["present"]), leaving=bool(row["leaving"]))


def mark_welcomed(db: Database, user_id: str) -> None:
    """Their welcome was handed on: no later call hands it on again."""
    db.fetch_all(
        "update public.profiles set welcomed_at = now()"
        " where id = %s::uuid and welcomed_at is null returning id",
        (user_id,),
    )


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
    """Whom the mail about each of these Stripe customers addresses, as a statement to read
    with others in one round trip: the profile of the person whose account the customer belongs
    to, or of a team's current owner who has held the role longest (never its creator once they
    left). Each row has the profile's columns (`from_customer_row`), the customer and whether it
    is a team's."""
    return Statement(
        "select c.customer_id as customer, a.kind = 'team' as team,"  # noqa: S608
        f" {', '.join('p.' + c.strip() for c in COLUMNS.split(','))}"
        " from public.stripe_customers c join public.accounts a on a.id = c.account_id"
        " join public.profiles p on p.id = case when a.kind = 'personal' then a.owner_id else ("
        "select m.user_id from public.team_members m where m.team_id = a.id and m.role = 'owner'"
        " order by m.joined_at, m.user_id limit 1) end"
        " where c.customer_id = any(%s)",
        (list(customer_ids),),
    )


def from_customer_row(row: dict[str, Any]) -> tuple[str, bool, Profile]:
    """A row of `by_customers_statement`: the customer, whether it is a team's, the profile."""
    rest = {k: v for k, v in row.items() if k not in ("customer", "team")}
    return str(row["customer"]), bool(row["team"]), Profile.from_row(rest)


def first(rows: Sequence[dict[str, Any]]) -> Profile | None:
    """The profile in a read's rows, if any."""
    return Profile.from_row(rows[0]) if rows else None


def _oldest(where: str) -> str:
    return f"select {COLUMNS} from public.profiles where {where} order by created_at limit 1"  # noqa: S608


def _read(db: Database, where: str, value: str) -> Profile | None:
    """The oldest profile matching, in one round trip, unlocked."""
    return first(db.fetch_all(_oldest(where), (value,)))
