"""Postgres access: one lazily opened connection pool, transactions as context managers."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

Connection = psycopg.Connection[DictRow]
T = TypeVar("T")
# A connection that answered within this many seconds is handed out without a check (a round
# trip to Supabase); an older one is checked first, so a Postgres restart while the
# pool was idle costs no request.
FRESH_SECONDS = 5.0


@dataclass(frozen=True)
class Statement:
    query: str
    params: Any = None


# Server errors that end the connection, not the statement: the administrator's (a restart)
# and class 08, connection exceptions.
_LOST = frozenset({"57P01", "57P02", "57P03"})


def _connection_lost(exc: psycopg.OperationalError) -> bool:
    """Whether the error says the connection is gone (client-side errors carry no SQLSTATE)."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _LOST


class _LastUse:
    """When each pooled connection last answered, so a fresh one skips the pool's check."""

    def __init__(self) -> None:
        self._at: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def touch(self, conn: Connection) -> None:
        with self._lock:
            self._at[conn] = time.monotonic()

    def check(self, conn: Connection) -> None:
        with self._lock:
            used = self._at.get(conn)
        if used is None or time.monotonic() - used > FRESH_SECONDS:
            ConnectionPool.check_connection(conn)


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
        self._timeout_ms = int(statement_timeout * 1000)
        self._begin = f"BEGIN; SET LOCAL statement_timeout = {self._timeout_ms}"
        self._last_use = _LastUse()
        self._pool: ConnectionPool[Connection] | None = None
        self._lock = threading.Lock()

    @property
    def max_size(self) -> int:
        """The most connections the pool holds at once."""
        return self._max_size

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
                    # before a request gets it, instead of failing that request; one used
                    # moments ago is not checked again (FRESH_SECONDS).
                    check=self._last_use.check,
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
            with self._begun(lambda conn: conn.execute(self._begin)) as (conn, _):
                try:
                    yield conn
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()
                self._last_use.touch(conn)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    def read_then_write(
        self,
        read: Statement,
        decide: Callable[[dict[str, Any] | None], tuple[T, Sequence[Statement]]],
    ) -> T:
        """One transaction in two round trips: BEGIN, the statement timeout and `read` go out
        together; `decide` turns read's first row into a result and the writes, which go out
        with COMMIT. Meant for a single statement each way (each round trip to a database an
        internet hop away costs more than the statements do)."""

        def first_trip(conn: Connection) -> dict[str, Any] | None:
            with conn.pipeline():
                self._open(conn)
                cursor = conn.execute(read.query, read.params)
            return cursor.fetchone()

        try:
            with self._begun(first_trip) as (conn, row):
                try:
                    result, writes = decide(row)
                    with conn.pipeline():
                        for write in writes:
                            conn.execute(write.query, write.params)
                        conn.execute("COMMIT")
                except BaseException:
                    conn.rollback()
                    raise
                self._last_use.touch(conn)
                return result
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    @contextmanager
    def _begun(self, begin: Callable[[Connection], T]) -> Iterator[tuple[Connection, T]]:
        """A pooled connection on which `begin`, the transaction's first round trip, went
        through. A connection handed out unchecked (used moments ago) may have died since (a
        Postgres restart): it is dropped and the next one tried. `begin` must be safe to run
        again: it commits nothing, or only what a second run leaves as it is."""
        for _ in range(self._max_size + 1):
            conn = self.pool.getconn(timeout=self._timeout)
            try:
                first = begin(conn)
            except psycopg.OperationalError as exc:
                if not _connection_lost(exc):
                    self.pool.putconn(conn)
                    raise  # the statement's own failure (a timeout): another try is no better
                # Killed mid-pipeline, psycopg may not mark it broken yet ("cannot exit
                # pipeline mode while busy"): closed here, the pool drops it.
                conn.close()
                self.pool.putconn(conn)
                continue
            except BaseException:
                self.pool.putconn(conn)
                raise
            try:
                yield conn, first
            finally:
                self.pool.putconn(conn)
            return
        raise psycopg.OperationalError("every pooled connection was broken")

    def fetch_all(self, query: str, params: Any = None) -> list[dict[str, Any]]:
        """The rows of one read, in one round trip (with BEGIN, the timeout and COMMIT)."""
        [rows] = self.run([Statement(query, params)])
        return rows

    def run(self, statements: Sequence[Statement]) -> list[list[dict[str, Any]]]:
        """A transaction of statements that need no answer from one another, in one round trip:
        BEGIN, the timeout, the statements and COMMIT go out together; each one's rows come
        back. The statements must be repeatable (a read, or writes whose second run changes
        nothing more): on a connection found broken, as one handed out unchecked may be, the
        whole is sent again on another, though the first may have committed."""

        def whole(conn: Connection) -> list[list[dict[str, Any]]]:
            cursors = []
            with conn.pipeline():
                self._open(conn)
                for statement in statements:
                    cursor = conn.cursor()
                    cursor.execute(statement.query, statement.params)
                    cursors.append(cursor)
                conn.execute("COMMIT")
            return [c.fetchall() if c.description else [] for c in cursors]

        try:
            with self._begun(whole) as (conn, rows):
                self._last_use.touch(conn)
                return rows
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise DatabaseUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    def _open(self, conn: Connection) -> None:
        """BEGIN and the statement timeout, queued in the caller's pipeline."""
        conn.execute("BEGIN")
        conn.execute(f"SET LOCAL statement_timeout = {self._timeout_ms}")

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
