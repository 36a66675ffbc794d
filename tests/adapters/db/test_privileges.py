"""What Supabase's API roles may do in `public`, read from the catalog and tried as those roles.

Row-level security filters the rows of SELECT, INSERT, UPDATE and DELETE; it does not stop
TRUNCATE, TRIGGER, REFERENCES or MAINTAIN, and it says nothing about functions. So every table
and function in `public` is held against the allow-lists below: a new one that is not listed,
or that hands a role a privilege not listed (Supabase's default privileges hand out all of
them), fails here by name. `service_role` is the server's secret key, bypasses row-level
security and keeps Supabase's defaults, and each object's owner holds all of it: neither is
checked (the migrations' role owns everything in `public`). The audit log lives in a schema of
its own, `audit`, which nobody but its roles owns: everything in it, `service_role`'s grants
included, is held against its own allow-list below.
"""

from __future__ import annotations

import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapters.db import migrations
from adapters.db.pool import Database
from tests.adapters.db.test_schema import as_role
from tests.helpers import empty_database

API_ROLES = ("anon", "authenticated")

# Table -> role -> the table privileges it holds: only what a policy of that role needs.
# Every table in `public` is listed, the server-only ones with nothing.
TABLES: dict[str, dict[str, set[str]]] = {
    "account_deletions": {},
    "accounts": {"authenticated": {"SELECT"}},
    "credit_grants": {},
    "credit_top_ups": {},
    "credit_uses": {},
    "disputes": {},
    "email_claims": {},
    "email_resends": {},
    "entitlements": {},
    "founder_tasks": {},
    "erased_customers": {},
    "github_grants": {"authenticated": {"SELECT"}},
    "leads": {},
    "mrr_levels": {},
    "mrr_movements": {},
    "processed_events": {},
    "retention_offers": {},
    "scheduled_changes": {},
    "products": {},
    "profiles": {"authenticated": {"SELECT"}},
    "purchases": {"authenticated": {"SELECT"}},
    "sent_emails": {},
    "stripe_customers": {},
    "subscription_cancellations": {},
    "team_github_grants": {"authenticated": {"SELECT"}},
    "team_invitation_mails": {},
    "team_invitations": {},
    "team_members": {"authenticated": {"SELECT"}},
    "team_seat_changes": {},
    "teams": {"authenticated": {"SELECT"}},
}

# What anyone reads of the catalogue: all but a product's download link, which reaches its
# holders only, through the API (`GET /api/me`).
CATALOGUE = {
    "id", "name", "description", "price", "stripe_price_id", "type", "billing_type",
    "billing_interval", "trial_days", "is_active", "is_featured", "github_repo", "created_at",
    "updated_at", "features", "per_seat", "stripe_product_id", "synced_at", "credits",
    "credits_period", "credits_expire_days", "meter", "currency", "tax_behavior", "tax_code",
}  # fmt: skip

# (table, role, privilege) -> the columns granted one by one (never a token's hash, a download
# link, or a comp's admin and reason).
COLUMNS: dict[tuple[str, str, str], set[str]] = {
    ("entitlements", "authenticated", "SELECT"): {
        "id", "account_id", "source_id", "kind", "price_id", "status", "active",
        "current_period_end", "cancel_at_period_end", "trial_end", "ended_at", "changed_at",
        "event_id", "created_at", "updated_at",
    },
    ("products", "anon", "SELECT"): CATALOGUE,
    ("products", "authenticated", "SELECT"): CATALOGUE,
    ("team_invitations", "authenticated", "SELECT"): {
        "id", "team_id", "email", "role", "invited_by", "expires_at", "accepted_at",
        "revoked_at", "created_at",
    },
}  # fmt: skip

