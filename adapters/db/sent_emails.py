"""The record of e-mails sent per (event, kind): at most one each."""

from __future__ import annotations

from adapters.db.pool import Connection, Database


def lock(conn: Connection, key: str) -> None:
    """Serialise senders of the same (event, kind) until the transaction ends."""
    conn.execute("select pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))


def already_sent(conn: Connection, *, event_id: str, kind: str) -> bool:
    row = conn.execute(
        "select 1 from public.sent_emails where event_id = %s and kind = %s", (event_id, kind)
    ).fetchone()
    return row is not None


def any_sent(db: Database, event_id: str) -> bool:
    """Whether an e-mail was recorded for this event (of any kind); no transaction held."""
    return bool(
        db.fetch_all("select 1 from public.sent_emails where event_id = %s limit 1", (event_id,))
    )


def record(
    conn: Connection, *, event_id: str, kind: str, recipient: str, provider_id: str | None
) -> None:
    conn.execute(
        "insert into public.sent_emails (event_id, kind, recipient, provider_id)"
        " values (%s, %s, %s, %s) on conflict do nothing",
        (event_id, kind, recipient, provider_id),
    )
