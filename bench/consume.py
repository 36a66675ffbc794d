"""Consumptions of credits per second and their latency, with Postgres an internet hop away:
`uv run python bench/consume.py` (15 ms each way, 16 clients, 10 s per scenario).

Every consumption is one call of `credits/store.py` `take` (what POST /api/usage,
`@consumes` and the reservations call): `public.credit_take` sent with BEGIN and COMMIT in one
round trip. The floor is one plain round trip the same way (`select 1` with BEGIN and COMMIT),
which no consumption can beat. Scenarios: `floor`; `spread` (each consumption on one of
`--accounts` accounts); `hot` (every client on one account: the grants' row locks make them
take turns). See bench/README.md.
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
    parser.add_argument("--clients", type=int, default=16)
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
            db = Database(lambda: far, max_size=args.clients)
            db.fetch_all("select 1")
            floor = run(args, lambda n: db.fetch_all("select 1"))
            spread = run(args, lambda n: _take(db, accounts[n % len(accounts)]))
            hot = run(args, lambda n: _take(db, accounts[0]))
            db.close()
        [row] = _query(url, "select count(*), min(amount - used) from public.credit_grants")
    print(f"Postgres {args.delay_ms:g} ms away each way, {args.clients} clients, "
          f"{args.duration:g} s a scenario")  # fmt: skip
    print(f"{'scenario':10} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, (rate, p50, p99) in (("floor", floor), ("spread", spread), ("hot", hot)):
        print(f"{name:10} {rate:8.0f} {p50:8.1f} {p99:8.1f}")
    print(f"p99 over the floor's: spread {spread[2] / floor[2]:.2f}x, hot {hot[2] / floor[2]:.2f}x")
    print(f"grants never overdrawn: {row[0]} grants, least left {row[1]}")
    return 0


def _take(db: Database, account: str) -> None:
    taken = credits.take(db, account, "generations", 1, uuid.uuid4().hex)
    if taken.state != "consumed":
        raise RuntimeError(f"consumption answered {taken}")


def run(args: argparse.Namespace, call: Callable[[int], object]) -> tuple[float, float, float]:
    """Calls per second, p50 and p99 in ms, from `--clients` threads for `--duration`."""
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

    threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
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
