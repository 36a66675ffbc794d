"""Test helpers: Stripe signatures and events, users, scratch databases, waiting on a condition."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from adapters.db.pool import Database
from config import DEV_WEBHOOK_SECRET


@contextmanager
def empty_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server of `server_url`, dropped afterwards."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        yield psycopg.conninfo.make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


@contextmanager
def postgres_home() -> Iterator[Path]:
    """A scratch directory for an embedded Postgres (or the PgBouncer in front of it), outside
    pytest's temporary root: run as root, both run as the server's own user, which must traverse
    the path, and every pytest that starts (another run's) makes that root private again."""
    home = Path(tempfile.mkdtemp(prefix="test-postgres-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def stripe_signature(
    payload: bytes, *, secret: str = DEV_WEBHOOK_SECRET, timestamp: int | None = None
) -> str:
    """The Stripe-Signature header, computed exactly as Stripe does."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def stripe_event(
    event_type: str,
    obj: dict[str, Any],
    *,
    created: int | None = None,
    event_id: str | None = None,
    livemode: bool = False,
    api_version: str = "2023-08-16",
    previous: dict[str, Any] | None = None,
) -> bytes:
    """A Stripe event body as the webhook receives it."""
    data: dict[str, Any] = {"object": obj}
    if previous is not None:
        data["previous_attributes"] = previous
    return json.dumps(
        {
            "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "api_version": api_version,
            "created": int(time.time()) if created is None else created,
            "livemode": livemode,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": event_type,
            "data": data,
        }
    ).encode()


def create_user(db: Database, email: str, *, name: str | None = None) -> str:
    """An auth user (the trigger gives it a profile); returns its id."""
    user_id = str(uuid.uuid4())
    meta = json.dumps({"full_name": name} if name else {})
    with db.transaction() as conn:
        conn.execute(
            "insert into auth.users (id, email, raw_user_meta_data) values (%s, %s, %s)",
            (user_id, email, meta),
        )
    return user_id


# Seconds a test waits for what it awaits (a condition, a process, a thread, an answer) before
# calling it hung. Far beyond what any of them takes, idle or loaded (a condition seen in well
# under a second when idle took over 10 s with two CPU-burning processes beside the suite): a
# test reaches it only when what it awaits will never come, so it costs time only then.
HANG_GUARD = 300.0


def wait_for(
    condition: Callable[[], Any], *, timeout: float = HANG_GUARD, interval: float = 0.02
) -> Any:
    """Poll until `condition()` is truthy and return its value; fail the test if it never is.
    Callers await the condition and pass no deadline: `timeout` is only the hang guard."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: it hangs")
        time.sleep(interval)


def checkout_session_with_items(session_id: str, price_id: str) -> dict[str, Any]:
    """A checkout.session as Stripe answers its retrieval with `expand[]=line_items`."""
    return {
        "id": session_id,
        "object": "checkout.session",
        "line_items": {
            "object": "list",
            "has_more": False,
            "url": f"/v1/checkout/sessions/{session_id}/line_items",
            "data": [
                {
                    "id": "li_1",
                    "object": "item",
                    "quantity": 1,
                    "price": {"id": price_id, "object": "price"},
                }
            ],
        },
    }
