"""Cost per event, side by side: `uv run python bench/cost.py` (or `make bench`).

wrk posts unique signed ~4 KB `invoice.paid` renewals (one e-mail each) for customers already
linked to profiles at four systems in turn, in alternating rounds: stripe-sync-engine (Node,
one upsert before answering), this service with the in-process bus, and this service on the
Pub/Sub emulator (api, access and emails targets behind push subscriptions, or reading pull
subscriptions with StreamingPull). After the load it counts effects until they
stop growing (at most `--drain` s), then replays already applied events (duplicates). CPU is
each process tree's own (psutil), divided by the events it applied. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from load import WEBHOOK_PATH, Events, signature
from measure import Measured, report
from network import delayed
from resend_sink import resend_sink
from servers import postgres, postgres_cpu, tree_cpu
from systems import CACHE, System, inline, pubsub, require_wrk, sync_engine

from config import DEV_WEBHOOK_SECRET, Settings
from tests.pooler import running as pooler_running

SYSTEMS = ("sync-engine", "inline", "pubsub", "pull")
LUA = Path(__file__).resolve().parent / "replay.lua"
BURST_SECONDS = 300
IDLE_SECONDS = 5.0  # measured before each load, to subtract idle CPU from it


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="CPU per applied event, four systems.")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of load")
    parser.add_argument("--events", type=int, default=60_000, help="unique events prepared")
    parser.add_argument("--customers", type=int, default=128, help="linked customers")
    parser.add_argument("--drain", type=float, default=60.0, help="max wait for effects, s")
    parser.add_argument(
        "--warmup", type=int, default=512, help="renewals sent and applied before measuring"
    )
    parser.add_argument("--replay", type=float, default=5.0, help="seconds of duplicates; 0: off")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, alternating the order")
    # Production's processes and threads: the settings' defaults (e-mail's own 4 whatever these).
    serving = Settings.model_fields
    parser.add_argument(
        "--workers",
        type=int,
        default=serving["web_concurrency"].default,
        help="gunicorn workers (api, inline)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=serving["gunicorn_threads"].default,
        help="threads per worker (access too; the e-mail target runs 4)",
    )
    parser.add_argument("--only", choices=SYSTEMS, action="append", help="run just these")
    parser.add_argument("--profile", type=Path, help="py-spy flame graphs into this folder")
    parser.add_argument(
        "--pg-latency-ms",
        type=float,
        default=15.0,
        help="added each way between every system and Postgres (Supabase: 10-25 ms away; 0: local)",
    )
    parser.add_argument(
        "--pooler",
        type=int,
        default=15,
        help="PgBouncer in transaction mode with this many server connections (Supavisor on"
        " small plans: 15; 0: none)",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=0,
        help="instead of --duration s of load, this many renewals as fast as they are taken",
    )
    parser.add_argument(
        "--push-burst",
        type=int,
        default=600,
        help="the push row's load: this many renewals at once, all applied and mailed before"
        " its CPU is read (the emulator pushes about two at a time, some 20 a second with"
        " Postgres 15 ms away: the others' 15 s of load would leave it minutes of backlog,"
        " the api's CPU for all of it divided among the few applied; 0: as the others)",
    )
    args = parser.parse_args()
    bounded = 1 <= args.connections <= 256 and 0 < args.duration <= 60 and args.events <= 100_000
    bounded = bounded and 0 <= args.warmup <= 5_000
    bounded = bounded and 0 <= args.pg_latency_ms <= 100 and 0 <= args.pooler <= 100
    bounded = bounded and 0 <= args.burst <= min(args.events, 50_000)
    bounded = bounded and 0 <= args.push_burst <= min(args.events, 50_000)
    if not bounded or not 1 <= args.rounds <= 4 or not 0 <= args.drain <= 600:
        parser.error(
            "keep it bounded: 256 connections, 60 s, 100000 events (a burst: 50000, at most"
            " --events), 4 rounds, 600 s of drain, 100 ms each way, a pool of 100"
        )
    return args


def write_events(path: Path, events: Events, count: int) -> None:
    """Signed now: wrk's Lua has no HMAC. `<signature>\\n<length>\\n<body>` per event."""
    with path.open("wb") as out:
        for i in range(count):
            body = events.body(i)
            sig = signature(body, DEV_WEBHOOK_SECRET).encode()
            out.write(sig + b"\n" + str(len(body)).encode() + b"\n" + body)


