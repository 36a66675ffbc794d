"""The entitlements table: row-level security; a grant is never written over by another's."""

from __future__ import annotations

from dataclasses import replace

from adapters.db import entitlements
from adapters.db.pool import Database
from core.entitlements import Entitlement
from tests.adapters.db.test_schema import as_role
from tests.helpers import create_user


def test_users_read_only_their_own_entitlements(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    with db.transaction() as conn:
        for user, source in ((alice, "sub_a"), (bob, "sub_b")):
            conn.execute(
                "insert into public.entitlements (user_id, source_id, kind, status, active)"
                " values (%s, %s, 'subscription', 'active', true)",
                (user, source),
            )
    with as_role(db, "authenticated", alice) as conn:
        rows = conn.execute("select source_id from public.entitlements").fetchall()
        assert [r["source_id"] for r in rows] == ["sub_a"]
    with as_role(db, "anon") as conn:
        assert conn.execute("select source_id from public.entitlements").fetchall() == []


def test_a_grant_of_another_user_is_never_written_over(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    mine = Entitlement(user_id=alice, source_id="sub_x", kind="subscription", price_id=None,
                       status="active", active=True)  # fmt: skip
    with db.transaction() as conn:
        entitlements.save(conn, [mine], adopted={})
        entitlements.save(conn, [replace(mine, user_id=bob, active=False)], adopted={})
    [row] = db.fetch_all("select user_id::text as user, active from public.entitlements")
    assert (row["user"], row["active"]) == (alice, True)
