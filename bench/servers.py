"""What the webhook benchmark runs against: embedded Postgres, the emulator, gunicorn servers."""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil
import psycopg

from adapters.db.pool import Database
from config import Settings
from dev import local_postgres, pubsub_emulator
from dev.samples.catalogue import seed_demo_products

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def postgres(scratch: Path, customers: int) -> Iterator[str]:
    """An embedded Postgres, migrated, with `customers` linked profiles and the demo products."""
    with local_postgres.migrated(scratch / "pg") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "insert into auth.users (id, email) select gen_random_uuid(),"
                " 'cus_bench_' || n || '@example.com' from generate_series(0, %s - 1) n",
                (customers,),
            )
            conn.execute("update public.profiles set customer_id = split_part(email, '@', 1)")
            conn.execute(
                "update public.accounts a set customer_id = p.customer_id"
                " from public.profiles p where p.id = a.owner_id"
            )
        db = Database(lambda: url)
        seed_demo_products(db)
        db.close()
        yield url


def applied(database_url: str, prefix: str) -> int:
    """How many events with ids starting `evt_<prefix>` the access subscriber has applied."""
    row = query(
        database_url,
        "select count(*) from public.processed_events where event_id like %s"
        " and outcome <> 'pending'",
        (f"evt_{prefix}%",),
    )
    return int(row[0]) if row else 0


# The bench's own connection to each database, kept: a connection per poll would have Postgres
# fork, authenticate and end a backend each time (several ms of its CPU, five times a second
# while effects are awaited), counted as the system's. postgres_cpu leaves this backend out.
_KEPT: dict[str, psycopg.Connection[tuple[Any, ...]]] = {}


def query(
    database_url: str, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None
) -> tuple[Any, ...] | None:
    """One row of the bench's own read, over the kept connection."""
    conn = _KEPT.get(database_url)
    if conn is None or conn.closed:
        conn = _KEPT[database_url] = psycopg.connect(database_url, autocommit=True)
    row: tuple[Any, ...] | None = conn.execute(sql, params).fetchone()
    return row


def postgres_cpu(database_url: str) -> float:
    """CPU seconds used so far by the Postgres server's processes (postmaster, backends, and
    the backends that ended), the bench's own backend (`query`) left out."""
    row = query(database_url, "select pg_backend_pid()")
    assert row is not None
    own = psutil.Process(int(row[0]))
    postmaster = own.parent()
    assert postmaster is not None
    times = own.cpu_times()
    return tree_cpu(postmaster.pid) - (times.user + times.system)


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants, and of the children
    they have reaped: a Postgres backend that PgBouncer closed, or a worker that was replaced,
    would otherwise take its CPU with it and the difference of two readings could go negative."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def server_env(scratch: Path, database_url: str, **settings: str) -> dict[str, str]:
    """A server's environment: this machine's service settings left out, ours put in."""
    names = {name.upper() for name in Settings.model_fields}
    env = {k: v for k, v in os.environ.items() if k not in names}
    # bin/serve runs `python` from PATH: this interpreter's, as under `uv run`.
    path = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    return env | {
        "PATH": path,
        "APP_ENV": "test",
        # Logs as on Cloud Run (which sets K_SERVICE): one JSON object a line.
        "K_SERVICE": f"bench-{settings.get('function_target', 'api')}",
        "DATABASE_URL": database_url,
        "EMAIL_OUTBOX_DIR": str(scratch / "outbox"),
        "DATA_DIR": str(scratch / "data"),
        **{k.upper(): v for k, v in settings.items()},
    }


@contextlib.contextmanager
def gunicorn(
    app: str,
    env: dict[str, str],
    *,
    workers: int,
    threads: int,
    clients: int | None,
    log: Path,
) -> Iterator[tuple[int, int]]:
    """`app` under the service's own gunicorn.conf.py (gthread), on loopback; yields the port
    and the master's pid.

    `clients`: how many keep-alive connections the load holds, spread evenly over the workers;
    None for a client that does not reuse its connections (the emulator's push), which a cap
    would starve: each closed slot waits out gunicorn's keep-alive before it is free again.
    """
    port = pubsub_emulator.free_port()
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        *("--config=gunicorn.conf.py", f"--bind=127.0.0.1:{port}"),
        *(f"--workers={workers}", f"--threads={threads}"),
    ]
    if clients is not None:
        # Keep-alive connections stay with the worker that accepted them, and one worker often
        # accepts them all: capping connections per worker spreads the clients evenly.
        command.append(f"--worker-connections={-(-clients // workers) + 1}")
    command.append(app)
    with spawn(command, env, port, log) as pid:
        yield port, pid


@contextlib.contextmanager
def spawn(command: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[int]:
    """A server in its own process group, once it answers HTTP on `port`; yields its pid."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        _wait_until_healthy(port, process)
        yield process.pid
    finally:
        pubsub_emulator.stop_group(process)


def _wait_until_healthy(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            # Any answer but a server error: the server listens and routes.
            if conn.getresponse().status < 500:
                return
        time.sleep(0.05)
    raise RuntimeError(f"the server on port {port} did not start (see its log)")