def wrk(
    port: int,
    path: Path,
    args: argparse.Namespace,
    duration: float,
    limit: int = 0,
    route: str = WEBHOOK_PATH,
    authorization: str | None = None,
    close: bool = False,
) -> dict[str, float]:
    """wrk's summary after `duration` s, or (`limit`) once about that many were answered (a
    burst handed over: its effects are then counted as they come); the records of `path` go
    to `route`, with `authorization` as their Authorization header when given, each on a
    connection of its own when `close`."""
    threads, seconds = 2, max(1, round(duration))
    command = [
        require_wrk(),
        *(f"-t{threads}", f"-c{args.connections}", f"-d{seconds}s", "--timeout=30s"),
        *("-s", str(LUA), f"http://127.0.0.1:{port}"),
    ]
    with tempfile.TemporaryDirectory(prefix="wrk-") as done_dir:
        env = os.environ | {"BENCH_EVENTS": str(path), "BENCH_THREADS": str(threads)}
        env |= {"BENCH_LIMIT": str(limit), "BENCH_ROUTE": route, "BENCH_DONE": done_dir}
        if authorization:
            env["BENCH_AUTHORIZATION"] = authorization
        if close:
            env["BENCH_CLOSE"] = "1"
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        while process.poll() is None:
            if limit and len(os.listdir(done_dir)) >= threads:
                # wrk runs out its -d even when every thread has stopped; SIGINT ends it with
                # its summary.
                process.send_signal(signal.SIGINT)
                break
            time.sleep(0.2)
        out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed: {err.strip() or out.strip()}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def cpu(system: System) -> dict[str, float]:
    return {stage: tree_cpu(pid) for stage, pid in system.processes.items()}


def rss_mb(system: System) -> float:
    total = 0
    for pid in system.processes.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(pid)
            total += sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
    return total / 2**20


