"""Apply `supabase/migrations/*.sql` once each, recorded where the Supabase CLI records them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import psycopg

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2] / "supabase"
MIGRATIONS_DIR = ROOT / "migrations"
AUTH_STAND_IN = ROOT / "local" / "auth_stand_in.sql"
# Any constant works; it serialises concurrent migrators (two instances starting at once).
LOCK_KEY = 7_240_118_321

BOOKKEEPING = """
create schema if not exists supabase_migrations;
create table if not exists supabase_migrations.schema_migrations (
  version text primary key,
  statements text[],
  name text
);
"""


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    path: Path


def available(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migration files, oldest first."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        version, _, name = path.stem.partition("_")
        found.append(Migration(version=version, name=name, path=path))
    return found


def apply_all(url: str, *, allow_auth_stand_in: bool) -> list[str]:
    """Apply what is not applied yet; returns the versions applied now."""
    applied_now: list[str] = []
    with psycopg.connect(url, autocommit=False) as conn, conn.transaction():
        conn.execute("select pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute(BOOKKEEPING)
        if allow_auth_stand_in and not _has_auth_schema(conn):
            log.info("no auth schema: installing the local stand-in for Supabase's")
            conn.execute(AUTH_STAND_IN.read_text())
        done = {
            row[0]
            for row in conn.execute("select version from supabase_migrations.schema_migrations")
        }
        for migration in available():
            if migration.version in done:
                continue
            log.info("applying migration %s_%s", migration.version, migration.name)
            sql = migration.path.read_text()
            conn.execute(sql.encode())
            conn.execute(
                "insert into supabase_migrations.schema_migrations (version, statements, name)"
                " values (%s, %s, %s)",
                (migration.version, [sql], migration.name),
            )
            applied_now.append(migration.version)
    return applied_now


def _has_auth_schema(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = conn.execute("select to_regclass('auth.users') is not null").fetchone()
    return bool(row and row[0])