# Function -> the roles that may execute it (PUBLIC: everyone, anon and authenticated among
# them). The helpers policies ask, and Supabase Auth's access token hook with what it reads.
HOOK = "supabase_auth_admin"
FUNCTIONS: dict[str, set[str]] = {
    "access_accounts(uuid)": set(),
    "access_claim(text,text[],text[],timestamp with time zone[],jsonb)": set(),
    "access_of(uuid)": {HOOK},
    "access_refresh(uuid[])": set(),
    "accounts_record_customer()": set(),
    "accounts_refresh()": set(),
    "consume_credits(uuid,text,integer,text)": set(),
    "credit_account(uuid,text)": set(),
    "credit_answer(credit_uses)": set(),
    "credit_balance(uuid,text)": set(),
    "credit_billing(uuid,text)": set(),
    "credit_check(uuid,text,integer)": set(),
    "credit_check_for(uuid,text,integer)": set(),
    "credit_live(uuid,text)": set(),
    "credit_meter(uuid,text)": set(),
    "credit_overage_terms(uuid,text)": set(),
    "credit_overage_used(uuid,text,timestamp with time zone)": set(),
    "credit_take(uuid,text,integer,text,text)": set(),
    "credit_take_for(uuid,text,integer,text,text)": set(),
    "credits_held(uuid)": set(),
    "credits_of(text)": {"anon", "authenticated"},
    "credits_answered(text,integer,text,bytea)": set(),
    "credits_keep_answer(text,integer,text,bytea,text)": set(),
    "credits_release_stale(integer)": set(),
    "credits_settle(text,integer)": set(),
    "credits_settle_answered(text,integer,integer,text,bytea)": set(),
    "credits_settle_kept(text,integer,integer,text,bytea,text)": set(),
    "custom_access_token_hook(jsonb)": {HOOK},
    "features_of(uuid)": {HOOK},
    "grant_features(uuid[],text[])": set(),
    "product_features(products)": set(),
    "profile_leaves_teams()": set(),
    "revenue_read(text[],text[])": set(),
    "handle_new_user()": set(),
    "has_access()": {"anon", "authenticated"},
    "has_feature(text)": {"anon", "authenticated"},
    "is_admin()": {"anon", "authenticated"},
    "is_team_member(uuid)": {"authenticated"},
    "team_lock(uuid,uuid[])": set(),
    "team_name_bounded()": set(),
    "team_refresh(uuid)": set(),
    "team_seats(uuid)": set(),
    "teams_refresh()": set(),
    "touch_updated_at()": set(),
}

# Relations and functions of `public` that are ours (not an extension's), and the grants on
# them to anyone but their owner and service_role.
RELATIONS = """
select c.oid, c.relname as name, c.relkind as kind from pg_class c
where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
  and not exists (select 1 from pg_depend d
    where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
"""
ROUTINES = """
select p.oid, p.oid::regprocedure::text as name, p.proowner, p.proacl from pg_proc p
where p.pronamespace = 'public'::regnamespace
  and not exists (select 1 from pg_depend d
    where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
"""
GRANTEE = "case a.grantee when 0 then 'PUBLIC' else pg_get_userbyid(a.grantee) end"
CHECKED = "a.grantee <> {owner} and a.grantee <> 'service_role'::regrole"
TABLE_GRANTS = f"""
with r as ({RELATIONS})
select r.name, {GRANTEE} as grantee, a.privilege_type
from r join pg_class c on c.oid = r.oid cross join lateral aclexplode(c.relacl) a
where {CHECKED.format(owner="c.relowner")}
"""  # noqa: S608 - constants
COLUMN_GRANTS = f"""
with r as ({RELATIONS})
select r.name, att.attname, {GRANTEE} as grantee, a.privilege_type
from r join pg_class c on c.oid = r.oid join pg_attribute att on att.attrelid = c.oid
  cross join lateral aclexplode(att.attacl) a
where {CHECKED.format(owner="c.relowner")}
"""  # noqa: S608 - constants
# A function's ACL is null until first granted or revoked: then it is the default (PUBLIC).
FUNCTION_GRANTS = f"""
with f as ({ROUTINES})
select f.name, {GRANTEE} as grantee
from f cross join lateral aclexplode(coalesce(f.proacl, acldefault('f', f.proowner))) a
where {CHECKED.format(owner="f.proowner")}
"""  # noqa: S608 - constants
EFFECTIVE_EXECUTE = f"""
with f as ({ROUTINES})
select f.name, has_function_privilege(%s, f.oid, 'execute') as allowed from f
"""  # noqa: S608 - constants


