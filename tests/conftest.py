"""Fixtures: real Postgres, the real app over HTTP, Stripe and Supabase faked at their boundary."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import psycopg
import pytest
import requests

from adapters.db import migrations
from adapters.db.pool import Database, DatabaseUnavailable
from config import Settings
from dev import local_postgres
from dev.auth_stand_in import AuthStandIn
from dev.stripe_record import STRIPE_RECORD
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from runtime.container import Container
from runtime.limits import ROUTE_LIMITS
from tests.fakes.github import FakeGitHub
from tests.fakes.http import FakeServer, serve
from tests.fakes.resend import FakeResend
from tests.fakes.supabase import JWT_SECRET, SECRET_KEY, hs256_token
from tests.helpers import HANG_GUARD, empty_database, postgres_home, stripe_signature
from tests.stripe_types import recorded_problems

# Read before any test strips the environment: a CI may point the suite at its own Postgres.
EXTERNAL_DATABASE_URL = os.environ.get("DATABASE_URL")
SETTINGS_VARIABLES = [name.upper() for name in Settings.model_fields]
TABLES = (
    "auth.users, public.products, public.purchases, public.leads,"
    " public.processed_events, public.sent_emails, public.email_claims, public.disputes,"
    " public.account_deletions, public.founder_tasks, public.erased_customers,"
    " public.mrr_levels, public.mrr_movements, public.subscription_cancellations,"
    " public.retention_offers, public.scheduled_changes"
)


# Figures a test prints in a section of pytest's summary, so `make test` shows them without -s.
SECTIONS = pytest.StashKey[dict[str, list[str]]]()
SummaryLines = Callable[[str], list[str]]
# Where this process records what the Stripe stand-in says (see `pytest_configure`).
STRIPE_SAID = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SECTIONS] = {}
    # Every answer of the Stripe stand-in and every event it or the samples make, in this
    # process and in the `make run` and `make demo` it starts, is written to a file of this
    # process's own and held to Stripe's published types after each test
    # (`stripe_answers_are_stripes`).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    config.stash[STRIPE_SAID] = Path(tempfile.mkdtemp(prefix="stripe-said-"))
    os.environ[STRIPE_RECORD] = str(config.stash[STRIPE_SAID] / worker)


def pytest_unconfigure(config: pytest.Config) -> None:
    said = config.stash.get(STRIPE_SAID, None)
    if said is not None:
        shutil.rmtree(said, ignore_errors=True)
    # An xdist worker prints no summary: it hands its sections (this very dict, filled as its
    # tests run) to the controller when it finishes, and the controller prints them.
    worker_output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if worker_output is not None:
        worker_output["sections"] = config.stash[SECTIONS]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """A worker has finished (xdist): keep its sections for the controller's summary."""
    sections = node.config.stash[SECTIONS]
    for title, lines in getattr(node, "workeroutput", {}).get("sections", {}).items():
        sections.setdefault(title, []).extend(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, lines in terminalreporter.config.stash.get(SECTIONS, {}).items():
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # Schemathesis names each operation's test `test[GET /path]`, but under pytest 9 all of
        # them keep the function's node id; xdist tells tests apart by node id and would run one.
        if "[" in item.name and "[" not in item.nodeid:
            item._id = item._id.with_params(item.name.partition("[")[2].removesuffix("]"))
    # Long tests first, so that under xdist (`make test`) no worker is left alone with one at the
    # end while the others idle; the sort is stable, so the rest keep their order.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session")
def summary(pytestconfig: pytest.Config) -> SummaryLines:
    """The lines of a named section of the summary (append to them)."""
    return lambda title: pytestconfig.stash[SECTIONS].setdefault(title, [])


@pytest.fixture(autouse=True)
def stripe_answers_are_stripes() -> Iterator[None]:
    """Whatever the test drove, each answer the Stripe stand-in gave and each event it or the
    samples made is shaped as the pinned stripe-python and Stripe's fixtures have it
    (tests/stripe_types.py): a path of the stand-in is held to Stripe's types by the tests that
    drive it, with no test of its own."""
    path = Path(os.environ[STRIPE_RECORD])
    start = path.stat().st_size if path.exists() else 0
    yield
    found = recorded_problems(path, start)
    if found:
        shown = "\n".join(found[:30])
        pytest.fail(f"The Stripe stand-in said what Stripe would not:\n{shown}", pytrace=False)


@pytest.fixture(autouse=True)
def isolate_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting leaks in from the machine running the tests."""
    for name in SETTINGS_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A migrated database: a fresh one in $DATABASE_URL's server, else an embedded server (one
    per xdist worker)."""
    if EXTERNAL_DATABASE_URL:
        yield from _scratch_database(EXTERNAL_DATABASE_URL)
        return
    with postgres_home() as home, local_postgres.migrated(home / "data") as url:
        yield url


def _scratch_database(base_url: str) -> Iterator[str]:
    with empty_database(base_url) as url:
        migrations.apply_all(url, allow_auth_stand_in=True)
        yield url


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    """The test database, emptied before each test."""
    database = Database(lambda: database_url, max_size=4)
    _empty(database)
    yield database
    database.close()


def _empty(database: Database, attempts: int = 5) -> None:
    """Truncate every table. Work a previous test left running on this worker's database (an
    in-process bus still mailing what a webhook called for) may hold one table while the
    truncate holds another: Postgres ends one of the two as a deadlock, and when that is the
    truncate, it goes again."""
    for attempt in range(attempts):
        try:
            with database.transaction() as conn:
                conn.execute(f"truncate {TABLES} cascade")
            return
        except DatabaseUnavailable as exc:
            if not isinstance(exc.__cause__, psycopg.errors.DeadlockDetected):
                raise
            if attempt == attempts - 1:
                raise


class HasServer(Protocol):
    server: FakeServer


Fake = TypeVar("Fake", bound=HasServer)


def serving(fake: Fake, *, keep_alive: bool = False) -> Iterator[Fake]:
    """Serve a fake SaaS API on loopback for as long as the fixture lives."""
    for url in serve(fake.server, keep_alive=keep_alive):
        fake.server.url = url
        yield fake
    # Resend's fake is held against Resend's published document: the fixture fails when
    # anything that crossed it while served broke the document.
    if isinstance(fake, FakeResend):
        fake.assert_conforms()


def serving_stripe(stand_in: StripeStandIn) -> Iterator[StripeStandIn]:
    """Serve the Stripe stand-in (dev/stripe_stand_in.py) on loopback for as long as the
    fixture lives."""
    for url in serve(stand_in):
        stand_in.url = url
        yield stand_in


@pytest.fixture(scope="session")
def stripe_fake() -> Iterator[StripeStandIn]:
    """Stripe as the tests drive it: the one local stand-in, with no catalogue to start with
    (each test puts in the products and prices it needs)."""
    yield from serving_stripe(StripeStandIn(demo=False))


@pytest.fixture(scope="session")
def supabase_fake(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AuthStandIn]:
    """Supabase Auth as the tests drive it: the one local stand-in (dev/auth_stand_in.py),
    keeping its users in the test database; any API key passes its gateway, the admin routes
    take the secret ones; magic links it mails go to `stand_in.outbox`."""
    stand_in = AuthStandIn(
        database_url=database_url,
        secret_keys=frozenset({"service-role-key", SECRET_KEY}),
        jwt_secret=JWT_SECRET,
        outbox=tmp_path_factory.mktemp("auth-outbox"),
    )
    for url in serve(stand_in):
        stand_in.url = url
        yield stand_in


@pytest.fixture
def fakes(
    stripe_fake: StripeStandIn, supabase_fake: AuthStandIn
) -> tuple[StripeStandIn, AuthStandIn]:
    stripe_fake.reset()
    supabase_fake.reset()
    return stripe_fake, supabase_fake


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """GitHub's API, faked at its HTTP boundary."""
    yield from serving(FakeGitHub())


@pytest.fixture
def gh_api(api_factory: Callable[..., Api], github: FakeGitHub) -> Api:
    """The API with a GitHub token, speaking to the fake."""
    return api_factory(github_token="ghp_test", github_api_url=github.server.url)


@pytest.fixture
def resend() -> Iterator[FakeResend]:
    yield from serving(FakeResend())


@pytest.fixture
def settings_factory(
    database_url: str, fakes: tuple[StripeStandIn, AuthStandIn], tmp_path: Path
) -> Callable[..., Settings]:
    """Settings for a test: real database, fake SaaS origins; override any field."""
    stripe, supabase = fakes

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "app_env": "test",
            "database_url": database_url,
            "stripe_secret_key": "sk_test_fake",
            "stripe_api_base": stripe.url,
            "supabase_url": supabase.url,
            "supabase_publishable_key": "anon-key",
            "supabase_jwt_secret": JWT_SECRET,
            "email_outbox_dir": tmp_path / "outbox",
            "data_dir": tmp_path / "data",
            # Limits are tested on their own (tests/runtime/test_limits.py); here they stay out
            # of the way of tests that send many requests from one address.
            **{setting: "10000/minute" for setting in ROUTE_LIMITS.values()},
        }
        return Settings(**{**values, **overrides})

    return make


