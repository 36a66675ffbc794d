"""An upgrade of a live deployment, on the emulator stack: nothing lost, nothing done twice.

The previous release is the newest commit before this one, on the first-parent line, that
changed the schema (`supabase/`) or the bus topology (`cloudbuild.yaml`, the topology, the
filters, what each subscriber consumes); `UPGRADE_FROM=<commit>` picks another. Its tree
(`git archive`) runs as processes with `bin/serve`, as its image would: it migrates a new
database, makes its subscriptions and serves a stream of signed checkouts. Then, as the build
does: this release's migrations are applied while the previous release serves (and it keeps
applying events on the new schema), this release's targets start, its subscriptions are made
beside the previous ones (a subscriber whose filter or name changed gets a new one, given the
old one's backlog), the api's traffic moves, the old subscriptions and targets go. Every
checkout sent is then applied exactly once (one grant, access given) and its purchase mail
recorded and written exactly once, and the figures are printed in the summary. Then a rollback
(the previous release's targets take the traffic and the pushes again, on this release's
subscriptions) and forward again, checkouts flowing each way: still each exactly once.

The emulator takes a snapshot and a seek but carries no backlog into a subscription made after
the snapshot (Pub/Sub does), so here the old subscription is deleted once what was published
before the new one existed has been handled: "both deliver while the new one catches up".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
import requests

from adapters.bus.topology import clients, ensure_topology
from adapters.db import migrations
from adapters.db.pool import Database
from dev import local_google
from dev.local_google import PUSH_ACCOUNT, LocalGoogle
from dev.processes import Target, spawn
from dev.pubsub_emulator import free_port
from dev.stripe_stand_in import StripeStandIn
from runtime.consumers import MESSAGE_FILTERS, subscription_of
from tests.conftest import SETTINGS_VARIABLES, SummaryLines
from tests.helpers import (
    HANG_GUARD,
    create_user,
    empty_database,
    stripe_event,
    stripe_signature,
    wait_for,
)
from tests.pubsub_fixtures import (  # noqa: F401  # fixtures: pytest finds them by name
    PROJECT,
    TEST_POLICY,
    PubSub,
    pubsub_fixture,
)

pytestmark = [pytest.mark.long, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in {"1", "true"}
# What makes a release for this test: its schema or its Pub/Sub topology.
RELEASE_PATHS = (
    "supabase/",
    "cloudbuild.yaml",
    "adapters/bus/topology.py",
    "adapters/bus/filters.py",
    "core/consumers.py",
    "runtime/consumers.py",
)
PRICE = "price_demo_monthly"
BATCH = 8  # checkouts per phase of the upgrade
PHASES = 8
PURCHASE_MAIL = "purchase-confirmation"


def _git(*args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=HANG_GUARD
    )
    if result.returncode != 0:
        _missing(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def _missing(what: str) -> None:
    if IN_CI:
        pytest.fail(f"the upgrade test needs {what}")
    pytest.skip(what)


def previous_release() -> str:
    """The commit of the previous release (see the module's docstring)."""
    if chosen := os.environ.get("UPGRADE_FROM"):
        return _git("rev-parse", "--verify", f"{chosen}^{{commit}}")
    found = _git("log", "--first-parent", "-1", "--format=%H", "HEAD~1", "--", *RELEASE_PATHS)
    if not found:
        _missing("a previous commit that changed the schema or the topology (a full clone)")
    return found


def extract(commit: str, into: Path) -> Path:
    """The tree of `commit`, as `git archive` gives it."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=HANG_GUARD,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_in(tree: Path, code: str, env: dict[str, str]) -> None:
    """Python `code` run with `tree`'s modules (another release's), failing the test on error."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert result.returncode == 0, f"in {tree.name}:\n{code}\n{result.stderr[-3000:]}"


