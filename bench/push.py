"""One push target alone, as Pub/Sub pushes at it once its rate has ramped up:
`uv run python bench/push.py` (access) or `--target emails`.

The emulator keeps about two pushes in flight per subscription, so bench/cost.py's push row
shows the emulator's pace, not what a Cloud Run instance of a target carries. Here wrk posts
push envelopes of unique renewals straight at the target (production's one process, of 16
threads for access and 4 for e-mail, under the service's gunicorn.conf.py) with
`--connections` pushes in flight, on Supabase's network as cost.py stands it in (PgBouncer
with 15 server connections, 15 ms each way), and prints what it applied (or mailed) per
second and its CPU per event. See bench/README.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cost import database, wrk
from load import Events
from resend_sink import resend_sink
from servers import gunicorn, postgres_cpu, server_env, tree_cpu
from systems import CACHE, EMAIL_THREADS, PROJECT, System, require_wrk

from adapters.bus import MESSAGE_EVENTS
from adapters.bus.topology import ensure_topology
from config import Settings
from core.events import message_body
from dev import pubsub_emulator
from dev.local_google import PUSH_ACCOUNT, id_token_claims, new_key, remove_signature, sign
from runtime.consumers import MESSAGE_FILTERS

TOPIC = "bench-push"
# The target checks Pub/Sub's push token; wrk sends it as Cloud Run forwards it once its invoker
# check verified it (signature removed), so the target checks its claims as in production.
AUDIENCE = "https://bench-push.run.invalid"


def push_token() -> str:
    """An hour's push token of the local push account, its signature removed."""
    claims = id_token_claims(audience=AUDIENCE, email=PUSH_ACCOUNT)
    return remove_signature(sign(claims, new_key(), "bench-1"))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="One push target alone, at a ramped-up rate.")
    parser.add_argument("--target", choices=("access", "emails"), default="access")
    parser.add_argument("--connections", type=int, default=16, help="pushes in flight")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of load")
    parser.add_argument("--events", type=int, default=40_000, help="unique events prepared")
    parser.add_argument("--customers", type=int, default=128, help="linked customers")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers")
    parser.add_argument(
        "--threads", type=int, help="threads per worker (production's: access 16, emails 4)"
    )
    parser.add_argument("--warmup", type=int, default=512, help="pushes before measuring")
    parser.add_argument("--pg-latency-ms", type=float, default=15.0, help="each way; 0: local")
    parser.add_argument("--pooler", type=int, default=15, help="PgBouncer's pool; 0: none")
    parser.add_argument(
        "--per-message",
        type=int,
        default=1,
        help="events a push carries (the api publishes the events of one type that come"
        " together as one message)",
    )
    parser.add_argument(
        "--close",
        action="store_true",
        help="a connection per push, as the emulator pushes (default: kept alive, as Cloud Run's"
        " front end keeps them)",
    )
    args = parser.parse_args()
    if args.threads is None:
        default = Settings.model_fields["gunicorn_threads"].default
        args.threads = EMAIL_THREADS if args.target == "emails" else default
    bounded = 1 <= args.connections <= 256 and 0 < args.duration <= 60
    bounded = bounded and args.warmup <= 5_000 and args.events <= 100_000
    bounded = bounded and 1 <= args.per_message <= MESSAGE_EVENTS
    if not bounded or not 0 <= args.pg_latency_ms <= 100 or not 0 <= args.pooler <= 100:
        parser.error(
            "keep it bounded: 256 connections, 60 s, 100000 events, 100 ms, pool 100,"
            f" {MESSAGE_EVENTS} events a message (as the api groups them)"
        )
    return args


def write_pushes(
    path: Path, events: Events, count: int, subscription: str, per_message: int = 1
) -> None:
    """Push envelopes in replay.lua's records (no Stripe signature: Pub/Sub sends none), each
    carrying `per_message` events as the api publishes them (`core.events.message_body`)."""
    with path.open("wb") as out:
        for i in range(count):
            numbers = range(i * per_message, (i + 1) * per_message)
            body = message_body([events.body(n) for n in numbers])
            ids = " ".join(events.event_id(n) for n in numbers)
            envelope = json.dumps(
                {
                    "message": {
                        "data": base64.b64encode(body).decode(),
                        "attributes": {
                            "event_ids" if per_message > 1 else "event_id": ids,
                            "event_type": "invoice.paid",
                        },
                        "messageId": str(i),
                        "publishTime": "2026-11-26T10:00:00.000Z",
                    },
                    "subscription": subscription,
                }
            ).encode()
            out.write(b"-\n" + str(len(envelope)).encode() + b"\n" + envelope)


