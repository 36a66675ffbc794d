"""The entitlements table: today's data carried over by its migration, and row-level security."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from adapters.db import entitlements, migrations
from adapters.db.pool import Database
from core.entitlements import Entitlement
from tests.adapters.db.test_schema import as_role
from tests.helpers import create_user, empty_database

ENTITLEMENTS = "20261126000000_entitlements.sql"


def test_the_migration_carries_purchases_and_access_over(tmp_path: Path, database_url: str) -> None:
    before = tmp_path / "before"
    before.mkdir()
    for m in migrations.available():
        if m.path.name != ENTITLEMENTS:
            (before / m.path.name).write_text(m.path.read_text())
    with empty_database(database_url) as url:
        migrations.apply_all(url, allow_auth_stand_in=True, directory=before)
        lifetime, subscriber, refunded, nobody = (str(uuid.uuid4()) for _ in range(4))
        with psycopg.connect(url, row_factory=dict_row) as conn:
            for user in (lifetime, subscriber, refunded, nobody):
                conn.execute(
                    "insert into auth.users (id, email) values (%s, %s)", (user, f"{user}@x.io")
                )
            conn.execute(
                "insert into public.products (id, name, price, stripe_price_id, type,"
                " billing_type, billing_interval) values"
                " ('00000000-0000-4000-8000-000000000001', 'Kit', 49, 'price_kit', 'link',"
                " 'one_time', null),"
                " ('00000000-0000-4000-8000-000000000002', 'Team', 19, 'price_team', 'link',"
                " 'subscription', 'month')"
            )
            purchases = [
                (lifetime, "cs_life", "00000000-0000-4000-8000-000000000001", None),
                (refunded, "cs_back", "00000000-0000-4000-8000-000000000001", "2026-11-01"),
                (subscriber, "cs_sub", "00000000-0000-4000-8000-000000000002", None),
            ]
            for user, session, product, refunded_at in purchases:
                conn.execute(
                    "insert into public.purchases (user_id, stripe_checkout_session_id,"
                    " product_id, paid, refunded_at) values (%s, %s, %s, true, %s)",
                    (user, session, product, refunded_at),
                )
            conn.execute(
                "update public.profiles set has_access = true, price_id = 'price_team',"
                " access_changed_at = '2026-11-02' where id = any(%s::uuid[])",
                ([lifetime, subscriber],),
            )
        assert migrations.apply_all(url, allow_auth_stand_in=True) == [ENTITLEMENTS[:14]]
        with psycopg.connect(url, row_factory=dict_row) as conn:
            rows = conn.execute(
                "select user_id::text as user, source_id, kind, status, active"
                " from public.entitlements order by source_id"
            ).fetchall()
    found = {(r["user"], r["source_id"], r["kind"], r["status"], r["active"]) for r in rows}
    assert found == {
        (lifetime, "cs_life", "purchase", "paid", True),
        (refunded, "cs_back", "purchase", "refunded", False),
        # Access no one-time purchase explains: a subscription whose id was not kept.
        (subscriber, f"profile:{subscriber}", "subscription", "active", True),
    }


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
