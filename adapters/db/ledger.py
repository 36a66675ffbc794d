"""The record of events each consumer has applied: the idempotency guard."""

from __future__ import annotations

from adapters.db.pool import Connection, Database
from core.events import Event


def claim(conn: Connection, *, consumer: str, event: Event) -> bool:
    """Record the event as applied by `consumer`; False when it already was.

    Runs inside the consumer's transaction: if the effect fails, the claim rolls back with it;
    a concurrent duplicate waits on the primary key and then sees the row.
    """
    row = conn.execute(
        "insert into public.processed_events"
        " (consumer, event_id, event_type, event_created, outcome)"
        " values (%s, %s, %s, %s, 'pending') on conflict do nothing returning event_id",
        (consumer, event.id, event.type, event.created),
    ).fetchone()
    return row is not None


# Records many outcomes: (event ids, outcomes, consumer).
SETTLE_MANY = (
    "update public.processed_events p set outcome = v.outcome"
    " from unnest(%s::text[], %s::text[]) as v(event_id, outcome)"
    " where p.consumer = %s and p.event_id = v.event_id"
)
# Undoes claims: (consumer, event ids).
RELEASE = "delete from public.processed_events where consumer = %s and event_id = any(%s)"


def settle(conn: Connection, *, consumer: str, event: Event, outcome: str) -> None:
    """Say what applying the event did (for operators reading the table)."""
    _settle(conn, consumer=consumer, event_id=event.id, outcome=outcome)


def _settle(conn: Connection, *, consumer: str, event_id: str, outcome: str) -> None:
    conn.execute(
        "update public.processed_events set outcome = %s where consumer = %s and event_id = %s",
        (outcome, consumer, event_id),
    )


def outcome(conn: Connection, *, consumer: str, event: Event) -> str | None:
    """What applying the event did, as `settle` recorded it."""
    return _outcome(conn, consumer, event.id)


def _outcome(conn: Connection, consumer: str, event_id: str) -> str | None:
    row = conn.execute(
        "select outcome from public.processed_events where consumer = %s and event_id = %s",
        (consumer, event_id),
    ).fetchone()
    return str(row["outcome"]) if row else None


def missing(db: Database, *, consumer: str, event_ids: list[str]) -> set[str]:
    """Which of these events `consumer` has no record of."""
    rows = db.fetch_all(
        "select event_id from public.processed_events where consumer = %s and event_id = any(%s)",
        (consumer, event_ids),
    )
    return set(event_ids) - {str(r["event_id"]) for r in rows}
