"""The migrations and row-level security, exercised as Supabase's roles with JWT claims set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from adapters.db import migrations
from adapters.db.pool import Connection, Database
from dev.samples.catalogue import seed_demo_products
from tests.helpers import create_user, empty_database


@contextmanager
def as_role(
    db: Database, role: str, user_id: str | None = None, *, aal: str | None = None
) -> Iterator[Connection]:
    """A transaction running as `role` with `request.jwt.claims` set, as PostgREST does (with
    the token's `aal` when given: `aal2` after a second factor)."""
    found: dict[str, str] = {"sub": user_id, "role": role} if user_id else {"role": role}
    if aal is not None:
        found["aal"] = aal
    claims = json.dumps(found)
    with db.pool.connection() as conn:
        try:
            with conn.transaction():
                conn.execute("select set_config('request.jwt.claims', %s, true)", (claims,))
                conn.execute(f"set local role {role}")
                yield conn
                raise _Rollback
        except _Rollback:
            pass


class _Rollback(Exception):
    pass


def ids(conn: Connection, table: str) -> set[str]:
    rows = conn.execute(f"select id from public.{table}").fetchall()  # noqa: S608 - test constant
    return {str(r["id"]) for r in rows}


def test_new_auth_user_gets_a_profile(db: Database) -> None:
    user = create_user(db, "new@example.com", name="Ada Lovelace")
    [row] = db.fetch_all(
        "select email, name, has_access, is_admin from public.profiles where id = %s", (user,)
    )
    assert row == {
        "email": "new@example.com",
        "name": "Ada Lovelace",
        "has_access": False,
        "is_admin": False,
    }


def test_users_read_only_their_own_profile_and_admins_read_all(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    with as_role(db, "authenticated", alice) as conn:
        assert ids(conn, "profiles") == {alice}
    with as_role(db, "anon") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        ids(conn, "profiles")
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = true where id = %s", (bob,))
    with as_role(db, "authenticated", bob, aal="aal2") as conn:
        assert ids(conn, "profiles") == {alice, bob}


def test_an_admin_without_a_second_factor_reads_only_their_own_rows(db: Database) -> None:
    """As the support API refuses an admin whose token lacks a second factor, so do the
    policies: `is_admin()` holds only for a token with `aal` = `aal2`, whatever ADMIN_MFA says
    (a development setting of the API alone)."""
    seed_demo_products(db)
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = true where id = %s", (bob,))
        conn.execute("update public.products set is_active = false where ctid in"
                     " (select ctid from public.products limit 1)")  # fmt: skip
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, status, active)"
            " select id, 'comp_alice', 'comp', 'active', true from public.accounts"
            " where owner_id = %s",
            (alice,),
        )
    every_product = {str(r["id"]) for r in db.fetch_all("select id from public.products")}
    for aal in (None, "aal1", "AAL2", "aal3"):
        with as_role(db, "authenticated", bob, aal=aal) as conn:
            assert ids(conn, "profiles") == {bob}, aal
            assert ids(conn, "accounts") == ids_owned(conn, bob), aal
            assert ids(conn, "products") < every_product, aal
            assert ids(conn, "entitlements") == set(), aal
            assert conn.execute("select public.is_admin() as yes").fetchone() == {"yes": False}
    with as_role(db, "authenticated", bob, aal="aal2") as conn:
        assert ids(conn, "profiles") == {alice, bob}
        assert ids(conn, "products") == every_product
        assert len(ids(conn, "accounts")) == 2
        assert len(ids(conn, "entitlements")) == 1
    # A customer with two factors is still a customer.
    with as_role(db, "authenticated", alice, aal="aal2") as conn:
        assert ids(conn, "profiles") == {alice}


def ids_owned(conn: Connection, user: str) -> set[str]:
    rows = conn.execute(
        "select id from public.accounts where kind = 'personal' and owner_id = %s", (user,)
    ).fetchall()
    return {str(r["id"]) for r in rows}


