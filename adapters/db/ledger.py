"""The record of events each consumer has applied: the idempotency guard."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

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


def claim_many(conn: Connection, *, consumer: str, events: Sequence[Event]) -> set[str]:
    """`claim` for many events with one statement: the ids claimed now.

    Inserted in id order, so two batches holding the same ids wait on each other in one order.
    """
    ordered = sorted({event.id: event for event in events}.values(), key=lambda e: e.id)
    if len(ordered) == 1:  # the plain statement: cheaper for Postgres to plan
        return {ordered[0].id} if claim(conn, consumer=consumer, event=ordered[0]) else set()
    rows = conn.execute(
        "insert into public.processed_events"
        " (consumer, event_id, event_type, event_created, outcome)"
        " select %s, e.id, e.type, e.created, 'pending'"
        " from unnest(%s::text[], %s::text[], %s::timestamptz[]) with ordinality"
        " as e(id, type, created, n) order by e.n"
        " on conflict do nothing returning event_id",
        (
            consumer,
            [e.id for e in ordered],
            [e.type for e in ordered],
            [e.created for e in ordered],
        ),
    ).fetchall()
    return {str(row["event_id"]) for row in rows}


def release(conn: Connection, *, consumer: str, event_ids: Collection[str]) -> None:
    """Undo this transaction's claims of these events: they are to be applied later."""
    conn.execute(RELEASE, (consumer, list(event_ids)))


# Records many outcomes: (event ids, outcomes, consumer).
SETTLE_MANY = (
    "update public.processed_events p set outcome = v.outcome"
    " from unnest(%s::text[], %s::text[]) as v(event_id, outcome)"
    " where p.consumer = %s and p.event_id = v.event_id"
)
# Undoes claims: (consumer, event ids).
RELEASE = "delete from public.processed_events where consumer = %s and event_id = any(%s)"


def settle_many(conn: Connection, *, consumer: str, outcomes: Mapping[str, str]) -> None:
    """`settle` for many events with one statement."""
    if len(outcomes) < 2:
        for event_id, outcome in outcomes.items():
            _settle(conn, consumer=consumer, event_id=event_id, outcome=outcome)
        return
    conn.execute(SETTLE_MANY, (list(outcomes), list(outcomes.values()), consumer))


def outcomes(conn: Connection, *, consumer: str, event_ids: Collection[str]) -> dict[str, str]:
    """What applying each of these events did, as `settle` recorded it (absent: no record)."""
    if len(event_ids) < 2:
        return {i: found for i in event_ids if (found := _outcome(conn, consumer, i)) is not None}
    rows = conn.execute(
        "select event_id, outcome from public.processed_events"
        " where consumer = %s and event_id = any(%s)",
        (consumer, list(event_ids)),
    ).fetchall()
    return {str(row["event_id"]): str(row["outcome"]) for row in rows}


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
