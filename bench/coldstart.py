"""Cold starts: from `bin/serve`'s process start to its first real request answered, per target.

`uv run python bench/coldstart.py` starts each target (`api`, `access`, `emails`) `--runs`
times with the exact command the container runs, as the image runs it: a venv of the locked
dependencies without the dev group and its bytecode compiled (`uv sync --no-dev` with
UV_COMPILE_BYTECODE=1; the Dockerfile compiles it hash-based, which loads the same), the code's
bytecode compiled (the Dockerfile's `compileall`), nothing written back
(PYTHONDONTWRITEBYTECODE=1) and production's processes: one worker each (the settings'
default; cloudbuild.yaml). The clock starts just before the process is spawned and stops when
the first real request has been answered:

- api: `GET /api/products/public`, the price list a first visitor's page loads (a Postgres
  read through the pool it opens);
- access: a push of a `checkout.session.completed` with Pub/Sub's token (as Cloud Run forwards
  it after its invoker check), answered 200 once the grant is committed;
- emails: a push of the purchase confirmation access announces, answered 200 once the mail is
  in the outbox and recorded.

The request is sent as soon as the port accepts a connection (gunicorn binds it in the master,
before any worker runs; the connection waits in the backlog until a worker takes it), so the
figure is what the first buyer after a quiet hour waits on top of the container's own start.
Each answer is checked (200, the grant or the mail in Postgres).

The same runs, interleaved, of the code at `--before` (default `main`), extracted with
`git archive` into a scratch directory, give the baseline. See bench/README.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resend_sink import resend_sink
from servers import postgres, server_env, tree_cpu

from access.announcements import Recipient, access_granted
from access.checkouts import checkout_from
from adapters.bus.topology import ensure_topology
from adapters.db.pool import Database
from core.events import parse_event
from dev import pubsub_emulator
from dev.local_google import PUSH_ACCOUNT, id_token_claims, new_key, remove_signature, sign
from runtime.consumers import MESSAGE_FILTERS

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".data" / "bench"
TARGETS = ("api", "access", "emails")
# Production's processes per instance (cloudbuild.yaml): emails sends from one process.
WORKERS = {"api": 1, "access": 1, "emails": 1}
AUDIENCE = "https://bench-coldstart.run.invalid"
PROJECT = "local-project"
TOPIC = "bench-coldstart"
PRICE = "price_demo_team_monthly"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Process start to first answered request.")
    parser.add_argument("--runs", type=int, default=5, help="starts per target and tree")
    parser.add_argument("--before", default="main", help="git ref of the baseline; '' for none")
    parser.add_argument("--target", action="append", choices=TARGETS, help="default: all")
    parser.add_argument(
        "--importtime",
        action="store_true",
        help="run the servers with `python -X importtime` (slower; see their logs)",
    )
    parser.add_argument(
        "--logs", type=Path, help="the servers' logs (default .data/bench/coldstart-logs)"
    )
    args = parser.parse_args()
    if not 1 <= args.runs <= 20:
        parser.error("keep it bounded: 1 to 20 runs")
    return args


def production_venv() -> Path:
    """The locked dependencies without the dev group, bytecode compiled, as in the image."""
    venv = CACHE / "coldstart-venv"
    env = os.environ | {
        "UV_PROJECT_ENVIRONMENT": str(venv),
        "UV_COMPILE_BYTECODE": "1",
        "UV_LINK_MODE": "copy",
    }
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(
        [
            os.environ.get("UV", "uv"),
            "sync",
            "--frozen",
            "--no-dev",
            "--no-install-project",
            "--quiet",
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return venv / "bin"


def extract(ref: str, into: Path) -> Path:
    """The tree at `ref`, outside the repository (git archive)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def compile_tree(tree: Path, python: Path) -> None:
    """The Dockerfile's `python -m compileall -q -x '/\\.venv/' /app`."""
    subprocess.run(
        [str(python), "-m", "compileall", "-q", "-x", r"/\.(venv|data|git)/", str(tree)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


@dataclass
class Request:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    # SQL that finds a row once the request's effect is in Postgres; None: the answer's products.
    check: str | None


def push_token() -> str:
    claims = id_token_claims(audience=AUDIENCE, email=PUSH_ACCOUNT)
    return remove_signature(sign(claims, new_key(), "bench-1"))


def envelope(body: bytes, target: str) -> bytes:
    event = json.loads(body)
    return json.dumps(
        {
            "message": {
                "data": base64.b64encode(body).decode(),
                "attributes": {"event_id": event["id"], "event_type": event["type"]},
                "messageId": uuid.uuid4().hex,
                "publishTime": "2026-11-26T10:00:00.000Z",
            },
            "subscription": f"projects/local-project/subscriptions/{target}-push",
        }
    ).encode()


def checkout_event(user_id: str, email: str) -> bytes:
    session = f"cs_cold_{uuid.uuid4().hex[:12]}"
    return json.dumps(
        {
            "id": f"evt_cold_{uuid.uuid4().hex[:20]}",
            "object": "event",
            "api_version": "2023-08-16",
            "created": int(time.time()),
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": "checkout.session.completed",
            "data": {
                "object": {
                    "id": session,
                    "object": "checkout.session",
                    "client_reference_id": user_id,
                    "customer": f"cus_{session}",
                    "payment_status": "paid",
                    "metadata": {"price_id": PRICE},
                    "amount_total": 2900,
                    "currency": "usd",
                    "customer_details": {"email": email},
                }
            },
        }
    ).encode()


def first_request(target: str, db: Database, token: str) -> Request:
    """A fresh request of the kind the target's first caller sends, and how to see it done."""
    if target == "api":
        return Request("GET", "/api/products/public", b"", {}, None)
    email = f"cold_{uuid.uuid4().hex[:12]}@example.com"
    with db.transaction() as conn:
        row = conn.execute(
            "insert into auth.users (id, email) values (gen_random_uuid(), %s) returning id",
            (email,),
        ).fetchone()
    assert row is not None
    user_id = str(row["id"])
    body = checkout_event(user_id, email)
    event_id = json.loads(body)["id"]
    check = f"select 1 from public.processed_events where event_id = '{event_id}'"  # noqa: S608
    if target == "emails":
        source = parse_event(json.loads(body))
        checkout = checkout_from(source)
        assert checkout is not None
        _, body = access_granted(
            source,
            checkout,
            to=Recipient(email=email, name=None),
            price_id=PRICE,
            receipt_url=None,
        )
        check = f"select 1 from public.sent_emails where recipient = '{email}'"  # noqa: S608
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return Request("POST", "/", envelope(body, target), headers, check)


def answer(port: int, request: Request, process: subprocess.Popen[bytes]) -> tuple[int, bytes]:
    """Send `request` as soon as the port accepts a connection; its status and body."""
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}) before answering")
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            time.sleep(0.002)
            continue
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.sock = sock
        try:
            conn.request(request.method, request.path, body=request.body, headers=request.headers)
            response = conn.getresponse()
            return response.status, response.read()
        except (ConnectionResetError, http.client.RemoteDisconnected):
            time.sleep(0.002)  # bound by a master whose worker is not up yet: ask again
        finally:
            conn.close()