def test_every_table_and_sequence_grants_only_what_its_allow_list_says(db: Database) -> None:
    kinds = {r["name"]: r["kind"] for r in db.fetch_all(RELATIONS)}
    held: dict[str, dict[str, set[str]]] = {name: {} for name in kinds}
    for row in db.fetch_all(TABLE_GRANTS):
        held[row["name"]].setdefault(row["grantee"], set()).add(row["privilege_type"])
    # A sequence or a view is the server's alone: the API roles hold nothing on one.
    unlisted = sorted(n for n, kind in kinds.items() if kind in ("r", "p") and n not in TABLES)
    assert not unlisted, (
        f"tables not in the allow-list of {__name__}: {', '.join(unlisted)}; list each with"
        " the privileges its policies need, and grant only those in its migration"
    )
    extra = [
        f"public.{name}: {role} holds {privilege}"
        for name, grants in sorted(held.items())
        for role, privileges in sorted(grants.items())
        for privilege in sorted(privileges - TABLES.get(name, {}).get(role, set()))
    ]
    assert not extra, "beyond the allow-list (revoke in a migration):\n" + "\n".join(extra)
    missing = [
        f"public.{name}: {role} lacks {privilege}"
        for name, grants in sorted(TABLES.items())
        for role, privileges in sorted(grants.items())
        for privilege in sorted(privileges - held.get(name, {}).get(role, set()))
    ]
    assert not missing, "in the allow-list, granted by no migration:\n" + "\n".join(missing)


def test_column_grants_are_the_allow_lists(db: Database) -> None:
    held: dict[tuple[str, str, str], set[str]] = {}
    for row in db.fetch_all(COLUMN_GRANTS):
        key = (row["name"], row["grantee"], row["privilege_type"])
        held.setdefault(key, set()).add(row["attname"])
    assert held == COLUMNS


def test_every_function_is_executable_only_by_its_allow_list(db: Database) -> None:
    held: dict[str, set[str]] = {r["name"]: set() for r in db.fetch_all(ROUTINES)}
    for row in db.fetch_all(FUNCTION_GRANTS):
        held[row["name"]].add(row["grantee"])
    unlisted = sorted(held.keys() - FUNCTIONS.keys())
    assert not unlisted, (
        f"functions not in the allow-list of {__name__}: {', '.join(unlisted)}; revoke execute"
        " from public, anon and authenticated in its migration and grant it where intended"
    )
    wrong = [
        f"public.{name}: {role} {'may execute it' if role in roles else 'may not execute it'}"
        for name, roles in sorted(held.items())
        for role in sorted(roles ^ FUNCTIONS[name])
    ]
    assert not wrong, "EXECUTE against the allow-list:\n" + "\n".join(wrong)


@pytest.mark.parametrize("role", API_ROLES)
def test_every_function_answers_the_api_roles_as_its_allow_list_says(
    db: Database, role: str
) -> None:
    """Effective privileges, PUBLIC's included: what a caller as anon or authenticated gets."""
    wrong = sorted(
        r["name"]
        for r in db.fetch_all(EFFECTIVE_EXECUTE, (role,))
        if r["allowed"] != (role in FUNCTIONS.get(r["name"], set()))
    )
    assert not wrong, f"{role} may or may not execute, against the allow-list: {wrong}"