@contextlib.contextmanager
def profiling(system: System, folder: Path | None, seconds: float) -> Iterator[None]:
    """py-spy on every Python process of the system while the load runs."""
    spies = []
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        for stage, pid in system.processes.items():
            root = psutil.Process(pid)
            for n, proc in enumerate([root, *root.children(recursive=True)]):
                if "python" not in proc.name() and "gunicorn" not in " ".join(proc.cmdline()):
                    continue
                out = folder / f"{system.name}-{stage}-{n}.txt".replace("+", "_")
                spies.append(
                    subprocess.Popen(
                        [
                            str(Path(sys.executable).parent / "py-spy"),
                            *("record", "--format=raw", "--nonblocking", "--gil"),
                            *(f"--pid={proc.pid}", f"--duration={int(seconds)}", f"-o={out}"),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
    try:
        yield
    finally:
        for spy in spies:
            spy.wait(timeout=seconds + 30)


def warm_up(system: System, database_url: str, args: argparse.Namespace, tag: str) -> None:
    """Send `--warmup` earlier renewals and wait (at most 60 s) until their effects are in:
    the measured load finds every process's clients built and its modules imported, as a
    serving instance's are (the first event's imports alone cost a second of CPU)."""
    if not args.warmup:
        return
    events = Events(
        prefix=f"w{tag}", customers=args.customers, base_created=int(time.time()) - 7200
    )
    path = CACHE / "warmup.bin"
    write_events(path, events, args.warmup)
    load = wrk(system.port, path, args, 60, limit=args.warmup)
    acked = int(load["requests"] - load["status_errors"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        applied, mailed = system.applied(database_url, f"w{tag}")
        if applied >= acked and (mailed >= acked or not system.emails):
            break
        time.sleep(0.2)
    settle(system)


def run(system: System, database_url: str, args: argparse.Namespace, tag: str) -> Measured:
    warm_up(system, database_url, args, tag)
    events = Events(prefix=tag, customers=args.customers)
    path = CACHE / "events.bin"
    burst = args.push_burst if system.name == "pubsub" else args.burst
    write_events(path, events, burst or args.events)
    m = Measured(system.name, emails=system.emails, unique=burst or args.events)
    idle, idle_pg = idle_rates(system, database_url)
    cpu0, pg0, started = cpu(system), postgres_cpu(database_url), time.monotonic()
    # A burst: at most BURST_SECONDS to hand it over, then it is measured as it stands.
    seconds = BURST_SECONDS if burst else args.duration
    measured_from = time.monotonic()
    with profiling(system, args.profile, seconds):
        m.load = wrk(system.port, path, args, seconds, limit=burst)
    # wrk spends seconds reading the events before the first request: the load began here.
    started = time.monotonic() - m.load["duration_us"] / 1e6
    m.load_seconds = m.load["duration_us"] / 1e6
    # wrk stops without reading the answers in flight: those were applied, never counted acked.
    m.backlog = max(0, m.wanted - system.applied(database_url, tag)[0])
    m.peak_rss_mb = rss_mb(system)
    drain(system, database_url, tag, m, started, limit=args.drain)
    m.peak_rss_mb = max(m.peak_rss_mb, rss_mb(system))
    # Net of idle: what the processes spend with nothing to do (timers, pools, Postgres's own
    # background work) over the same time is not a cost of the events.
    elapsed = time.monotonic() - measured_from
    m.idle_cpu = {k: idle[k] * elapsed for k in idle}
    m.cpu = {k: max(0.0, v - cpu0[k] - m.idle_cpu[k]) for k, v in cpu(system).items()}
    m.idle_postgres_cpu = idle_pg * elapsed
    m.postgres_cpu = max(0.0, postgres_cpu(database_url) - pg0 - m.idle_postgres_cpu)
    if args.replay and m.applied:  # duplicates of applied events only (none: nothing to replay)
        replay = CACHE / "replay.bin"
        write_events(replay, events, min(m.applied, 5000))
        before, pg1 = cpu(system), postgres_cpu(database_url)
        m.replay = wrk(system.port, replay, args, args.replay)
        settle(system)
        m.replay_cpu = {k: v - before[k] for k, v in cpu(system).items()}
        m.replay_postgres_cpu = postgres_cpu(database_url) - pg1
    return m


def idle_rates(
    system: System, database_url: str, seconds: float = IDLE_SECONDS
) -> tuple[dict[str, float], float]:
    """CPU seconds per second each process tree, and Postgres, spends idle (once settled)."""
    cpu0, pg0, began = cpu(system), postgres_cpu(database_url), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - began
    rates = {k: max(0.0, v - cpu0[k]) / elapsed for k, v in cpu(system).items()}
    return rates, max(0.0, postgres_cpu(database_url) - pg0) / elapsed


def drain(
    system: System, database_url: str, tag: str, m: Measured, started: float, *, limit: float
) -> None:
    """Effects until all are applied or none appeared for 5 s (at most `limit` s after load).

    Access effects and e-mails are timed apart: each rate is over the time to its last one.
    """
    give_up = time.monotonic() + limit
    last, changed = (-1, -1), [time.monotonic()] * 2
    while time.monotonic() < give_up:
        now = system.applied(database_url, tag)
        for n in (0, 1):
            if now[n] != last[n]:
                changed[n] = time.monotonic()
        if now != last:
            last = now
            m.peak_rss_mb = max(m.peak_rss_mb, rss_mb(system))
        complete = now[0] >= m.wanted and (now[1] >= m.wanted or not system.emails)
        if complete or time.monotonic() - max(changed) > 5:
            break
        time.sleep(0.2)
    m.applied, m.emails_sent = last
    m.effects_seconds, m.emails_seconds = (at - started for at in changed)


def settle(system: System, quiet: float = 0.05) -> None:
    """Wait (at most 30 s) until the system's processes stop using CPU: duplicates handled."""
    deadline = time.monotonic() + 30
    previous = sum(cpu(system).values())
    while time.monotonic() < deadline:
        time.sleep(1.0)
        current = sum(cpu(system).values())
        if current - previous < quiet:
            return
        previous = current


def starters(
    scratch: Path, url: str, args: argparse.Namespace, mail: dict[str, str]
) -> dict[str, Callable[[str], AbstractContextManager[System]]]:
    w, t = args.workers, args.threads
    return {
        "sync-engine": lambda tag: sync_engine(scratch, url),
        "inline": lambda tag: inline(scratch, url, w, t, mail),
        "pubsub": lambda tag: pubsub(scratch, url, w, t, f"bench-{tag}", mail),
        "pull": lambda tag: pubsub(scratch, url, w, t, f"bench-{tag}", mail, pull=True),
    }


@contextlib.contextmanager
def database(scratch: Path, args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(the systems' URL, a direct one to count effects): Postgres, behind PgBouncer in
    transaction mode when `--pooler` is set, then behind the delay when `--pg-latency-ms` is."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(postgres(scratch, args.customers))
        served = url
        if args.pooler:
            pooler = stack.enter_context(
                contextlib.contextmanager(pooler_running)(
                    url, scratch / "pgbouncer", pool_size=args.pooler
                )
            )
            served = pooler.url()
        yield stack.enter_context(delayed(served, args.pg_latency_ms)), url


def main() -> None:
    args = arguments()
    require_wrk()
    chosen = [s for s in SYSTEMS if s in (args.only or SYSTEMS)]
    CACHE.mkdir(parents=True, exist_ok=True)
    results: list[Measured] = []
    # Logs and the outbox stay for reading after the run (removed by the next one).
    scratch = CACHE / "run"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        database(Path(tmp), args) as (remote, url),
    ):
        for n in range(args.rounds):
            order = chosen if n % 2 == 0 else chosen[::-1]
            for name in order:
                tag = f"{name[:2]}{n}{int(time.time())}"
                # The systems reach Postgres over the hop; effects are counted directly.
                with (
                    resend_sink(Path(tmp) / tag) as sink,
                    starters(scratch, remote, args, sink.settings())[name](tag) as system,
                ):
                    results.append(run(system, url, args, tag))
                print(results[-1].line(), flush=True)
    report(results, args)


if __name__ == "__main__":
    main()
