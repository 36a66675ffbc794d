"""`make run`: the API on $PORT with everything it needs locally, in the foreground.

Without DATABASE_URL an embedded Postgres runs under `.data/postgres`. With EVENT_BUS=pubsub
the whole pipeline runs as in production: the Pub/Sub emulator (started here unless
PUBSUB_EMULATOR_HOST names one), and the `access` and `emails` targets as processes of their
own (`bin/serve`), fed by push subscriptions.
"""

from __future__ import annotations

import contextlib
import logging
import signal

from werkzeug.serving import run_simple

from adapters.bus.topology import PushPolicy, ensure_topology
from adapters.db import migrations, products
from config import Settings
from dev import local_postgres, pubsub_emulator
from dev.processes import start_target
from main import create_app
from runtime import lifecycle, logs
from runtime.container import Container
from subscribers import TARGETS

log = logging.getLogger("devserver")


def local_settings(settings: Settings, stack: contextlib.ExitStack) -> Settings:
    """`settings` with a database and, for the Pub/Sub bus, an emulator started if missing."""
    overrides: dict[str, object] = {}
    if settings.database_url is None:
        server = local_postgres.start(settings.data_dir.resolve() / "postgres")
        stack.callback(server.cleanup)
        overrides["database_url"] = local_postgres.url(server)
    if settings.event_bus == "pubsub" and not settings.pubsub_emulator_host:
        emulator = stack.enter_context(
            pubsub_emulator.running(project=settings.google_cloud_project)
        )
        overrides["pubsub_emulator_host"] = emulator.host
        print(f"Pub/Sub emulator on {emulator.host} (stopped with the server)", flush=True)
    return Settings(**overrides) if overrides else settings  # type: ignore[arg-type]


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
    for name in TARGETS:
        target = start_target(name, settings, log=settings.data_dir / f"{name}.log")
        stack.callback(target.stop)
        endpoints[name] = target.url + "/"
        print(f"{name} target on {target.url} (log: {target.log})", flush=True)
    ensure_topology(
        project=settings.google_cloud_project,
        topic=settings.pubsub_topic,
        push_endpoints=endpoints,
        # Production's policy, except the first retry comes after 1 s rather than 10 s.
        policy=PushPolicy(min_backoff=1.0),
        emulator_host=settings.pubsub_emulator_host,
    )


def stop_once(signum: int, frame: object) -> None:
    """First Ctrl-C or SIGTERM stops the server; later ones must not cut the clean-up short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def serve() -> None:
    """Prepare, then serve until interrupted (Ctrl-C or SIGTERM); stop what was started."""
    signal.signal(signal.SIGINT, stop_once)
    signal.signal(signal.SIGTERM, stop_once)
    settings = Settings()
    logs.configure(json_output=False)
    with contextlib.ExitStack() as stack:
        settings = local_settings(settings, stack)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        container = Container(settings)
        stack.callback(container.close)
        stack.callback(lifecycle.shutdown)
        prepare(container)
        if settings.event_bus == "pubsub":
            start_subscribers(settings, stack)
        print(f"API listening on http://localhost:{settings.port} (Ctrl-C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            run_simple(
                "0.0.0.0",  # noqa: S104
                settings.port,
                create_app(container=container),
                threaded=True,
                use_reloader=False,
            )


if __name__ == "__main__":
    serve()