# The audit log's schema, `audit`: who owns each object in it, and every grant on it to anyone
# but that owner, `service_role` included (supabase/schemas/support.sql says why each is there).
WRITER = "admin_audit_record(uuid,text,text,uuid,text,text,jsonb)"
AUDIT_OWNERS = {
    "schema audit": "admin_audit_owner",
    "table admin_audit": "admin_audit_owner",
    "sequence admin_audit_id_seq": "admin_audit_owner",
    "function admin_audit_refuse_change()": "admin_audit_owner",
    f"function {WRITER}": "admin_audit_writer",
}
AUDIT_GRANTS: dict[str, dict[str, set[str]]] = {
    # The writer's function inserts into the table; service_role reads it and calls the writer.
    "schema audit": {"admin_audit_writer": {"USAGE"}, "service_role": {"USAGE"}},
    "table admin_audit": {"service_role": {"SELECT"}},
    "sequence admin_audit_id_seq": {},
    # Its triggers call it, whoever fires them.
    "function admin_audit_refuse_change()": {},
    f"function {WRITER}": {"service_role": {"EXECUTE"}},
}
# The writer adds a call's own columns (never `id` or `at`, the database's) and reads back the id.
AUDIT_COLUMNS: dict[tuple[str, str, str], set[str]] = {
    ("admin_audit", "admin_audit_writer", "INSERT"): {
        "admin_id", "admin_email", "action", "subject_user_id", "subject", "reason", "request",
    },
    ("admin_audit", "admin_audit_writer", "SELECT"): {"id"},
}  # fmt: skip
AUDIT_OBJECTS = """
select 'schema ' || n.nspname as name, n.nspowner as owner,
  coalesce(n.nspacl, acldefault('n', n.nspowner)) as acl
from pg_namespace n where n.nspname = 'audit'
union all
select case c.relkind when 'S' then 'sequence ' else 'table ' end || c.relname, c.relowner,
  coalesce(c.relacl, acldefault(case c.relkind when 'S' then 's' else 'r' end::"char", c.relowner))
from pg_class c
where c.relnamespace = 'audit'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
union all
select 'function ' || p.proname || '(' || coalesce((select string_agg(format_type(t, null), ','
    order by i) from unnest(p.proargtypes::oid[]) with ordinality as a(t, i)), '') || ')',
  p.proowner, coalesce(p.proacl, acldefault('f', p.proowner))
from pg_proc p where p.pronamespace = 'audit'::regnamespace
"""
AUDIT_OBJECT_OWNERS = f"""
with o as ({AUDIT_OBJECTS}) select o.name, pg_get_userbyid(o.owner) as owner from o
"""  # noqa: S608 - constants
AUDIT_OBJECT_GRANTS = f"""
with o as ({AUDIT_OBJECTS}) select o.name, {GRANTEE} as grantee, a.privilege_type
from o cross join lateral aclexplode(o.acl) a where a.grantee <> o.owner
"""  # noqa: S608 - constants


def test_the_audit_schema_is_its_owners_and_grants_only_what_its_allow_list_says(
    db: Database,
) -> None:
    owners = {r["name"]: r["owner"] for r in db.fetch_all(AUDIT_OBJECT_OWNERS)}
    assert owners == AUDIT_OWNERS
    held: dict[str, dict[str, set[str]]] = {name: {} for name in owners}
    for row in db.fetch_all(AUDIT_OBJECT_GRANTS):
        held[row["name"]].setdefault(row["grantee"], set()).add(row["privilege_type"])
    assert held == AUDIT_GRANTS
    columns: dict[tuple[str, str, str], set[str]] = {}
    for row in db.fetch_all(
        "select c.relname, att.attname, pg_get_userbyid(a.grantee) as grantee, a.privilege_type"
        " from pg_class c join pg_attribute att on att.attrelid = c.oid"
        " cross join lateral aclexplode(att.attacl) a"
        " where c.relnamespace = 'audit'::regnamespace"
    ):
        key = (row["relname"], row["grantee"], row["privilege_type"])
        columns.setdefault(key, set()).add(row["attname"])
    assert columns == AUDIT_COLUMNS
    # Nobody who logs in owns it: not the role that migrates and serves the app.
    [login] = db.fetch_all(
        "select bool_or(rolcanlogin) as any from pg_roles where rolname = any(%s)",
        (list(set(AUDIT_OWNERS.values())),),
    )
    assert login["any"] is False


@pytest.mark.parametrize("role", API_ROLES)
def test_the_api_roles_reach_nothing_in_the_audit_schema(db: Database, role: str) -> None:
    [held] = db.fetch_all(
        "select has_schema_privilege(%(r)s, 'audit', 'usage, create') as schema,"
        " (select bool_or(has_table_privilege(%(r)s, c.oid,"
        "   'select, insert, update, delete, truncate, references, trigger')"
        "   or has_any_column_privilege(%(r)s, c.oid, 'select, insert, update, references'))"
        "  from pg_class c where c.relnamespace = 'audit'::regnamespace"
        "   and c.relkind in ('r', 'p', 'v', 'm', 'f')) as tables,"
        " (select bool_or(has_sequence_privilege(%(r)s, c.oid, 'usage, select, update'))"
        "  from pg_class c where c.relnamespace = 'audit'::regnamespace and c.relkind = 'S')"
        "  as sequences,"
        " (select bool_or(has_function_privilege(%(r)s, p.oid, 'execute'))"
        "  from pg_proc p where p.pronamespace = 'audit'::regnamespace) as functions",
        {"r": role},
    )
    assert held == {"schema": False, "tables": False, "sequences": False, "functions": False}
    for statement in (
        "select * from audit.admin_audit",
        "insert into audit.admin_audit (admin_id, action) values (gen_random_uuid(), 'x')",
        "delete from audit.admin_audit",
        "truncate audit.admin_audit",
        "select audit.admin_audit_record(gen_random_uuid(), null, 'x', null, null, null,"
        " '{}'::jsonb)",
        "create table audit.decoy (id int)",
    ):
        with (
            as_role(db, role) as conn,
            pytest.raises(
                psycopg.errors.InsufficientPrivilege, match="permission denied for schema audit"
            ),
        ):
            conn.execute(statement)