@dataclass
class Release:
    """One release's three targets, run from its own tree."""

    name: str
    tree: Path
    env: dict[str, str]
    logs: Path
    google: LocalGoogle
    targets: dict[str, Target] = field(default_factory=dict)
    pushes: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        for target in ("access", "emails", "api"):
            port = free_port()
            env = self.env | {
                "FUNCTION_TARGET": target,
                "PORT": str(port),
                "WEB_CONCURRENCY": "1",
                "PYTHONPATH": str(self.tree),
            }
            if target != "api":
                # The subscribers refuse a push without Pub/Sub's token: local Google signs one.
                audience = f"http://127.0.0.1:{port}"
                env |= {
                    "PUSH_AUDIENCE": audience,
                    "PUSH_SERVICE_ACCOUNT": PUSH_ACCOUNT,
                    "PUSH_CERTS_URL": self.google.certs_url,
                }
                self.pushes[target] = self.google.push_endpoint(
                    f"{self.name}-{target}", to=audience + "/", audience=audience
                )
            log = self.logs / f"{self.name}-{target}.log"
            try:
                self.targets[target] = spawn(
                    f"{self.name} {target}",
                    [str(self.tree / "bin" / "serve")],
                    env=env,
                    port=port,
                    log=log,
                    timeout=HANG_GUARD,
                )
            except RuntimeError as exc:
                pytest.fail(str(exc))

    def endpoints(self) -> dict[str, str]:
        """Where the emulator pushes for each subscriber: through local Google, to it."""
        return dict(self.pushes)

    def stop(self) -> None:
        for target in self.targets.values():
            target.stop()


