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