def test_users_cannot_grant_themselves_access(db: Database) -> None:
    alice = create_user(db, "alice@example.com")
    for statement in (
        "update public.profiles set has_access = true where id = %s",
        "delete from public.profiles where id = %s",
    ):
        with (
            as_role(db, "authenticated", alice) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(statement, (alice,))


def test_purchases_are_private_to_their_account(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    with db.transaction() as conn:
        for user, session in ((alice, "cs_a"), (bob, "cs_b")):
            conn.execute(
                "insert into public.purchases (user_id, account_id, stripe_checkout_session_id)"
                " select %s, a.id, %s from public.accounts a"
                " where a.owner_id = %s and a.kind = 'personal'",
                (user, session, user),
            )
        # Who paid is for the books: a purchase of Bob's account that Alice paid is not hers.
        conn.execute(
            "insert into public.purchases (user_id, account_id, stripe_checkout_session_id)"
            " select %s, a.id, 'cs_paid_by_alice' from public.accounts a"
            " where a.owner_id = %s and a.kind = 'personal'",
            (alice, bob),
        )
    with as_role(db, "authenticated", alice) as conn:
        rows = conn.execute(
            "select stripe_checkout_session_id as s from public.purchases"
        ).fetchall()
        assert [r["s"] for r in rows] == ["cs_a"]


def test_github_grants_are_private_to_their_user(db: Database) -> None:
    alice, bob = create_user(db, "alice@example.com"), create_user(db, "bob@example.com")
    with db.transaction() as conn:
        for user, login in ((alice, "alice-gh"), (bob, "bob-gh")):
            conn.execute(
                "with p as (insert into public.purchases (user_id, stripe_checkout_session_id,"
                " paid) values (%s, %s, true) returning id)"
                " insert into public.github_grants (purchase_id, user_id, github_username)"
                " select id, %s, %s from p",
                (user, f"cs_{login}", user, login),
            )
    with as_role(db, "authenticated", alice) as conn:
        rows = conn.execute("select github_username from public.github_grants").fetchall()
        assert [r["github_username"] for r in rows] == ["alice-gh"]
    with (
        as_role(db, "authenticated", alice) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("update public.github_grants set github_username = 'x'")
    with as_role(db, "anon") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        ids(conn, "github_grants")


def test_everyone_reads_active_products_only(db: Database) -> None:
    seed_demo_products(db)
    with db.transaction() as conn:
        conn.execute("update public.products set is_active = false where name = 'Starter Kit'")
    with as_role(db, "anon") as conn:
        names = {r["name"] for r in conn.execute("select name from public.products").fetchall()}
        assert names == {"Pro Repository", "Team Monthly"}


def test_nobody_reads_leads_through_the_api(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute("insert into public.leads (email) values ('x@example.com')")
    alice = create_user(db, "alice@example.com")
    with (
        as_role(db, "authenticated", alice) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="leads"),
    ):
        conn.execute("select count(*) as n from public.leads")


def test_migrations_apply_once_and_record_like_the_supabase_cli(database_url: str) -> None:
    assert migrations.apply_all(database_url, allow_auth_stand_in=True) == []
    with psycopg.connect(database_url) as conn:
        versions = [
            r[0]
            for r in conn.execute(
                "select version from supabase_migrations.schema_migrations order by version"
            )
        ]
    assert versions == [m.version for m in migrations.available()]


def test_migrations_on_an_empty_database(database_url: str) -> None:
    with empty_database(database_url) as url:
        first = migrations.apply_all(url, allow_auth_stand_in=True)
        assert first == [m.version for m in migrations.available()]
        assert migrations.apply_all(url, allow_auth_stand_in=True) == []


def test_without_auth_schema_and_no_stand_in_migrations_fail(database_url: str) -> None:
    with empty_database(database_url) as url, pytest.raises(psycopg.errors.InvalidSchemaName):
        migrations.apply_all(url, allow_auth_stand_in=False)


@pytest.mark.parametrize(
    "sql",
    [
        "alter table public.profiles drop column name;",
        "ALTER TABLE public.profiles RENAME COLUMN name TO full_name;",
        "drop table public.leads;",
        "alter table public.profiles alter column email set not null;",
        "alter table public.profiles\n  alter column price_id type integer;",
    ],
)
def test_an_unmarked_contraction_is_found(sql: str) -> None:
    assert migrations.unmarked_contractions(sql) != []


def test_a_marked_contraction_or_an_expansion_passes() -> None:
    sql = (
        "alter table public.profiles add column nickname text;\n"
        "-- contract: nothing reads `name` since the release before this one.\n"
        "alter table public.profiles\n  drop column name;\n"
        "create index if not exists profiles_email_idx on public.profiles (email);\n"
    )
    assert migrations.unmarked_contractions(sql) == []
    assert migrations.unmarked_contractions(sql + "drop table public.leads;") == [
        "drop table public.leads;"
    ]


def test_every_migration_in_the_repository_follows_the_rule() -> None:
    offenders = {
        m.path.name: found
        for m in migrations.available()
        if (found := migrations.unmarked_contractions(m.path.read_text()))
    }
    assert offenders == {}


def test_the_migrate_step_refuses_an_unmarked_contraction(
    tmp_path: Path, database_url: str
) -> None:
    copy = tmp_path / "migrations"
    copy.mkdir()
    for m in migrations.available():
        (copy / m.path.name).write_text(m.path.read_text())
    (copy / "29991231000000_careless.sql").write_text("alter table public.leads drop column email;")
    with pytest.raises(migrations.UnsafeMigration, match=r"29991231000000_careless\.sql"):
        migrations.apply_all(database_url, allow_auth_stand_in=True, directory=copy)
    with psycopg.connect(database_url) as conn:
        [row] = conn.execute(
            "select count(*) from information_schema.columns"
            " where table_name = 'leads' and column_name = 'email'"
        ).fetchall()
    assert row == (1,)


def test_members_read_their_teams_and_only_the_server_writes(db: Database) -> None:
    from datetime import UTC, datetime, timedelta

    from teams import store as teams

    ada, grace, eve = (create_user(db, f"{n}@example.com") for n in ("ada", "grace", "eve"))
    team = teams.create(db, owner_id=ada, name="Engines").id
    teams.invite(
        db, team_id=team, email="grace@example.com", role="member", token_hash="h" * 64,
        invited_by=ada, expires_at=datetime.now(UTC) + timedelta(days=1), daily_limit=20,
        sender_limit=20, inviting=lambda actor: None,
    )  # fmt: skip
    with db.transaction() as conn:
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, 'member')",
            (team, grace),
        )
    with as_role(db, "authenticated", grace) as conn:
        assert ids(conn, "teams") == {team}
        members = conn.execute("select user_id::text from public.team_members").fetchall()
        assert {r["user_id"] for r in members} == {ada, grace}
        assert ids(conn, "team_invitations") == {
            r["id"] for r in db.fetch_all("select id::text from public.team_invitations")
        }
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select token_hash from public.team_invitations")
    for statement in (
        "update public.team_members set role = 'owner'",
        "delete from public.team_members",
        "insert into public.team_members (team_id, user_id, role)"
        " select team_id, user_id, 'owner' from public.team_members",
    ):
        with (
            as_role(db, "authenticated", grace) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(statement)
    with as_role(db, "authenticated", eve) as conn:
        assert ids(conn, "teams") == set()
        assert ids(conn, "team_invitations") == set()
        assert conn.execute("select * from public.team_members").fetchall() == []
