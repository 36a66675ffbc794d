"""Accounts and their entitlements in the schema: row-level security; one account per person."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

from access import entitlements_store as entitlements
from access.entitlements import Entitlement
from adapters.db.pool import Database
from tests.adapters.db.test_schema import as_role
from tests.helpers import create_user


def test_users_read_only_their_own_entitlements(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    with db.transaction() as conn:
        for user, source in ((alice, "sub_a"), (bob, "sub_b")):
            conn.execute(
                "insert into public.entitlements (account_id, source_id, kind, status, active)"
                " select id, %s, 'subscription', 'active', true from public.accounts"
                " where owner_id = %s",
                (source, user),
            )
    with as_role(db, "authenticated", alice) as conn:
        rows = conn.execute("select source_id from public.entitlements").fetchall()
        assert [r["source_id"] for r in rows] == ["sub_a"]
    with as_role(db, "anon") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("select source_id from public.entitlements")


def own_account(db: Database, user: str) -> str:
    [row] = db.fetch_all(
        "select id::text from public.accounts where owner_id = %s and kind = 'personal'", (user,)
    )
    return str(row["id"])


def test_a_grant_of_another_account_is_never_written_over(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    mine = Entitlement(account_id=own_account(db, alice), source_id="sub_x", kind="subscription",
                       price_id=None, status="active", active=True)  # fmt: skip
    with db.transaction() as conn:
        entitlements.save(conn, [mine])
        entitlements.save(conn, [replace(mine, account_id=own_account(db, bob), active=False)])
    [row] = db.fetch_all("select account_id::text as account, active from public.entitlements")
    assert (row["account"], row["active"]) == (own_account(db, alice), True)


def test_each_user_gets_an_account_of_their_own_and_reads_only_it(db: Database) -> None:
    alice = create_user(db, "alice@example.com")
    rows = db.fetch_all(
        "select kind, owner_id::text as owner from public.accounts where owner_id = %s", (alice,)
    )
    assert rows == [{"kind": "personal", "owner": alice}]
    create_user(db, "bob@example.com")
    with as_role(db, "authenticated", alice) as conn:
        owners = [r["owner_id"] for r in conn.execute("select owner_id from public.accounts")]
        assert [str(o) for o in owners] == [alice]
    with (
        as_role(db, "authenticated", alice) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("update public.accounts set has_access = true")
    with as_role(db, "anon") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("select id from public.accounts")