def cold_start(
    tree: Path, target: str, env: dict[str, str], db: Database, token: str, log: Path
) -> tuple[float, float]:
    """Seconds from spawning `bin/serve` to the first request answered (and checked), and the
    CPU seconds its processes had used by then (what a shared machine's load does not move)."""
    request = first_request(target, db, token)
    port = pubsub_emulator.free_port()
    workers = str(WORKERS[target])
    env = env | {"FUNCTION_TARGET": target, "PORT": str(port), "WEB_CONCURRENCY": workers}
    with log.open("wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            [str(tree / "bin" / "serve")],
            cwd=tree,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        status, body = answer(port, request, process)
        seconds = time.perf_counter() - started
        cpu = tree_cpu(process.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if status != 200:
        raise RuntimeError(f"{target} answered {status} (see {log})")
    if request.check is None:
        if not json.loads(body).get("products"):
            raise RuntimeError(f"{target} answered no products: {body[:200]!r} (see {log})")
    elif not db.fetch_all(request.check):
        raise RuntimeError(f"{target} answered 200 but its effect is not in Postgres (see {log})")
    return seconds, cpu


def summary(seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return f"{min(ms):6.0f} {statistics.median(ms):6.0f} {max(ms):6.0f}"


def main() -> None:
    args = arguments()
    targets = args.target or list(TARGETS)
    CACHE.mkdir(parents=True, exist_ok=True)
    bin_dir = production_venv()
    python = bin_dir / "python"
    scratch = Path(tempfile.mkdtemp(prefix="coldstart-", dir=CACHE))
    try:
        trees = {"after": ROOT}
        if args.before:
            trees = {"before": extract(args.before, scratch / "before"), **trees}
        for tree in trees.values():
            compile_tree(tree, python)
        with (
            postgres(scratch, customers=0) as url,
            resend_sink(scratch) as sink,
            pubsub_emulator.running(project=PROJECT) as emulator,
        ):
            # Where access announces what it committed; nothing reads it here.
            ensure_topology(
                filters=MESSAGE_FILTERS,
                project=PROJECT,
                topic=TOPIC,
                push_endpoints={},
                emulator_host=emulator.host,
            )
            db = Database(lambda: url)
            settings = {
                "event_bus": "pubsub",
                "google_cloud_project": PROJECT,
                "pubsub_topic": TOPIC,
                "pubsub_emulator_host": emulator.host,
                "push_audience": AUDIENCE,
                "push_service_account": PUSH_ACCOUNT,
            }
            env = (
                server_env(scratch, url, **settings)
                | sink.settings()
                | {
                    "PATH": os.pathsep.join((str(bin_dir), os.environ.get("PATH", ""))),
                    "PYTHONDONTWRITEBYTECODE": "1",
                }
            )
            env.pop("VIRTUAL_ENV", None)
            if args.importtime:
                env["PYTHONPROFILEIMPORTTIME"] = "1"
            logs = args.logs or CACHE / "coldstart-logs"
            logs.mkdir(parents=True, exist_ok=True)
            token = push_token()
            results: dict[tuple[str, str], list[float]] = {}
            cpus: dict[tuple[str, str], list[float]] = {}
            for run in range(args.runs):
                for target in targets:
                    for name, tree in trees.items():
                        log = logs / f"{name}-{target}-{run + 1}.log"
                        seconds, cpu = cold_start(tree, target, env, db, token, log)
                        results.setdefault((name, target), []).append(seconds)
                        cpus.setdefault((name, target), []).append(cpu)
                        print(
                            f"run {run + 1} {target:6} {name:6} {seconds * 1000:6.0f} ms,"
                            f" CPU {cpu * 1000:6.0f} ms"
                        )
            db.close()
        print(f"\nprocess start to first answered request, ms ({args.runs} runs each)")
        print(f"{'':16} {'wall clock':^20}   {'CPU (all processes)':^20}")
        columns = f"{'min':>6} {'median':>6} {'max':>6}"
        print(f"{'target':8} {'tree':7} {columns}   {columns}")
        for target in targets:
            for name in trees:
                key = (name, target)
                print(f"{target:8} {name:7} {summary(results[key])}   {summary(cpus[key])}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
