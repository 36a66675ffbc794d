"""The pool works behind a transaction pooler: nothing lives in the session between transactions."""

from __future__ import annotations

from adapters.db.pool import Database


def test_repeated_queries_prepare_no_server_side_statements(db: Database) -> None:
    with db.pool.connection() as conn:
        for _ in range(20):  # psycopg would prepare a query after its 5th run
            conn.execute("select count(*) from public.profiles where id = %s", (None,))
        prepared = conn.execute("select count(*) as n from pg_prepared_statements").fetchone()
    assert prepared == {"n": 0}