def test_the_rows_written_before_the_audit_log_moved_are_kept_append_only(
    tmp_path: Path, database_url: str
) -> None:
    """The move to `audit` keeps every row (and its id and time), the triggers and the writer."""
    before = tmp_path / "migrations"
    before.mkdir()
    for m in migrations.available():
        if m.version < "20261208060000":
            (before / m.path.name).write_text(m.path.read_text())
    with empty_database(database_url) as url:
        migrations.apply_all(url, allow_auth_stand_in=True, directory=before)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "select public.admin_audit_record(gen_random_uuid(), null, 'before the move',"
                " null, null, 'r', '{}'::jsonb)"
            )
            [(old, at)] = conn.execute("select id, at from public.admin_audit").fetchall()
        migrations.apply_all(url, allow_auth_stand_in=True)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute(
                "select id, at, action from audit.admin_audit order by id"
            ).fetchall() == [(old, at, "before the move")]
            [(new,)] = conn.execute(
                "select audit.admin_audit_record(gen_random_uuid(), null, 'after', null, null,"
                " 'r', '{}'::jsonb)"
            ).fetchall()
            assert new > old
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute("delete from audit.admin_audit where id = %s", (old,))


def test_the_data_api_does_not_serve_the_audit_schema() -> None:
    """PostgREST serves only the schemas `[api] schemas` lists (on the hosted project, the
    dashboard's exposed schemas, docs/support.md), and finds functions through
    `extra_search_path`; `audit` is in neither."""
    api = tomllib.loads((migrations.ROOT / "config.toml").read_text()).get("api", {})
    # The Supabase CLI's defaults, where the file does not set them.
    assert "audit" not in api.get("schemas", ["public", "graphql_public"])
    assert "audit" not in api.get("extra_search_path", ["public", "extensions"])


def statements(db: Database) -> dict[str, list[sql.Composed]]:
    """For every table in `public`, a statement per privilege that row-level security does not
    guard, or guards only through a policy: each is refused before it touches a row when the
    role lacks the privilege."""
    found = {}
    for row in db.fetch_all(
        f"with r as ({RELATIONS}) select r.name, a.attname from r"  # noqa: S608 - constants
        " join pg_attribute a on a.attrelid = r.oid and a.attnum = 1"
        " where r.kind in ('r', 'p') order by r.name"
    ):
        table, column = sql.Identifier("public", row["name"]), sql.Identifier(row["attname"])
        found[row["name"]] = [
            sql.SQL("truncate {} cascade").format(table),
            sql.SQL("insert into {} default values").format(table),
            sql.SQL("update {} set {} = default").format(table, column),
            sql.SQL("delete from {}").format(table),
            # Locking a table against everyone takes UPDATE, DELETE, TRUNCATE or MAINTAIN.
            sql.SQL("lock table {} in access exclusive mode").format(table),
        ]
    return found


@pytest.mark.parametrize("role", API_ROLES)
def test_the_api_roles_cannot_truncate_write_or_lock_any_table(db: Database, role: str) -> None:
    allowed_anywhere = {p for grants in TABLES.values() for p in grants.get(role, set())}
    assert allowed_anywhere <= {"SELECT"}  # no policy lets these roles write, today
    tried = statements(db)
    assert tried.keys() >= TABLES.keys()  # the catalog is read, every table of it
    accepted = []
    for statement in (s for table in sorted(tried) for s in tried[table]):
        with as_role(db, role) as conn:
            try:
                conn.execute(statement)
            except psycopg.errors.InsufficientPrivilege as refused:
                # The grant must refuse it; a row-level security check refuses some inserts too.
                if str(refused).startswith("permission denied for"):
                    continue
            accepted.append(statement.as_string(conn))
    assert not accepted, f"{role} may run:\n" + "\n".join(accepted)


