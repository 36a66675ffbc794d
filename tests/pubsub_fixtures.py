"""Fixtures for the Pub/Sub tests: the real emulator, and the API and the access target served
by real server processes, as they run in production.

A test module imports the `*_fixture` functions; pytest knows them by their `name=`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from adapters.bus.topology import PushPolicy, ensure_topology
from adapters.db.pool import Database
from dev import pubsub_emulator
from dev.processes import Target
from dev.processes import spawn as start_process
from dev.stripe_stand_in import StripeStandIn
from runtime.consumers import MESSAGE_FILTERS
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD, stripe_signature

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROJECT = "local-project"
TOPIC = "payment-events"
# Quick retries so a failed push comes back within about a second (production waits 10 s).
TEST_POLICY = PushPolicy(ack_deadline=10, min_backoff=0.1, max_backoff=1.0, max_delivery_attempts=5)
# A CI must run these tests: there, a missing emulator is a failure, never a skip.
IN_CI = os.environ.get("CI", "").lower() == "true"


@dataclass
class PubSub:
    """The session's emulator; tests may stop it and bring it back on the same port."""

    emulator: pubsub_emulator.Emulator

    @property
    def host(self) -> str:
        return self.emulator.host

    def stop(self) -> None:
        self.emulator.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The emulator stopped (SIGSTOP) and continued after (SIGCONT): what is sent to it
        meanwhile waits, as behind a slow Pub/Sub."""
        group = self.emulator.process.pid  # started in a session of its own
        os.killpg(group, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(group, signal.SIGCONT)

    def ensure_running(self) -> None:
        """Start it again (same port, empty state) if a test stopped it."""
        if self.emulator.process.poll() is None:
            return
        self.emulator = pubsub_emulator.start(
            project=PROJECT, port=self.emulator.port, timeout=HANG_GUARD
        )

    def ensure_topology(self, push_endpoints: dict[str, str]) -> None:
        ensure_topology(
            filters=MESSAGE_FILTERS,
            project=PROJECT,
            topic=TOPIC,
            push_endpoints=push_endpoints,
            policy=TEST_POLICY,
            emulator_host=self.host,
        )


@pytest.fixture(scope="session", name="pubsub")
def pubsub_fixture() -> Iterator[PubSub]:
    """The real Pub/Sub emulator (fails the tests when it cannot run; see docs/testing.md)."""
    try:
        emulator = pubsub_emulator.start(project=PROJECT, timeout=HANG_GUARD)
    except pubsub_emulator.EmulatorUnavailable as exc:
        # Failing, not skipping, also outside CI: these tests are the proof that nothing is lost.
        pytest.fail(f"the Pub/Sub emulator is required (CI={IN_CI}): {exc}")
    state = PubSub(emulator)
    try:
        yield state
    finally:
        state.stop()


Service = Target


def spawn(command: list[str], *, env: dict[str, str], port: int, log: Path) -> Service:
    """Start a server on 127.0.0.1:`port`; returns once it answers HTTP (fails the test if not)."""
    try:
        return start_process(command[0], command, env=env, port=port, log=log, timeout=HANG_GUARD)
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module", name="service_env")
def service_env_fixture(
    pubsub: PubSub,
    database_url: str,
    stripe_fake: StripeStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, str]:
    """The environment of the server processes: the tests' database, fakes and emulator."""
    scratch = tmp_path_factory.mktemp("services")
    inherited = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    return inherited | {
        "APP_ENV": "test",
        "DATABASE_URL": database_url,
        "STRIPE_SECRET_KEY": "sk_test_fake",
        "STRIPE_API_BASE": stripe_fake.url,
        "EMAIL_OUTBOX_DIR": str(scratch / "outbox"),
        "DATA_DIR": str(scratch / "data"),
        "EVENT_BUS": "pubsub",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "PUBSUB_TOPIC": TOPIC,
        "PUBSUB_EMULATOR_HOST": pubsub.host,
    }


@pytest.fixture(scope="module", name="access_target")
def access_target_fixture(
    service_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """`functions-framework --target=access`, as the access service runs it."""
    port = pubsub_emulator.free_port()
    command = [
        str(BIN / "functions-framework"),
        *("--target=access", "--source=main.py", "--signature-type=cloudevent"),
        *("--host=127.0.0.1", f"--port={port}"),
    ]
    log = tmp_path_factory.mktemp("access") / "access.log"
    service = spawn(command, env=service_env | {"THREADS": "8"}, port=port, log=log)
    yield service
    service.stop()


@pytest.fixture(scope="module", name="api_server")
def api_server_fixture(
    service_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """`gunicorn main:app` with the service's gunicorn.conf.py and EVENT_BUS=pubsub."""
    port = pubsub_emulator.free_port()
    command = [
        str(BIN / "gunicorn"),
        *("--config=gunicorn.conf.py", f"--bind=127.0.0.1:{port}", "--workers=1"),
        "main:app",
    ]
    log = tmp_path_factory.mktemp("api") / "api.log"
    service = spawn(command, env=service_env, port=port, log=log)
    yield service
    service.stop()


@dataclass
class Pipeline:
    """API process -> emulator -> push subscription -> access process -> Postgres."""

    api: Service
    pubsub: PubSub
    access: Service
    db: Database

    def connect(self) -> None:
        """The topic and the push subscription to the access target (again after a restart)."""
        self.pubsub.ensure_running()
        self.pubsub.ensure_topology({"access": self.access.url + "/"})

    def post_event(self, body: bytes) -> requests.Response:
        """POST a Stripe event to the API's webhook, signed now, as Stripe (re)sends it."""
        return requests.post(
            self.api.url + "/api/webhook/payments",
            data=body,
            headers={
                "Stripe-Signature": stripe_signature(body),
                "Content-Type": "application/json",
            },
            timeout=HANG_GUARD,
        )

    def access_log_count(self, *needles: str) -> int:
        """How many lines of the access target's log contain every needle."""
        return sum(all(n in line for n in needles) for line in self.access.output().splitlines())


def post_event(api_url: str, body: bytes) -> requests.Response:
    """POST a Stripe event to the webhook, signed now, as Stripe sends it (and re-sends it)."""
    return requests.post(
        api_url + "/api/webhook/payments",
        data=body,
        headers={"Stripe-Signature": stripe_signature(body), "Content-Type": "application/json"},
        timeout=HANG_GUARD,
    )


@pytest.fixture(name="pipeline")
def pipeline_fixture(
    pubsub: PubSub, api_server: Service, access_target: Service, db: Database
) -> Pipeline:
    pipe = Pipeline(api=api_server, pubsub=pubsub, access=access_target, db=db)
    pipe.connect()
    return pipe
