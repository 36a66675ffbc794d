"""Postgres access: one lazily opened connection pool, transactions as context managers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

Connection = psycopg.Connection[DictRow]


class DatabaseUnavailable(RuntimeError):
    """Postgres cannot be reached or dropped the connection: the same work may succeed later."""


class Database:
    """A pool opened on first use, so importing and building the app dials nothing."""

    def __init__(
        self,
        conninfo: Callable[[], str],
        *,
        max_size: int = 10,
        timeout: float = 5.0,
        connect_timeout: int = 5,
        statement_timeout: float = 15.0,
    ) -> None:
        self._conninfo = conninfo
        self._max_size = max_size
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        # Each transaction opens with its own statement timeout, in the same round trip as its
        # BEGIN: a transaction pooler (Supavisor, PgBouncer) refuses a startup `options`
        # parameter and hands a session-level SET to whichever client gets that server
        # connection next, while SET LOCAL ends with the transaction.
        self._begin = f"BEGIN; SET LOCAL statement_timeout = {int(statement_timeout * 1000)}"
        self._pool: ConnectionPool[Connection] | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> ConnectionPool[Connection]:
        with self._lock:
            if self._pool is None:
                pool: ConnectionPool[Connection] = ConnectionPool(
                    self._conninfo(),
                    min_size=1,
                    max_size=self._max_size,
                    # No server-side prepared statements: Supabase's transaction pooler
                    # (port 6543) hands each transaction to any server connection, where a
                    # statement prepared on another one does not exist.
                    # Autocommit: `transaction` sends BEGIN itself, with the timeout.
                    kwargs={
                        "row_factory": dict_row,
                        "autocommit": True,
                        "prepare_threshold": None,
                        "connect_timeout": self._connect_timeout,
                    },
                    open=False,
                    name="app",
                    # A connection that died while idle (Postgres restarted) is replaced
                    # before a request gets it, instead of failing that request.
                    check=ConnectionPool.check_connection,
                )
                # Not waiting: a database that is down fails requests fast, not start-up.
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    @property
    def url(self) -> str:
        return self._conninfo()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection inside one transaction: committed on success, rolled back on error.

        Raises DatabaseUnavailable when Postgres is down or the connection breaks.
        """
        try:
            with self.pool.connection(timeout=self._timeout) as conn:
                conn.execute(self._begin)
                try:
                    yield conn
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    def fetch_all(self, query: str, params: Any = None) -> list[dict[str, Any]]:
        with self.transaction() as conn:
            return conn.execute(query, params).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