@pytest.mark.parametrize("role", API_ROLES)
def test_the_api_roles_cannot_draw_from_a_sequence(db: Database, role: str) -> None:
    sequences = [r["name"] for r in db.fetch_all(RELATIONS) if r["kind"] == "S"]
    assert sequences  # team_seat_changes' identity, at least
    for sequence in sequences:
        with (
            as_role(db, role) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match=sequence),
        ):
            conn.execute("select nextval(%s)", (f"public.{sequence}",))


def test_what_the_migrations_create_later_grants_the_api_roles_nothing(db: Database) -> None:
    """Supabase's default privileges would grant them everything on a new table, sequence and
    function; the migrations' role's defaults no longer do, so each grants its own."""
    with db.pool.connection() as conn, conn.transaction(force_rollback=True):
        conn.execute(
            "create table public.later (id bigint generated always as identity primary key,"
            " body text)"
        )
        conn.execute(
            "create function public.later_count() returns bigint language sql"
            " as $$ select count(*) from public.later $$"
        )
        for role in API_ROLES:
            [row] = conn.execute(
                "select has_table_privilege(%(r)s, 'public.later',"
                " 'select, insert, update, delete, truncate, references, trigger') as on_table,"
                " has_sequence_privilege(%(r)s, 'public.later_id_seq', 'usage, select, update')"
                " as on_sequence,"
                " has_function_privilege(%(r)s, 'public.later_count()', 'execute') as on_function",
                {"r": role},
            ).fetchall()
            assert row == {"on_table": False, "on_sequence": False, "on_function": False}, role


def test_supabases_defaults_without_the_migration_would_hand_out_truncate(
    tmp_path: Path, database_url: str
) -> None:
    """The local stand-in grants what Supabase grants, so the tests above prove something: the
    migrations before least privilege leave anon able to truncate a profile table."""
    before = tmp_path / "migrations"
    before.mkdir()
    for m in migrations.available():
        if m.version < "20261201020000":
            (before / m.path.name).write_text(m.path.read_text())
    with empty_database(database_url) as url:
        migrations.apply_all(url, allow_auth_stand_in=True, directory=before)
        with psycopg.connect(url) as conn:
            [row] = conn.execute(
                "select has_table_privilege('anon', 'public.profiles', 'truncate'),"
                " has_table_privilege('authenticated', 'public.leads', 'insert'),"
                " has_function_privilege('anon', 'public.handle_new_user()', 'execute')"
            ).fetchall()
    assert row == (True, True, True)


@contextmanager
def as_supabase_postgres(database_url: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """A database whose migrations a role like Supabase's `postgres` applied (no superuser; it
    creates roles, bypasses row-level security and holds the API roles), connected as that
    role, as the app connects at run time: one `DATABASE_URL` serves both."""
    role = f"supabase_postgres_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as server:
        server.execute(
            sql.SQL("create role {} login password 'local' createrole bypassrls").format(
                sql.Identifier(role)
            )
        )
        try:
            with empty_database(database_url) as url:
                server.execute(sql.SQL(STAND_IN_ROLES))
                server.execute(
                    sql.SQL(
                        "grant anon, authenticated, service_role to {role};"
                        # It owns the project's database, and so its `public` schema.
                        " alter database {db} owner to {role};"
                        # On Supabase this role creates the audit log's roles, and so
                        # administers them; here an earlier database of this server made them.
                        " grant admin_audit_owner, admin_audit_writer to {role}"
                        "   with admin true, inherit false, set false"
                    ).format(
                        role=sql.Identifier(role),
                        db=sql.Identifier(str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])),
                    )
                )
                runtime = psycopg.conninfo.make_conninfo(url, user=role, password="local")
                migrations.apply_all(runtime, allow_auth_stand_in=True)
                with psycopg.connect(runtime, autocommit=True) as conn:
                    yield conn
        finally:
            server.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


