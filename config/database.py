"""Postgres: where it is, how many connections a process holds, how long a statement may run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict
from pydantic import Field, SecretStr

from config.checks import Group
from config.environment import Environment

if TYPE_CHECKING:
    from config.settings import Settings


class DatabaseSettings(Environment):
    # Unset: `make run`, `make demo` and the tests start an embedded Postgres under DATA_DIR.
    database_url: SecretStr | None = None
    # Connections each process's pool may hold. Summed over every process of every service, they
    # must stay under the Postgres pooler's client limit (docs/capacity.md). Fewer than the
    # process's threads is fine: a request then waits for a connection, 5 s at most.
    database_pool_size: int = Field(default=10, ge=1, le=100)
    # Seconds to open a connection (Supabase is an internet hop away), and the longest any one
    # statement may run (each transaction sets it: SET LOCAL works through transaction poolers).
    database_connect_timeout: int = Field(default=5, ge=1, le=60)
    database_statement_timeout: float = Field(default=15.0, gt=0, le=300)
    # Where local state lives (the embedded Postgres), for `make run`, the tests and the tools.
    data_dir: Path = Path(".data")


# sslmode values that make libpq refuse a connection without TLS.
TLS_SSLMODES = frozenset({"require", "verify-ca", "verify-full"})


def database_url_problem(url: str) -> str | None:
    """Why production must not use this Postgres URL, or None.

    Supabase's session pooler (port 5432 on *.pooler.supabase.com) caps all clients together at
    the project's pool size; the transaction pooler (6543) is what the pool sizes are planned
    for (docs/capacity.md). Traffic from Cloud Run to Supabase crosses the internet: TLS is
    required, except to a database on this machine (a Unix socket or loopback).
    """
    try:
        params = conninfo_to_dict(url)
    except ProgrammingError as exc:
        return f"not a Postgres connection string ({exc})"
    hosts = [h for h in str(params.get("host") or "").split(",") if h]
    ports = [p for p in str(params.get("port") or "5432").split(",") if p]
    for host, port in zip(hosts, ports * len(hosts), strict=False):
        if host.endswith(".pooler.supabase.com") and port == "5432":
            return (
                "it names Supabase's session pooler (port 5432), which caps every instance"
                " together at the project's pool size; use the Transaction pooler's string"
                " (port 6543) from the dashboard's Connect panel"
            )
    local = all(h.startswith("/") or h in {"localhost", "127.0.0.1", "::1"} for h in hosts)
    if hosts and not local and params.get("sslmode") not in TLS_SSLMODES:
        return (
            "the connection may go unencrypted over the internet; add sslmode=require (or"
            " sslmode=verify-full with sslrootcert=<Supabase's CA>, docs/deploy.md)"
        )
    return None


def problems(s: Settings) -> Iterator[str]:
    if s.is_production and s.database_url is not None:
        problem = database_url_problem(s.database_url.get_secret_value())
        if problem:
            yield f"APP_ENV=production refuses DATABASE_URL: {problem}"


GROUP = Group(
    fields=DatabaseSettings,
    required={target: ("database_url",) for target in ("api", "access", "emails")},
    # The examples in .env.example and the docs, and the local Supabase stack's database.
    public_values=frozenset(
        {
            "postgresql://postgres.ref:password@aws-0-eu-west-1.pooler.supabase.com:5432/postgres",
            "postgresql://postgres.ref:password@aws-0-eu-west-1.pooler.supabase.com:6543/postgres"
            "?sslmode=require",
            "postgresql://postgres:postgres@127.0.0.1:54322/postgres",
        }
    ),
    problems=problems,
)