@dataclass
class Stream:
    """Signed checkouts sent to whichever api serves now, one user each."""

    users: list[tuple[str, str]]
    api_url: str
    sent: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    # Each event's buyer and subscription.
    of: dict[str, tuple[str, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    taken: int = 0

    def send(self, count: int) -> None:
        for _ in range(count):
            with self.lock:
                user, email = self.users[self.taken]
                self.taken += 1
                url = self.api_url
            n = uuid.uuid4().hex[:12]
            session = {
                "id": f"cs_up_{n}",
                "object": "checkout.session",
                "client_reference_id": user,
                "customer": f"cus_up_{n}",
                "subscription": f"sub_up_{n}",
                "mode": "subscription",
                "metadata": {"price_id": PRICE},
                "payment_status": "paid",
                "amount_total": 1900,
                "currency": "usd",
                "customer_details": {"email": email, "name": "Ada"},
            }
            body = stripe_event("checkout.session.completed", session, event_id=f"evt_up_{n}")
            answer = requests.post(
                url + "/api/webhook/payments",
                data=body,
                headers={"Stripe-Signature": stripe_signature(body)},
                timeout=HANG_GUARD,
            )
            with self.lock:
                (self.sent if answer.status_code == 200 else self.refused).append(f"evt_up_{n}")
                self.of[f"evt_up_{n}"] = (email, f"sub_up_{n}")

    def in_background(self, count: int) -> threading.Thread:
        thread = threading.Thread(target=self.send, args=(count,), daemon=True)
        thread.start()
        return thread


def settled(db: Database, stream: Stream, events: list[str]) -> bool:
    """Each of `events` applied by access and its purchase mail recorded."""
    if not events:
        return True
    applied = db.fetch_all(
        "select count(*) as n from public.processed_events where event_id = any(%s)", (events,)
    )
    mailed = db.fetch_all(
        "select count(*) as n from public.sent_emails where kind = %s and recipient = any(%s)",
        (PURCHASE_MAIL, [stream.of[e][0] for e in events]),
    )
    return bool(applied[0]["n"] == len(events) and mailed[0]["n"] == len(events))


@pytest.fixture
def google() -> Iterator[LocalGoogle]:
    with local_google.running() as running:
        yield running


@pytest.fixture
def scratch_db(database_url: str) -> Iterator[str]:
    with empty_database(database_url) as url:
        yield url


def test_an_upgrade_loses_no_event_and_does_none_twice(
    pubsub: PubSub,
    scratch_db: str,
    stripe_fake: StripeStandIn,
    tmp_path: Path,
    summary: SummaryLines,
    google: LocalGoogle,
) -> None:
    pubsub.ensure_running()
    commit = previous_release()
    previous_tree = extract(commit, tmp_path / "previous")
    topic = f"upgrade-{uuid.uuid4().hex[:8]}"
    base_env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES} | {
        "APP_ENV": "test",
        "DATABASE_URL": scratch_db,
        "STRIPE_SECRET_KEY": "sk_test_fake",
        "STRIPE_API_BASE": stripe_fake.url,
        "EMAIL_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DATA_DIR": str(tmp_path / "data"),
        "EVENT_BUS": "pubsub",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "PUBSUB_TOPIC": topic,
        "PUBSUB_EMULATOR_HOST": pubsub.host,
    }
    # The previous release makes the database, its catalogue and its subscriptions.
    run_in(
        previous_tree,
        "import os\nfrom adapters.db import migrations\n"
        "migrations.apply_all(os.environ['DATABASE_URL'], allow_auth_stand_in=True)\n"
        "from adapters.db.pool import Database\nfrom dev.samples.catalogue import"
        " seed_demo_products\nseed_demo_products(Database(lambda: os.environ['DATABASE_URL']))",
        base_env,
    )
    db = Database(lambda: scratch_db, max_size=2)
    users = [
        (create_user(db, f"up{i}@example.com"), f"up{i}@example.com") for i in range(PHASES * BATCH)
    ]
    logs = tmp_path / "logs"
    logs.mkdir()
    old = Release("previous", previous_tree, base_env, logs, google)
    new = Release("this", ROOT, base_env, logs, google)
    try:
        old.start()
        policy = TEST_POLICY
        run_in(
            previous_tree,
            "import inspect, json, os\n"
            "from adapters.bus.topology import PushPolicy, ensure_topology\n"
            # Releases since the layout move pass their filters in; earlier ones read their own.
            "extra = {}\nif 'filters' in inspect.signature(ensure_topology).parameters:\n"
            "    from runtime.consumers import MESSAGE_FILTERS\n"
            "    extra['filters'] = MESSAGE_FILTERS\n"
            f"ensure_topology(**extra, project={PROJECT!r}, topic={topic!r},"
            f" push_endpoints=json.loads(os.environ['ENDPOINTS']),"
            f" policy=PushPolicy(ack_deadline={policy.ack_deadline},"
            f" min_backoff={policy.min_backoff}, max_backoff={policy.max_backoff},"
            f" max_delivery_attempts={policy.max_delivery_attempts}),"
            f" emulator_host={pubsub.host!r})",
            base_env | {"ENDPOINTS": json.dumps(old.endpoints())},
        )
        previous_subscriptions = _subscriptions(pubsub, topic)
        stream = Stream(users, old.targets["api"].url)

        # 1. The previous release serves.
        stream.send(BATCH)
        wait_for(lambda: settled(db, stream, list(stream.sent)))
        # 2. This release's migrations, while the previous release serves; it goes on
        #    applying events on the new schema.
        during = stream.in_background(BATCH)
        migrations.apply_all(scratch_db, allow_auth_stand_in=True)
        during.join(HANG_GUARD)
        stream.send(BATCH)
        on_new_schema = list(stream.sent)
        wait_for(lambda: settled(db, stream, on_new_schema))
        # 3. This release's targets; its subscriptions beside the old ones, while checkouts
        #    flow; the old ones go once what only they held is handled.
        new.start()
        flowing = stream.in_background(BATCH)

        def caught_up() -> None:
            published = list(stream.sent)
            wait_for(lambda: settled(db, stream, published))

        ensure_topology(
            project=PROJECT,
            topic=topic,
            push_endpoints=new.endpoints(),
            policy=TEST_POLICY,
            emulator_host=pubsub.host,
            filters=MESSAGE_FILTERS,
            before_retiring=caught_up,
        )
        flowing.join(HANG_GUARD)
        # 4. The api's traffic moves; the previous release stops.
        with stream.lock:
            stream.api_url = new.targets["api"].url
        stream.send(BATCH)
        old.stop()
        stream.send(BATCH)
        wait_for(lambda: settled(db, stream, list(stream.sent)))
        # 5. A rollback, as ops/rollback.sh makes it: the previous release's revisions take the
        #    traffic again behind the same services (here: the pushes of this release's
        #    subscriptions, which stay, go to them, and so do the checkouts), while this
        #    release's revisions keep running untouched; then forward again.
        old.start()
        ensure_topology(
            project=PROJECT,
            topic=topic,
            push_endpoints=old.endpoints(),
            policy=TEST_POLICY,
            emulator_host=pubsub.host,
            filters=MESSAGE_FILTERS,
        )
        with stream.lock:
            stream.api_url = old.targets["api"].url
        stream.send(BATCH)
        rolled_back = list(stream.sent)
        wait_for(lambda: settled(db, stream, rolled_back))
        ensure_topology(
            project=PROJECT,
            topic=topic,
            push_endpoints=new.endpoints(),
            policy=TEST_POLICY,
            emulator_host=pubsub.host,
            filters=MESSAGE_FILTERS,
        )
        with stream.lock:
            stream.api_url = new.targets["api"].url
        old.stop()
        stream.send(BATCH)
        wait_for(lambda: settled(db, stream, list(stream.sent)))
        current_subscriptions = _subscriptions(pubsub, topic)
        figures = _figures(db, stream, tmp_path / "outbox")
    finally:
        new.stop()
        old.stop()
        db.close()
        # Shown by pytest only when the test failed.
        for log in sorted(logs.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")

    assert stream.refused == [], "the webhook acknowledged every checkout"
    assert current_subscriptions == {subscription_of(topic, t) for t in ("access", "emails")}, (
        "only this release's subscriptions are left"
    )
    sent = len(stream.sent)
    assert sent == PHASES * BATCH
    assert figures["applied"] == sent, figures
    assert figures["granted"] == sent, figures
    assert figures["grants"] == sent, "one grant per checkout, none doubled"
    assert figures["mails recorded"] == sent, figures
    assert figures["mails written"] == sent, "one purchase mail per checkout in the outbox"
    summary("upgrade").append(
        f"from {commit[:10]} ({', '.join(sorted(previous_subscriptions))}) to this tree"
        f" ({', '.join(sorted(current_subscriptions))}): "
        + ", ".join(f"{name} {value}" for name, value in figures.items())
    )


def _subscriptions(pubsub: PubSub, topic: str) -> set[str]:
    with clients(pubsub.host) as (_, subscriber):
        found = subscriber.list_subscriptions(request={"project": f"projects/{PROJECT}"})
        return {s.name.rsplit("/", 1)[-1] for s in found if s.topic.endswith(f"/topics/{topic}")}


def _figures(db: Database, stream: Stream, outbox: Path) -> dict[str, Any]:
    emails = [email for _, email in stream.users[: len(stream.sent)]]
    applied = db.fetch_all(
        "select count(*) as n from public.processed_events where event_id = any(%s)",
        (stream.sent,),
    )[0]["n"]
    granted = db.fetch_all(
        "select count(*) as n from public.profiles where has_access and email = any(%s)",
        (emails,),
    )[0]["n"]
    grants = db.fetch_all(
        "select count(*) as n from public.entitlements where source_id = any(%s)",
        ([stream.of[e][1] for e in stream.sent],),
    )[0]["n"]
    recorded = db.fetch_all(
        "select count(*) as n from public.sent_emails where kind = %s and recipient = any(%s)",
        (PURCHASE_MAIL, emails),
    )[0]["n"]
    written = sum(
        1
        for path in outbox.rglob("*.eml")
        if any(f"To: {email}" in path.read_text(errors="replace") for email in emails)
    )
    return {
        "events sent": len(stream.sent),
        "applied": applied,
        "granted": granted,
        "grants": grants,
        "mails recorded": recorded,
        "mails written": written,
    }