STAND_IN_ROLES = """
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'admin_audit_owner') then
    create role admin_audit_owner nologin;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'admin_audit_writer') then
    create role admin_audit_writer nologin;
  end if;
end
$$
"""


def test_the_role_that_migrates_and_runs_the_app_cannot_silence_the_audit_log(
    database_url: str,
) -> None:
    """The audit log belongs to a role no one logs in as: the role that applied the schema and
    serves the app (Supabase's `postgres`) cannot turn its append-only trigger off, rewrite the
    trigger's function, backdate a row or change one; it appends through
    `admin_audit_record` alone, at the database's time."""
    with as_supabase_postgres(database_url) as conn:
        [owner] = conn.execute(
            "select pg_get_userbyid(c.relowner), r.rolcanlogin from pg_class c"
            " join pg_roles r on r.oid = c.relowner where c.oid = 'audit.admin_audit'::regclass"
        ).fetchall()
        assert owner == ("admin_audit_owner", False)
        for statement in (
            "alter table audit.admin_audit disable trigger admin_audit_append_only",
            "alter table audit.admin_audit disable trigger all",
            "drop trigger admin_audit_append_only on audit.admin_audit",
            "create or replace function audit.admin_audit_refuse_change() returns trigger"
            " language plpgsql as $$ begin return old; end $$",
            "alter table audit.admin_audit alter column at drop default",
            "insert into audit.admin_audit (admin_id, action, at)"
            " values (gen_random_uuid(), 'forged', now() - interval '1 year')",
            "update audit.admin_audit set reason = 'changed'",
            "delete from audit.admin_audit",
            "set role admin_audit_owner",
            "set role admin_audit_writer",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)
        with conn.transaction():
            [(row,)] = conn.execute(
                "select audit.admin_audit_record(gen_random_uuid(), null, 'kept', null, null,"
                " 'r', '{}'::jsonb)"
            ).fetchall()
            [(at_now,)] = conn.execute(
                "select at = now() from audit.admin_audit where id = %s", (row,)
            ).fetchall()
        assert at_now is True


def test_the_owner_of_the_public_schema_cannot_drop_the_audit_logs_trigger_or_its_writer(
    database_url: str,
) -> None:
    """Without granting itself any role, the role that migrates and serves the app owns the
    `public` schema, where a schema's owner may drop anything: the audit log lives in `audit`,
    which it does not own and may create nothing in. It must not turn the append-only trigger
    off by dropping its function with what depends on it, swap `admin_audit_record` for one that
    records nothing, drop the table or the schema, nor move any of them where it may."""
    with as_supabase_postgres(database_url) as conn:
        [(schema_owner, in_public)] = conn.execute(
            "select pg_get_userbyid(nspowner), to_regclass('public.admin_audit') is not null"
            " or to_regprocedure('public.admin_audit_record(uuid, text, text, uuid, text, text,"
            " jsonb)') is not null or to_regprocedure('public.admin_audit_refuse_change()')"
            " is not null from pg_namespace where nspname = 'audit'"
        ).fetchall()
        assert (schema_owner, in_public) == ("admin_audit_owner", False)
        writer = "audit.admin_audit_record(uuid, text, text, uuid, text, text, jsonb)"
        for statement in (
            "drop function audit.admin_audit_refuse_change() cascade",
            f"drop function {writer}",
            f"create or replace function {writer} returns bigint language sql"
            " as $$ select 0::bigint $$",
            "create function audit.admin_audit_record(p uuid) returns bigint language sql"
            " as $$ select 0::bigint $$",
            "drop table audit.admin_audit",
            "drop table audit.admin_audit cascade",
            "drop schema audit cascade",
            "alter schema audit rename to audit_gone",
            "alter schema audit owner to current_user",
            "alter table audit.admin_audit set schema public",
            "alter function audit.admin_audit_refuse_change() set schema public",
            f"alter function {writer} set schema public",
            "create table audit.decoy (id int)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)
        # And it still appends, through the writer, as the app does.
        with conn.transaction():
            [(row,)] = conn.execute(
                "select audit.admin_audit_record(gen_random_uuid(), null, 'kept', null, null,"
                " 'r', '{}'::jsonb)"
            ).fetchall()
            assert conn.execute(
                "select count(*) from audit.admin_audit where id = %s", (row,)
            ).fetchall() == [(1,)]
