"""The schema has one home: `supabase/schemas/` declares the current definition of every object
once, and the migrations, which a deployed database applies, build exactly that."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from adapters.db import migrations
from tests.adapters.db import catalog
from tests.helpers import empty_database

SUPABASE = migrations.ROOT
SCHEMAS = SUPABASE / "schemas"
ROOT = SUPABASE.parent


def schema_files() -> list[Path]:
    """The schema files in the order the Supabase CLI applies them: `[db.migrations]
    schema_paths` of supabase/config.toml (paths or globs, relative to supabase/)."""
    config = tomllib.loads((SUPABASE / "config.toml").read_text())
    ordered: list[Path] = []
    for pattern in config["db"]["migrations"]["schema_paths"]:
        for path in sorted(SUPABASE.glob(pattern.removeprefix("./"))):
            if path not in ordered:
                ordered.append(path)
    return ordered


def declare(url: str) -> None:
    """Build the database the way `supabase db diff` builds its declared side: Supabase's own
    schema first (here its local stand-in, as the migrator installs it), then the files."""
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute(migrations.AUTH_STAND_IN.read_text().encode())
        for path in schema_files():
            try:
                conn.execute(path.read_text().encode())
            except psycopg.Error as exc:
                raise AssertionError(f"{path.relative_to(ROOT)} does not apply: {exc}") from exc


@pytest.fixture(scope="module")
def catalogs(database_url: str) -> tuple[catalog.Catalog, catalog.Catalog]:
    """What the migrations build and what the schema files declare, each on an empty database."""
    with empty_database(database_url) as migrated, empty_database(database_url) as declared:
        migrations.apply_all(migrated, allow_auth_stand_in=True)
        declare(declared)
        return catalog.read(migrated), catalog.read(declared)


def test_the_schema_files_declare_what_the_migrations_build(
    catalogs: tuple[catalog.Catalog, catalog.Catalog],
) -> None:
    migrated, declared = catalogs
    told = catalog.drift(migrated, declared, schema_files(), ROOT)
    assert not told, (
        f"{len(told)} difference(s) between supabase/migrations/ and supabase/schemas/"
        " (docs/database.md, 'Changing the schema'):\n\n" + "\n\n".join(told)
    )


def test_the_comparison_sees_what_it_compares(
    catalogs: tuple[catalog.Catalog, catalog.Catalog],
) -> None:
    """Each kind of object is read (a reader that finds nothing would compare nothing)."""
    migrated, _ = catalogs
    kinds = Counter(entry.kind for entry in migrated.values())
    for kind in (
        "table",
        "row level security of",
        "column",
        "constraint",
        "index",
        "function",
        "grants on function",
        "grants on table",
        "grants on column",
        "grants on sequence",
        "grants on schema",
        "trigger",
        "policy",
        "sequence",
        "default privileges",
    ):
        assert kinds[kind] > 0, kind
    access_claim = migrated[
        "function public.access_claim(text,text[],text[],timestamp with time zone[],jsonb)"
    ]
    assert "order by a.kind <> 'team', a.id" in access_claim.text
    assert (
        "supabase_auth_admin: EXECUTE"
        in migrated["grants on function " + ("public.custom_access_token_hook(jsonb)")].text
    )


# A later migration, as the schema files have not followed it yet.
LATER_MIGRATION = """
create table public.coupons (
  code text primary key,
  account_id uuid not null references public.accounts (id)
);
create policy "teams: owners rename" on public.teams for update to authenticated using (false);
alter table public.teams add constraint teams_name_trimmed check (name = btrim(name));
revoke select on public.team_members from authenticated;
create or replace function public.team_seats(p_team uuid) returns integer
language sql
stable
set search_path = ''
as $$
  select 1
$$;
"""


def test_a_drift_names_the_object_and_the_file_to_change(
    database_url: str, catalogs: tuple[catalog.Catalog, catalog.Catalog]
) -> None:
    _, declared = catalogs
    with empty_database(database_url) as url:
        migrations.apply_all(url, allow_auth_stand_in=True)
        with psycopg.connect(url) as conn:
            conn.execute(LATER_MIGRATION.encode())
        later = catalog.read(url)

    told = catalog.drift(later, declared, schema_files(), ROOT)

    by_object = {paragraph.partition(":")[0]: paragraph for paragraph in told}
    assert by_object["table public.coupons"].startswith(
        "table public.coupons: the migrations make it, supabase/schemas/ does not"
        " declare it.\n  Declare it in the file of its concern in supabase/schemas/ (none names"
        " public.coupons yet; a new file is listed in supabase/config.toml):"
    )
    assert (
        "    create table public.coupons (\n"
        "      code text not null,\n"
        "      account_id uuid not null,\n"
        "      constraint coupons_account_id_fkey FOREIGN KEY (account_id)"
        " REFERENCES public.accounts(id),\n"
        "      constraint coupons_pkey PRIMARY KEY (code)\n"
        "    );\n"
        "    alter table public.coupons disable row level security;\n"
        "    -- grants on table public.coupons: postgres: "
    ) in by_object["table public.coupons"]
    policy = by_object['policy "teams']
    assert "Declare it in supabase/schemas/teams.sql:" in policy
    assert 'create policy "teams: owners rename" on public.teams' in policy
    constraint = by_object["constraint public.teams.teams_name_trimmed"]
    assert "Declare it in supabase/schemas/teams.sql:" in constraint
    assert "alter table public.teams add constraint teams_name_trimmed CHECK" in constraint
    grants = by_object["grants on table public.team_members"]
    assert "differs; declared in supabase/schemas/teams.sql" in grants
    assert "+authenticated: SELECT" in grants
    assert "grant select on table public.team_members to authenticated;" in grants
    function = by_object["function public.team_seats(uuid)"]
    assert "differs; declared in supabase/schemas/teams.sql" in function
    assert "-  select 1" in function
    assert "+    select coalesce(t.quantity, 1) as seats from public.teams t" in function
    assert len(told) == 5, "\n\n".join(told)


def test_every_object_is_defined_in_exactly_one_schema_file(
    catalogs: tuple[catalog.Catalog, catalog.Catalog],
) -> None:
    _, declared = catalogs
    files = schema_files()
    defined = {
        entry.key: [str(p.relative_to(ROOT)) for p in catalog.home(entry.anchor, files)]
        for entry in declared.values()
        if entry.kind in ("function", "table", "view", "materialized view")
        and not entry.name.startswith("auth.")
    }
    assert {key: found for key, found in defined.items() if len(found) != 1} == {}
    for path in files:
        text = catalog.strip_comments(path.read_text())
        for pattern in (
            r"create\s+(?:or\s+replace\s+)?function\s+([\w.]+)\s*\(",
            r"create\s+table\s+([\w.]+)",
            r"create\s+policy\s+(\"[^\"]+\"\s+on\s+[\w.]+)",
            r"create\s+trigger\s+(\w+\s+.*?\s+on\s+[\w.]+)",
        ):
            names = Counter(
                " ".join(m.split()) for m in re.findall(pattern, text, re.IGNORECASE | re.DOTALL)
            )
            assert [n for n, count in names.items() if count > 1] == [], path.name


def test_every_schema_file_is_applied_in_the_configured_order() -> None:
    unlisted = sorted(p.name for p in set(SCHEMAS.glob("*.sql")) - set(schema_files()))
    assert unlisted == [], "add them to [db.migrations] schema_paths in supabase/config.toml"
