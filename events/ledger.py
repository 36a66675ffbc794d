"""The record of events each consumer has applied: the idempotency guard.

The access cycle claims and settles its events inside its own two round trips
(`access.store`); this module answers what the ledger holds.
"""

from __future__ import annotations

from adapters.db.pool import Database


def missing(db: Database, *, consumer: str, event_ids: list[str]) -> set[str]:
    """Which of these events `consumer` has no record of."""
    rows = db.fetch_all(
        "select event_id from public.processed_events where consumer = %s and event_id = any(%s)",
        (consumer, event_ids),
    )
    return set(event_ids) - {str(r["event_id"]) for r in rows}
