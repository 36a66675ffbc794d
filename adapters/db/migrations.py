"""Apply `supabase/migrations/*.sql` once each, recorded where the Supabase CLI records them."""

from __future__ import annotations

import logging
import re
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


# Expand, then contract (docs/deploy.md): during a release the old revision still serves
# while the new schema is in place, so a migration may only add. A statement that takes away or
# renames what running code may read is a contract step, allowed only under a
# `-- contract: <why nothing reads it any more>` comment, in a release after the code that
# stopped reading it.
_DESTRUCTIVE = re.compile(
    r"\b(drop\s+(table|column|view|function|type|schema|index)|rename\s+(column|to)|"
    r"alter\s+column\s+\w+\s+(type|set\s+not\s+null))\b",
    re.IGNORECASE,
)
_CONTRACT = re.compile(r"^\s*--\s*contract:\s*\S", re.IGNORECASE)


class UnsafeMigration(ValueError):
    """A migration takes away what the revision still serving may read, unmarked."""


def unmarked_contractions(sql: str) -> list[str]:
    """The destructive statements of `sql` that no `-- contract:` comment right above allows."""
    found = []
    marked = False
    for line in sql.splitlines():
        if _CONTRACT.match(line):
            marked = True
            continue
        code = line.split("--", 1)[0]
        if _DESTRUCTIVE.search(code) and not marked:
            found.append(line.strip())
        if code.rstrip().endswith(";"):
            marked = False  # a marker covers one statement
    return found


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


def apply_all(
    url: str, *, allow_auth_stand_in: bool, directory: Path = MIGRATIONS_DIR
) -> list[str]:
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
        pending = [m for m in available(directory) if m.version not in done]
        for migration in pending:
            if unsafe := unmarked_contractions(migration.path.read_text()):
                raise UnsafeMigration(
                    f"{migration.path.name} takes away what the running release may read"
                    f" ({'; '.join(unsafe)}); add it later, under `-- contract: <why>`"
                    " (docs/deploy.md, expand then contract)"
                )
        for migration in pending:
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