def effects(system: System, url: str, prefix: str, target: str) -> int:
    applied, mailed = system.applied(url, prefix)
    return applied if target == "access" else mailed


def push(
    args: argparse.Namespace, system: System, prefix: str, count: int, *, earlier: bool = False
) -> dict[str, float]:
    """`count` pushes (0: `--duration` s of them); wrk's summary. `earlier`: the warm-up's,
    created before the load's (a customer's two events created in the same second would
    send access to Stripe to order them)."""
    created = int(time.time()) - (7200 if earlier else 3600)
    events = Events(prefix=prefix, customers=args.customers, base_created=created)
    path = CACHE / "pushes.bin"
    subscription = f"projects/{PROJECT}/subscriptions/{TOPIC}-{args.target}"
    pushes = -(-count // args.per_message) if count else args.events // args.per_message
    write_pushes(path, events, pushes, subscription, args.per_message)
    seconds = 60 if count else args.duration
    authorization = f"Bearer {push_token()}"
    return wrk(
        system.port,
        path,
        args,
        seconds,
        limit=count,
        route="/",
        authorization=authorization,
        close=args.close,
    )


def wait_for(system: System, url: str, prefix: str, target: str, want: int) -> float:
    """Effects until `want` are in or none appeared for 5 s; when the last one was seen."""
    last, changed = -1, time.monotonic()
    while True:
        now = effects(system, url, prefix, target)
        if now != last:
            last, changed = now, time.monotonic()
        if now >= want or time.monotonic() - changed > 5:
            return changed
        time.sleep(0.2)


def main() -> None:
    args = arguments()
    require_wrk()
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = CACHE / "push"
    scratch.mkdir(exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-push-") as tmp,
        database(Path(tmp), args) as (remote, url),
        resend_sink(Path(tmp)) as sink,
        pubsub_emulator.running(project=PROJECT) as emulator,
    ):
        # The topic its announcements go to; nothing reads it here.
        ensure_topology(
            filters=MESSAGE_FILTERS,
            project=PROJECT,
            topic=TOPIC,
            push_endpoints={},
            emulator_host=emulator.host,
        )
        settings = {
            "function_target": args.target,
            "event_bus": "pubsub",
            "google_cloud_project": PROJECT,
            "pubsub_topic": TOPIC,
            "pubsub_emulator_host": emulator.host,
            "push_audience": AUDIENCE,
            "push_service_account": PUSH_ACCOUNT,
        }
        env = server_env(scratch, remote, **settings, **sink.settings())
        with gunicorn(
            "runtime.subscriber_app:create_app()",
            env,
            workers=args.workers,
            threads=args.threads,
            clients=args.connections,
            log=scratch / f"{args.target}.log",
        ) as (port, pid):
            system = System(args.target, port, {args.target: pid})
            tag = f"p{args.target[:2]}{int(time.time())}"
            if args.warmup:
                push(args, system, f"w{tag}", args.warmup, earlier=True)
                wait_for(system, url, f"w{tag}", args.target, args.warmup)
            cpu0, pg0 = tree_cpu(pid), postgres_cpu(url)
            load = push(args, system, tag, 0)
            acked = int(load["requests"] - load["status_errors"]) * args.per_message
            started = time.monotonic() - load["duration_us"] / 1e6
            last = wait_for(system, url, tag, args.target, acked)
            done = effects(system, url, tag, args.target)
            cpu, pg = tree_cpu(pid) - cpu0, postgres_cpu(url) - pg0
    print(
        f"{args.target} push target ({args.workers} x {args.threads}), {args.connections} pushes"
        f" in flight{' (a connection each)' if args.close else ''},"
        f" {args.per_message} event(s) a push,"
        f" Postgres {args.pg_latency_ms:g} ms away"
        + (f" behind PgBouncer (pool {args.pooler})" if args.pooler else "")
        + f": acknowledged {acked} ({acked / (load['duration_us'] / 1e6):.0f}/s, p50"
        f" {load['p50_us'] / 1000:.0f} ms, p99 {load['p99_us'] / 1000:.0f} ms), refused"
        f" {int(load['status_errors'])}; {'applied' if args.target == 'access' else 'mailed'}"
        f" {done} ({done / max(last - started, 1e-9):.0f}/s); CPU ms per event"
        f" {1000 * cpu / max(done, 1):.2f}, Postgres {1000 * pg / max(done, 1):.2f}"
    )


if __name__ == "__main__":
    main()
