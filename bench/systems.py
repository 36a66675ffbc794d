"""The systems bench/cost.py drives, each started on loopback with its processes named:
stripe-sync-engine (Node), this service with the in-process bus, and this service on the Pub/Sub
emulator (the api, and the access and emails targets fed by push, or by StreamingPull). Also
wrk and the npm package, installed if missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from servers import ROOT, gunicorn, query, server_env, spawn

from adapters.bus.topology import ensure_topology
from config import DEV_WEBHOOK_SECRET
from dev import local_google, pubsub_emulator
from dev.local_google import PUSH_ACCOUNT
from runtime.consumers import MESSAGE_FILTERS

SYNC_ENGINE = {"@supabase/stripe-sync-engine": "0.48.5", "stripe": "23.1.0"}
CACHE = ROOT / ".data" / "bench"
PROJECT = "local-project"
# The e-mail service's threads in production (cloudbuild.yaml: four pushes at once).
EMAIL_THREADS = 4


@dataclass
class System:
    """A running system: its webhook's port, its processes by stage, how to count its effects."""

    name: str
    port: int
    processes: dict[str, int] = field(default_factory=dict)  # stage -> root pid
    emails: bool = True  # whether it sends e-mails at all

    def applied(self, database_url: str, prefix: str) -> tuple[int, int]:
        """(access effects, e-mails sent) for events whose ids carry `prefix`."""
        if self.name == "sync-engine":
            row = query(
                database_url,
                "select count(*) from stripe.invoices where id like %s",
                (f"in_{prefix}%",),
            )
            return (int(row[0]) if row else 0), 0
        row = query(
            database_url,
            "select (select count(*) from public.processed_events where consumer = 'access'"
            " and event_id like %(p)s and outcome <> 'pending'),"
            " (select count(*) from public.sent_emails where event_id like %(p)s)",
            {"p": f"evt_{prefix}%"},
        )
        assert row is not None
        return int(row[0]), int(row[1])


def require_wrk() -> str:
    """wrk's path; installed from Debian's packages when missing and we may."""
    if found := shutil.which("wrk"):
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing wrk (apt-get install wrk) ...", flush=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True)
    if found := shutil.which("wrk"):
        return found
    raise SystemExit("bench/cost.py needs wrk: `sudo apt-get install wrk` (Debian, Ubuntu)")


def require_sync_engine() -> Path:
    """The npm packages under .data/bench/sync-engine (never in the repository)."""
    folder = CACHE / "sync-engine"
    manifest = {"private": True, "dependencies": SYNC_ENGINE}
    installed = folder / "node_modules" / "@supabase" / "stripe-sync-engine" / "package.json"
    current = (
        installed.exists()
        and json.loads(installed.read_text())["version"]
        == SYNC_ENGINE["@supabase/stripe-sync-engine"]
    )
    if not current:
        if not shutil.which("npm"):
            raise SystemExit("bench/cost.py needs Node.js 20+ and npm for stripe-sync-engine")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps(manifest))
        print("installing stripe-sync-engine with npm ...", flush=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--quiet"], cwd=folder, check=True
        )
    return folder


@contextlib.contextmanager
def sync_engine(scratch: Path, database_url: str) -> Iterator[System]:
    folder = require_sync_engine()
    port = pubsub_emulator.free_port()
    env = os.environ | {
        "DATABASE_URL": database_url,
        "WEBHOOK_SECRET": DEV_WEBHOOK_SECRET,
        "PORT": str(port),
        "SYNC_ENGINE_DIR": str(folder),
    }
    command = ["node", str(ROOT / "bench" / "sync_engine_server.mjs")]
    with spawn(command, env, port, scratch / "sync-engine.log") as pid:
        yield System("sync-engine", port, {"server": pid}, emails=False)


@contextlib.contextmanager
def inline(
    scratch: Path, database_url: str, workers: int, threads: int, mail: dict[str, str]
) -> Iterator[System]:
    """`mail`: the senders' Resend settings (bench/resend_sink.py)."""
    env = server_env(scratch, database_url, event_bus="inline", **mail)
    with gunicorn(
        "main:app", env, workers=workers, threads=threads, clients=16, log=scratch / "inline.log"
    ) as (port, pid):
        yield System("inline", port, {"api+access+emails": pid})


@contextlib.contextmanager
def pubsub(
    scratch: Path,
    database_url: str,
    workers: int,
    threads: int,
    topic: str,
    mail: dict[str, str],
    *,
    pull: bool = False,
    extra: dict[str, str] | None = None,
) -> Iterator[System]:
    """The emulator, the access and emails targets, and the api. The targets sit behind push
    subscriptions, as the design deploys them, or (`pull`) read pull subscriptions through
    StreamingPull (`bin/serve` with SUBSCRIBER_DELIVERY=pull: access in batches). `extra`:
    settings for all three (a Stripe stand-in's address, say)."""
    with contextlib.ExitStack() as stack:
        emulator = stack.enter_context(pubsub_emulator.running(project=PROJECT))
        # The emulator pushes through local Google, which attaches Pub/Sub's push token (the
        # targets refuse a push without one).
        google = stack.enter_context(local_google.running())
        settings = {
            "event_bus": "pubsub",
            "google_cloud_project": PROJECT,
            "pubsub_topic": topic,
            "pubsub_emulator_host": emulator.host,
            **(extra or {}),
        }
        processes: dict[str, int] = {}
        endpoints: dict[str, str | None] = {}
        if pull:
            # The subscriptions first: a consumer whose subscription is missing exits.
            ensure_topology(
                filters=MESSAGE_FILTERS,
                project=PROJECT,
                topic=topic,
                push_endpoints=dict.fromkeys(("access", "emails")),
                emulator_host=emulator.host,
            )
        for target in ("access", "emails"):
            target_threads = EMAIL_THREADS if target == "emails" else threads
            env = server_env(scratch, database_url, function_target=target, **settings, **mail)
            audience = f"https://bench-{target}.run.invalid"
            env |= {"PUSH_AUDIENCE": audience, "PUSH_SERVICE_ACCOUNT": PUSH_ACCOUNT}
            env |= {"PUSH_CERTS_URL": google.certs_url}
            if pull:
                port = pubsub_emulator.free_port()
                env |= {"SUBSCRIBER_DELIVERY": "pull", "PORT": str(port)}
                env |= {"GUNICORN_THREADS": str(target_threads)}
                command = [str(ROOT / "bin" / "serve")]
                log = scratch / f"pull-{target}.log"
                processes[target] = stack.enter_context(spawn(command, env, port, log))
                continue
            port, pid = stack.enter_context(
                gunicorn(
                    "runtime.subscriber_app:create_app()",
                    env,
                    workers=1,
                    threads=target_threads,
                    clients=None,
                    log=scratch / f"push-{target}.log",
                )
            )
            processes[target] = pid
            endpoints[target] = google.push_endpoint(
                target, to=f"http://127.0.0.1:{port}/", audience=audience
            )
        if not pull:
            ensure_topology(
                filters=MESSAGE_FILTERS,
                project=PROJECT,
                topic=topic,
                push_endpoints=endpoints,
                emulator_host=emulator.host,
            )
        env = server_env(scratch, database_url, **settings)
        port, pid = stack.enter_context(
            gunicorn(
                "main:app",
                env,
                workers=workers,
                threads=threads,
                clients=16,
                log=scratch / f"{'pull' if pull else 'push'}-api.log",
            )
        )
        processes = {"api": pid, **processes, "emulator": emulator.process.pid}
        yield System("pull" if pull else "pubsub", port, processes)
