"""The local stack `make run` and `make demo` share: database, bus, subscriber targets.

Without DATABASE_URL an embedded Postgres runs under `.data/postgres`. With EVENT_BUS=pubsub
the whole pipeline runs as in production: the Pub/Sub emulator (started here unless
PUBSUB_EMULATOR_HOST names one), and the `access` and `emails` targets as processes of their
own (`bin/serve`), fed by push subscriptions. Each step that makes a person wait says so.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping

from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import BaseWSGIServer, make_server

from adapters.bus.topology import PushPolicy, ensure_topology
from adapters.db import migrations, products
from config import Settings
from dev import local_postgres, pipeline_view, pubsub_emulator, stripe_stand_in
from dev.processes import start_target
from main import create_app
from runtime import lifecycle
from runtime.container import Container
from subscribers import TARGETS

log = logging.getLogger("devserver")


@contextlib.contextmanager
def step(doing: str) -> Iterator[None]:
    """Say what is starting, then how long it took."""
    print(f"{doing}...", flush=True)
    started = time.monotonic()
    yield
    print(f"  done in {time.monotonic() - started:.1f} s", flush=True)


def local_settings(settings: Settings, stack: contextlib.ExitStack) -> Settings:
    """`settings` with a database and, for the Pub/Sub bus, an emulator started if missing."""
    overrides: dict[str, object] = {}
    if settings.database_url is None:
        pgdata = settings.data_dir.resolve() / "postgres"
        first = not (pgdata / "PG_VERSION").exists()
        with step(f"Starting the embedded Postgres in {pgdata}" + (" (first run: initdb)" * first)):
            server = local_postgres.start(pgdata)
        stack.callback(server.cleanup)
        overrides["database_url"] = local_postgres.url(server)
    if settings.event_bus == "pubsub" and not settings.pubsub_emulator_host:
        with step("Starting the Pub/Sub emulator (a JVM: a few seconds)"):
            emulator = stack.enter_context(
                pubsub_emulator.running(project=settings.google_cloud_project)
            )
        overrides["pubsub_emulator_host"] = emulator.host
        print(f"Pub/Sub emulator on {emulator.host} (stopped with the server)", flush=True)
    if settings.stripe_secret_key is None and not settings.is_production:
        stand_in = stack.enter_context(stripe_stand_in.running())
        overrides |= {"stripe_secret_key": stripe_stand_in.API_KEY, "stripe_api_base": stand_in.url}
        print(
            f"Stripe: a local stand-in on {stand_in.url} (no STRIPE_SECRET_KEY; set one for"
            " Stripe's test mode)",
            flush=True,
        )
    if not overrides:
        return settings
    return with_overrides(settings, overrides)


def prepare(container: Container) -> None:
    """Database migrated; demo products in development."""
    settings = container.settings
    applied = migrations.apply_all(
        container.database_url(), allow_auth_stand_in=not settings.is_production
    )
    log.info("migrations applied now: %s", applied or "none needed")
    if settings.app_env == "development":
        log.info("demo products seeded: %d", products.seed_demo_products(container.db))


def start_subscribers(settings: Settings, stack: contextlib.ExitStack) -> None:
    """Each subscriber target in a process of its own, fed by a push subscription."""
    endpoints = {}
    with step(f"Starting the subscriber targets {', '.join(TARGETS)} (bin/serve)"):
        for name in TARGETS:
            target = start_target(name, settings, log=settings.data_dir / f"{name}.log")
            stack.callback(target.stop)
            endpoints[name] = target.url + "/"
            print(f"  {name} target on {target.url} (log: {target.log})", flush=True)
    ensure_topology(
        project=settings.google_cloud_project,
        topic=settings.pubsub_topic,
        push_endpoints=endpoints,
        # Production's policy, except the first retry comes after 1 s rather than 10 s.
        policy=PushPolicy(min_backoff=1.0),
        emulator_host=settings.pubsub_emulator_host,
    )


def start(settings: Settings, stack: contextlib.ExitStack) -> Container:
    """Everything the API needs, started and prepared; stopped when `stack` closes."""
    settings = local_settings(settings, stack)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    container = Container(settings)
    stack.callback(container.close)
    stack.callback(lifecycle.shutdown)
    prepare(container)
    if settings.event_bus == "pubsub":
        start_subscribers(settings, stack)
    return container


def api_server(container: Container, *, host: str, port: int) -> BaseWSGIServer:
    """The API over HTTP, threaded as `make run` serves it (not started yet), with the local
    view of the pipeline at /_dev/pipeline."""
    app = DispatcherMiddleware(
        create_app(container=container), {pipeline_view.PATH: pipeline_view.view_app(container)}
    )
    return make_server(host, port, app, threaded=True)


def serve_in_background(server: BaseWSGIServer, stack: contextlib.ExitStack) -> str:
    """Serve on a thread until `stack` closes; returns the base URL."""
    thread = threading.Thread(target=server.serve_forever, name="api", daemon=True)
    thread.start()
    stack.callback(thread.join, 5)
    stack.callback(server.shutdown)
    return f"http://127.0.0.1:{server.server_port}"


def with_overrides(settings: Settings, overrides: Mapping[str, object]) -> Settings:
    """A copy of `settings` with `overrides`, validated again."""
    fields = {name: getattr(settings, name) for name in Settings.model_fields}
    return Settings(**{**fields, **overrides})
