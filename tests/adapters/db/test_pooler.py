"""Postgres as Supabase serves it: through a transaction pooler, over TLS, a few server
connections shared by every client (tests/pooler.py: PgBouncer as Supavisor's stand-in)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from adapters.db.pool import Database, DatabaseUnavailable
from dev.samples.catalogue import seed_demo_products
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, postgres_home, stripe_event, wait_for
from tests.pooler import Pooler, authority, running


@pytest.fixture(scope="module")
def pooler(database_url: str) -> Iterator[Pooler]:
    with postgres_home() as home:  # PgBouncer runs as the embedded server's user
        yield from running(database_url, home, pool_size=2)


def test_the_pooler_is_reached_over_tls_verified_against_its_ca(pooler: Pooler) -> None:
    # The client's side of TLS, as libpq negotiated it (the pooler's own link to the server is
    # a Unix socket here).
    with psycopg.connect(pooler.url(), connect_timeout=5) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("select 1 as one").fetchone() == (1,)


@pytest.mark.parametrize(
    ("how", "refused_by"),
    [
        ({"host": "127.0.0.1"}, "certificate"),  # the certificate names localhost
        ({"sslmode": "disable"}, "SSL"),  # the pooler requires TLS
    ],
)
def test_a_wrong_host_or_no_tls_is_refused(
    pooler: Pooler, how: dict[str, str], refused_by: str
) -> None:
    with pytest.raises(psycopg.OperationalError, match=refused_by):
        psycopg.connect(pooler.url(**how), connect_timeout=5)


def test_a_certificate_of_another_authority_is_refused(pooler: Pooler, tmp_path: Path) -> None:
    foreign = authority(tmp_path / "other")
    url = pooler.url().replace(str(pooler.ca), str(foreign.ca))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(url, connect_timeout=5)


def test_many_clients_share_the_few_server_connections(pooler: Pooler) -> None:
    db = Database(lambda: pooler.url(), max_size=12)
    try:

        def locked_work(n: int) -> int:
            with db.transaction() as conn:
                conn.execute("select pg_advisory_xact_lock(42)")
                row = conn.execute("select %s::int as n", (n,)).fetchone()
                assert row is not None
                return int(row["n"])

        with ThreadPoolExecutor(max_workers=12) as pool:
            assert sorted(pool.map(locked_work, range(48))) == list(range(48))
        # Transaction-scoped lock and SET LOCAL: nothing leaks into the shared connections.
        assert db.fetch_all("show statement_timeout") == [{"statement_timeout": "15s"}]
    finally:
        db.close()
    with psycopg.connect(pooler.url(), autocommit=True) as conn:
        assert conn.execute("show statement_timeout").fetchone() == ("0",)


def test_a_statement_over_the_timeout_is_cancelled_through_the_pooler(pooler: Pooler) -> None:
    db = Database(lambda: pooler.url(), max_size=2, statement_timeout=0.5)
    try:
        with pytest.raises(DatabaseUnavailable, match="QueryCanceled"):
            db.fetch_all("select pg_sleep(3)")
        assert db.fetch_all("select 1 as one") == [{"one": 1}]  # the connection lives on
    finally:
        db.close()


def test_a_purchase_is_applied_through_the_pooler_over_tls(
    pooler: Pooler, api_factory: Callable[..., Api], db: Database
) -> None:
    api = api_factory(database_url=pooler.url(), database_pool_size=4)
    seed_demo_products(db)
    buyer = create_user(db, "pooled@example.com")
    body = stripe_event("checkout.session.completed", completed(buyer))

    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    wait_for(
        lambda: (
            db.fetch_all("select has_access from public.profiles where id = %s", (buyer,))
            == [{"has_access": True}]
        )
    )
    [row] = db.fetch_all(
        "select outcome from public.processed_events where event_id = %s and consumer = 'access'",
        (json.loads(body)["id"],),
    )
    assert row["outcome"] == "granted"
