"""Webhook benchmark: `uv run python bench/webhook.py [--clients 16] [--duration 10]`.

Drives unique signed ~4 KB `invoice.paid` events at the webhook over HTTP on 127.0.0.1 and
prints throughput and latency for: the route publishing to the Pub/Sub emulator, the route with
the in-process bus (subscribers writing to Postgres in the same workers), a floor (a bare app
that only verifies the signature), and the bare publisher (no HTTP). See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

# Run as a script: bench/ is on sys.path already, the project's modules sit one level up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from load import Events, Result, drive, http_sender, invoice_paid_template
from servers import applied, gunicorn, postgres, server_env

from adapters.bus.pubsub import PubSubBus
from adapters.bus.topology import ensure_topology
from config import DEV_WEBHOOK_SECRET
from core.events import Event
from dev import pubsub_emulator
from runtime.consumers import MESSAGE_FILTERS

PROJECT, TOPIC = "local-project", "bench-events"
SCENARIOS = ("floor", "inline", "pubsub", "publisher")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Webhook throughput and latency, four ways.")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario")
    parser.add_argument("--requests", type=int, default=30_000, help="cap per scenario")
    parser.add_argument("--warmup", type=int, default=400, help="requests before measuring")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker")
    parser.add_argument("--customers", type=int, default=500, help="distinct Stripe customers")
    parser.add_argument(
        "--billing-reason",
        choices=("subscription_cycle", "subscription_create"),
        default="subscription_cycle",
        help="a renewal (an e-mail each) or a first invoice (no e-mail)",
    )
    parser.add_argument("--drain", type=float, default=30.0, help="max wait for inline effects")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the median is reported")
    parser.add_argument("--only", choices=SCENARIOS, action="append", help="run just these")
    args = parser.parse_args()
    bounded = 1 <= args.clients <= 256 and 0 < args.duration <= 120 and args.requests <= 200_000
    if not bounded or not 1 <= args.repeat <= 9:
        parser.error("keep it bounded: 1-256 clients, 120 s, 200000 requests, 9 rounds at most")
    return args


def events_for(scenario: str, args: argparse.Namespace) -> Events:
    """Events no earlier run used: ids carry the scenario and the time."""
    return Events(
        prefix=f"{scenario[:3]}{int(time.time())}",
        customers=args.customers,
        template=invoice_paid_template(args.billing_reason),
    )


def measure(name: str, send: Callable[[int], bool], args: argparse.Namespace) -> Result:
    """Warm up (every worker builds its clients and pools), then measure."""
    drive(name, send, clients=args.clients, duration=30, limit=args.warmup, first=0)
    return drive(
        name,
        send,
        clients=args.clients,
        duration=args.duration,
        limit=args.requests,
        first=args.warmup,
    )


def route(name: str, app: str, env: dict[str, str], args: argparse.Namespace, log: Path) -> Result:
    """The webhook of `app` under gunicorn, driven over HTTP."""
    events = events_for(name, args)
    with gunicorn(
        app, env, workers=args.workers, threads=args.threads, clients=args.clients, log=log
    ) as (port, _):
        return measure(name, http_sender(port, events, DEV_WEBHOOK_SECRET), args)


def inline_route(scratch: Path, database_url: str, args: argparse.Namespace) -> Result:
    """The service with EVENT_BUS=inline; also how fast the effects land in Postgres."""
    env = server_env(scratch, database_url, event_bus="inline")
    events = events_for("inline", args)
    log = scratch / "inline.log"
    with gunicorn(
        "main:app", env, workers=args.workers, threads=args.threads, clients=args.clients, log=log
    ) as (port, _):
        started = time.monotonic()
        result = measure("inline", http_sender(port, events, DEV_WEBHOOK_SECRET), args)
        total, done = args.warmup + result.ok, 0
        # Bounded: a backlog the subscribers cannot clear in time is reported, not waited out.
        give_up = time.monotonic() + args.drain
        while (done := applied(database_url, events.prefix)) < total and time.monotonic() < give_up:
            time.sleep(0.2)
        result.effects = (done, total, time.monotonic() - started)
    return result


def bare_publisher(emulator_host: str, args: argparse.Namespace) -> Result:
    """The same messages through the same adapter from as many threads, without HTTP."""
    events = events_for("publisher", args)
    bus = PubSubBus(project=PROJECT, topic=TOPIC, emulator_host=emulator_host)
    created = datetime.now(UTC)

    def send(i: int) -> bool:
        bus.publish(Event(events.event_id(i), "invoice.paid", created, False, {}), events.body(i))
        return True

    try:
        return measure("publisher", send, args)
    finally:
        bus.close()


def report(title: str, results: dict[str, Result], args: argparse.Namespace) -> None:
    print(f"\n{title}: {args.clients} clients, {args.workers} workers x {args.threads} threads")
    print(
        f"{'scenario':<11}{'ok':>8}{'fail':>6}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
    )
    for r in results.values():
        print(
            f"{r.name:<11}{r.ok:>8}{r.failed:>6}{r.throughput:>9.0f}"
            f"{r.percentile(50):>9.1f}{r.percentile(95):>9.1f}{r.percentile(99):>9.1f}"
        )
    if "inline" in results and results["inline"].effects:
        done, total, seconds = results["inline"].effects
        print(
            f"inline: access effects applied {done}/{total} within {seconds:.0f} s"
            f" ({done / seconds:.0f} events/s; the e-mails run in the same workers)"
        )
    for top, bottom in (("inline", "floor"), ("pubsub", "publisher")):
        if top in results and bottom in results:
            ratio = results[top].throughput / results[bottom].throughput
            print(f"{top}/{bottom} throughput: {ratio:.0%}")


def median(rounds: list[dict[str, Result]]) -> dict[str, Result]:
    """Per scenario, the round with the median throughput (this machine's speed drifts)."""
    ranked = {
        name: sorted((r[name] for r in rounds), key=lambda x: x.throughput) for name in rounds[0]
    }
    return {name: results[len(results) // 2] for name, results in ranked.items()}


def one_round(
    chosen: list[str],
    scratch: Path,
    database_url: str,
    emulator: str | None,
    args: argparse.Namespace,
) -> dict[str, Result]:
    """Each chosen scenario once, in order, each with a fresh server."""
    pubsub_env = server_env(
        scratch,
        database_url,
        event_bus="pubsub",
        google_cloud_project=PROJECT,
        pubsub_topic=TOPIC,
        pubsub_emulator_host=emulator or "",
    )
    runners: dict[str, Callable[[], Result]] = {
        "floor": lambda: route(
            "floor",
            "bench.floor_app:app",
            server_env(scratch, database_url),
            args,
            scratch / "floor.log",
        ),
        "inline": lambda: inline_route(scratch, database_url, args),
        "pubsub": lambda: route("pubsub", "main:app", pubsub_env, args, scratch / "pubsub.log"),
        "publisher": lambda: bare_publisher(emulator or "", args),
    }
    return {name: runners[name]() for name in chosen}


def main() -> None:
    args = arguments()
    chosen = [name for name in SCENARIOS if name in (args.only or SCENARIOS)]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, contextlib.ExitStack() as stack:
        scratch = Path(tmp)
        database_url = stack.enter_context(postgres(scratch, args.customers))
        emulator = None
        if {"pubsub", "publisher"} & set(chosen):
            emulator = stack.enter_context(pubsub_emulator.running(project=PROJECT)).host
            ensure_topology(
                filters=MESSAGE_FILTERS,
                project=PROJECT,
                topic=TOPIC,
                push_endpoints={},
                emulator_host=emulator,
            )
        rounds = []
        for n in range(args.repeat):
            rounds.append(one_round(chosen, scratch, database_url, emulator, args))
            report(f"round {n + 1}/{args.repeat}", rounds[-1], args)
        if args.repeat > 1:
            report(f"median of {args.repeat} rounds", median(rounds), args)


if __name__ == "__main__":
    main()
