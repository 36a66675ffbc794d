"""Disputes (chargebacks) in Postgres, for the admin."""

from __future__ import annotations

from datetime import datetime

from adapters.db.pool import Connection
from core.refunds import Dispute


def record(conn: Connection, dispute: Dispute, *, opened_at: datetime) -> None:
    """Keep the dispute once."""
    conn.execute(
        "insert into public.disputes (id, charge_id, payment_intent_id, amount, currency,"
        " reason, status, opened_at) values (%s, %s, %s, %s, %s, %s, %s, %s)"
        " on conflict (id) do nothing",
        (
            dispute.id,
            dispute.charge_id,
            dispute.payment_intent,
            dispute.amount,
            dispute.currency,
            dispute.reason,
            dispute.status,
            opened_at,
        ),
    )
