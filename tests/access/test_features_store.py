"""Features in Postgres: derived from active grants and the products sold at their prices, read
by the access token hook (as Supabase Auth calls it) and by row-level security (as
Supabase's roles with JWT claims)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from access import features_store as features
from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.adapters.db.test_schema import as_role
from tests.helpers import create_user

GITHUB = "price_demo_pro_github"  # the demo repository product: example-org/saas-starter-pro


def product(db: Database, price: str, *names: str) -> None:
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, features) values (%s, 9, %s, 'link', 'subscription', 'month', %s)",
            (price, price, list(names)),
        )


def grant(
    db: Database, user_id: str, price: str, *, active: bool = True, kind: str = "subscription"
) -> None:
    """A grant of the user's own account, as the access cycle writes one."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.entitlements"
            " (account_id, source_id, kind, price_id, status, active)"
            " select a.id, %s, %s, %s, %s, %s from public.accounts a where a.owner_id = %s",
            (
                f"src_{user_id}_{price}",
                kind,
                price,
                "active" if active else "canceled",
                active,
                user_id,
            ),
        )
        if active:
            conn.execute("update public.profiles set has_access = true where id = %s", (user_id,))


def call_hook(db: Database, role: str, event: dict[str, Any]) -> dict[str, Any]:
    with db.transaction() as conn:
        conn.execute(f"set local role {role}")
        row = conn.execute(
            "select public.custom_access_token_hook(%s::jsonb) as answer", (json.dumps(event),)
        ).fetchone()
    assert row is not None
    answer: dict[str, Any] = row["answer"]
    return answer


def test_features_come_from_active_grants_sorted_with_a_repositorys_own(db: Database) -> None:
    seed_demo_products(db)
    product(db, "price_pro", "pro", "api")
    product(db, "price_old", "legacy")
    ada = create_user(db, "ada@example.com")
    grant(db, ada, "price_pro")
    grant(db, ada, GITHUB, kind="purchase")
    grant(db, ada, "price_old", active=False)
    grant(db, ada, "price_nobody_sells")  # a price no product row has: no features, no error
    assert features.of_user(db, ada) == ["api", "github:example-org/saas-starter-pro", "pro"]
    assert features.of_user(db, create_user(db, "bob@example.com")) == []


def test_the_hook_keeps_every_claim_and_adds_access_and_features(db: Database) -> None:
    product(db, "price_pro", "pro")
    ada = create_user(db, "ada@example.com")
    grant(db, ada, "price_pro")
    sent = {
        "sub": ada,
        "role": "authenticated",
        "aal": "aal1",
        "email": "ada@example.com",
        "app_metadata": {"provider": "email"},
        "features": ["forged"],  # ours, replaced
    }
    event = {"user_id": ada, "claims": sent, "authentication_method": "password"}
    answer = call_hook(db, "supabase_auth_admin", event)
    assert answer == {"claims": {**sent, "has_access": True, "features": ["pro"]}}

    bob = create_user(db, "bob@example.com")
    answer = call_hook(db, "supabase_auth_admin", {**event, "user_id": bob, "claims": {"sub": bob}})
    assert answer == {"claims": {"sub": bob, "has_access": False, "features": []}}


@pytest.mark.parametrize("role", ["authenticated", "anon"])
def test_only_supabase_auth_calls_the_hook_or_asks_about_anyone(db: Database, role: str) -> None:
    ada = create_user(db, "ada@example.com")
    event = {"user_id": ada, "claims": {}, "authentication_method": "password"}
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        call_hook(db, role, event)
    for query in ("public.features_of(%s::uuid)", "public.access_of(%s::uuid)"):
        with as_role(db, role, ada) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"select {query}", (ada,))


def test_has_feature_and_has_access_answer_for_the_signed_in_user(db: Database) -> None:
    product(db, "price_pro", "pro")
    ada = create_user(db, "ada@example.com")
    bob = create_user(db, "bob@example.com")
    grant(db, ada, "price_pro")
    asked = "select public.has_feature('pro') as pro, public.has_feature('no-such') as unknown,"
    asked += " public.has_feature(null) as nothing, public.has_access() as access"
    held = {"unknown": False, "nothing": False}  # an unknown or missing name: not held
    for role, user, has in (("authenticated", ada, True), ("authenticated", bob, False)):
        with as_role(db, role, user) as conn:
            assert conn.execute(asked).fetchone() == {**held, "pro": has, "access": has}
    with as_role(db, "anon") as conn:  # a guest holds nothing, and is not refused
        assert conn.execute(asked).fetchone() == {**held, "pro": False, "access": False}


def test_a_policy_on_a_founders_table_shows_two_users_different_rows(db: Database) -> None:
    product(db, "price_pro", "pro")
    ada = create_user(db, "ada@example.com")
    bob = create_user(db, "bob@example.com")
    grant(db, ada, "price_pro")
    with db.transaction() as conn:
        conn.execute("create table public.reports (id serial primary key, title text)")
        conn.execute("alter table public.reports enable row level security")
        conn.execute(
            'create policy "reports: pro" on public.reports for select to authenticated'
            " using ((select public.has_feature('pro')))"
        )
        conn.execute("grant select on public.reports to authenticated")
        conn.execute("insert into public.reports (title) values ('Q3'), ('Q4')")
    try:
        for user, seen in ((ada, ["Q3", "Q4"]), (bob, [])):
            with as_role(db, "authenticated", user) as conn:
                rows = conn.execute("select title from public.reports order by id").fetchall()
                assert [r["title"] for r in rows] == seen
    finally:
        with db.transaction() as conn:
            conn.execute("drop table public.reports")


def test_the_helpers_are_stable_security_definers_with_a_fixed_search_path(db: Database) -> None:
    rows = db.fetch_all(
        "select p.proname, p.provolatile, p.prosecdef, p.proconfig from pg_proc p"
        " where p.pronamespace = 'public'::regnamespace and p.proname = any(%s)",
        (["has_feature", "has_access", "features_of", "access_of", "grant_features"],),
    )
    assert len(rows) == 5
    for row in rows:
        assert (row["provolatile"], row["prosecdef"]) == ("s", True), row["proname"]
        assert row["proconfig"] == ['search_path=""'], row["proname"]
