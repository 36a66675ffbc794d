"""Consumptions of credits per second and their latency, with Postgres an internet hop away:
`uv run python bench/consume.py` (15 ms each way, 64 clients on 8 connections, 10 s per
scenario).

Every consumption is one call of `credits/store.py` `take` (what POST /api/usage,
`@consumes` and the reservations call): the instance's consumptions in flight at the same moment
are taken in one statement (`credits/batches.py`), sent with BEGIN and COMMIT in one
round trip. The floor is one plain round trip the same way (`select 1` with BEGIN and COMMIT),
from one client, which no call can beat. Scenarios: `floor`; `alone` (each consumption its own
statement, as before batches, the clients taking turns for the connections); `spread` (each
consumption on one of `--accounts` accounts); `hot` (every client on one account: the grants'
row locks make them take turns). See bench/README.md.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from network import delayed

from adapters.db.pool import Database
from credits import store as credits
from dev import local_postgres


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=15.0, help="each way to Postgres")
    parser.add_argument("--clients", type=int, default=64, help="threads consuming at once")
    parser.add_argument("--connections", type=int, default=8, help="the instance's pool")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario")
    parser.add_argument("--accounts", type=int, default=100)
    args = parser.parse_args()
    # The relay cancels the connections it still holds when it stops: not worth a traceback.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    with (
        tempfile.TemporaryDirectory() as scratch,
        local_postgres.migrated(Path(scratch) / "pg") as url,
    ):
        accounts = _accounts(url, args.accounts)
        with delayed(url, args.delay_ms) as far:
            db = Database(lambda: far, max_size=args.connections, timeout=60)
            db.fetch_all("select 1")
            floor = run(args, lambda n: db.fetch_all("select 1"), clients=1)
            alone = run(args, lambda n: _alone(db, accounts[n % len(accounts)]))
            spread = run(args, lambda n: _take(db, accounts[n % len(accounts)]))
            hot = run(args, lambda n: _take(db, accounts[0]))
            db.close()
        [row] = _query(url, "select count(*), min(amount - used) from public.credit_grants")
    print(f"Postgres {args.delay_ms:g} ms away each way, {args.clients} clients on"
          f" {args.connections} connections, {args.duration:g} s a scenario")  # fmt: skip
    print(f"{'scenario':10} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    scenarios = (("floor", floor), ("alone", alone), ("spread", spread), ("hot", hot))
    for name, (rate, p50, p99) in scenarios:
        print(f"{name:10} {rate:8.0f} {p50:8.1f} {p99:8.1f}")
    trip = floor[1]
    print(f"p99 in round trips (the floor's p50, {trip:.1f} ms): alone {alone[2] / trip:.2f},"
          f" spread {spread[2] / trip:.2f}, hot {hot[2] / trip:.2f}")  # fmt: skip
    print(f"grants never overdrawn: {row[0]} grants, least left {row[1]}")
    return 0


def _alone(db: Database, account: str) -> None:
    """A consumption in a statement of its own, as every one was before batches."""
    [row] = db.fetch_all(
        "select public.credit_take(%s::uuid, 'generations', 1, %s, 'consumed') as taken",
        (account, uuid.uuid4().hex),
    )
    if row["taken"]["state"] != "consumed":
        raise RuntimeError(f"consumption answered {row['taken']}")


def _take(db: Database, account: str) -> None:
    taken = credits.take(db, account, "generations", 1, uuid.uuid4().hex)
    if taken.state != "consumed":
        raise RuntimeError(f"consumption answered {taken}")


def run(
    args: argparse.Namespace, call: Callable[[int], object], *, clients: int | None = None
) -> tuple[float, float, float]:
    """Calls per second, p50 and p99 in ms, from `--clients` threads (or `clients`) for
    `--duration`."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + args.duration

    def client(n: int) -> None:
        mine: list[float] = []
        while (start := time.monotonic()) < stop:
            call(n)
            mine.append(time.monotonic() - start)
        with lock:
            latencies.extend(mine)

    count = clients or args.clients
    threads = [threading.Thread(target=client, args=(n,)) for n in range(count)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return len(ordered) / elapsed, statistics.median(ordered) * 1000, p99 * 1000


def _accounts(url: str, count: int) -> list[str]:
    """`count` people, each account granted a billion generations for the period."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "insert into auth.users (id, email) select gen_random_uuid(),"
            " 'bench_' || n || '@example.com' from generate_series(1, %s) n",
            (count,),
        )
        conn.execute(
            "insert into public.credit_grants (account_id, feature, source, kind, amount,"
            " starts_at, expires_at) select a.id, 'generations', 'bench@' || a.id, 'period',"
            " 1000000000, now(), now() + interval '30 days' from public.accounts a"
        )
        rows = conn.execute("select id::text from public.accounts order by id").fetchall()
    return [str(r[0]) for r in rows]


def _query(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


if __name__ == "__main__":
    sys.exit(main())
