"""Leads in Postgres."""

from __future__ import annotations

from adapters.db.pool import Database


def add_lead(db: Database, email: str) -> bool:
    """Store a lead once per address, ignoring case; True when it is new."""
    with db.transaction() as conn:
        row = conn.execute(
            "insert into public.leads (email) values (%s)"
            " on conflict ((lower(email))) do nothing returning id",
            (email,),
        ).fetchone()
    return row is not None


def has_lead(db: Database, email: str) -> bool:
    return bool(db.fetch_all("select 1 from public.leads where lower(email) = lower(%s)", (email,)))


def remove_lead(db: Database, email: str) -> bool:
    """Remove the lead with this address (ignoring case); True when there was one."""
    with db.transaction() as conn:
        row = conn.execute(
            "delete from public.leads where lower(email) = lower(%s) returning id", (email,)
        ).fetchone()
    return row is not None
