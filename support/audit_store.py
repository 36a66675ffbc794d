"""The admin audit log in Postgres (`audit.admin_audit`, in a schema of its own that the role
serving the app does not own): rows are added and read, never changed (a trigger refuses UPDATE,
DELETE and TRUNCATE to every role). A row is added through `audit.admin_audit_record`, the one
way in: the database sets its id and time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from adapters.db.pool import Database


@dataclass(frozen=True)
class Entry:
    """One admin call: who, what, about whom, why, and the request's details."""

    admin_id: str
    admin_email: str | None
    action: str  # e.g. `customers.search`, `grants.comp`
    subject_user_id: str | None = None  # the person the call is about, when it names one
    subject: str | None = None  # what else it names: a grant, an e-mail, an event, a query
    reason: str | None = None
    request: dict[str, Any] | None = None  # method, path, query, client address, user agent


def record(db: Database, entry: Entry) -> int:
    """Append the entry; returns its id."""
    with db.transaction() as conn:
        rows = conn.execute(
            "select audit.admin_audit_record(%s::uuid, %s, %s, %s::uuid, %s, %s, %s) as id",
            (
                entry.admin_id,
                entry.admin_email,
                entry.action,
                entry.subject_user_id,
                entry.subject,
                entry.reason,
                Jsonb(entry.request or {}),
            ),
        ).fetchall()
    return int(rows[0]["id"])


def page(db: Database, *, limit: int, before: int | None) -> list[dict[str, Any]]:
    """Newest first: up to `limit` rows older than the row `before` (None: from the newest)."""
    return db.fetch_all(
        "select id, at, admin_id::text, admin_email, action, subject_user_id::text, subject,"
        " reason, request from audit.admin_audit where (%s::bigint is null or id < %s::bigint)"
        " order by id desc limit %s",
        (before, before, limit),
    )