@dataclass
class Api:
    url: str
    container: Container

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.post(self.url + path, timeout=HANG_GUARD, allow_redirects=False, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.get(self.url + path, timeout=HANG_GUARD, allow_redirects=False, **kwargs)

    def options(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.options(
            self.url + path, timeout=HANG_GUARD, allow_redirects=False, **kwargs
        )

    def token(self, **claims: Any) -> str:
        """An HS256 access token as the project this app trusts issues it; override any part."""
        settings = self.container.settings
        project = {"issuer": str(settings.auth_issuer)}
        if settings.supabase_jwt_secret is not None:
            project["secret"] = settings.supabase_jwt_secret.get_secret_value()
        return hs256_token(**{**project, **claims})


@pytest.fixture
def api_factory(
    settings_factory: Callable[..., Settings], db: Database
) -> Iterator[Callable[..., Api]]:
    """Start the real app over HTTP with settings overrides; stopped after the test."""
    started: list[tuple[Generator[str, None, None], Container]] = []

    def start(**overrides: Any) -> Api:
        container = Container(settings_factory(**overrides))
        server = serve(create_app(container=container))
        started.append((server, container))
        return Api(url=next(server), container=container)

    yield start
    for server, container in started:
        container.close()
        server.close()


@pytest.fixture
def api(api_factory: Callable[..., Api]) -> Api:
    return api_factory()


# Secrets a production deployment could have: none public, each one distinctive.
PRODUCTION_SECRETS = {
    "supabase_jwt_secret": "prod-jwt-secret-5a1f0c9e7b3d4e2f8a6b1c0d9e8f7a6b",
    "supabase_secret_key": "service-role-key",
    "stripe_webhook_secret": "whsec_prod_4f9d2c7a1e8b6d3f0a5c9e2b7d4f1a8c",
    "resend_api_key": "re_prod_8c1e4a7d2f9b6e3a0d5c8f1b4e7a2d9c",
}


@pytest.fixture
def production_api(api_factory: Callable[..., Api], resend: FakeResend) -> Callable[..., Api]:
    """The app with production's settings: Resend (faked), Pub/Sub (never reached unless a
    route publishes), SITE_URL, no public secret; override any of them."""

    def start(**overrides: Any) -> Api:
        values: dict[str, Any] = {
            "app_env": "production",
            "event_bus": "pubsub",
            "pubsub_emulator_host": "127.0.0.1:9",
            "site_url": "https://shop.acme.dev",
            "stripe_publishable_key": "pk_test_fake",
            "resend_api_url": resend.server.url,
            **PRODUCTION_SECRETS,
        }
        return api_factory(**{**values, **overrides})

    return start


@pytest.fixture
def sign() -> Callable[..., str]:
    return stripe_signature
