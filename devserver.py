"""`make run`: the API on $PORT with everything it needs locally, in the foreground.

With EVENT_BUS=pubsub the whole pipeline runs on the Pub/Sub emulator (started here unless
PUBSUB_EMULATOR_HOST names one): the webhook publishes to it, and it pushes to the subscriber
targets, which this same server mounts under `/_subscribers/<target>`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from types import ModuleType
from typing import Any

from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import run_simple

from adapters import catalog, migrations
from config import Settings
from container import Container

log = logging.getLogger("devserver")

SUBSCRIBERS = ("access", "emails")
MOUNT = "/_subscribers"


def prepare(container: Container) -> None:
    """Database up and migrated; demo products in development."""
    settings = container.settings
    applied = migrations.apply_all(
        container.database_url(), allow_auth_stand_in=not settings.is_production
    )
    log.info("migrations applied now: %s", applied or "none needed")
    if settings.app_env == "development":
        seeded = catalog.seed_demo_products(container.db)
        log.info("demo products seeded: %d", seeded)


def start_emulator(settings: Settings, stack: contextlib.ExitStack) -> None:
    """Run the Pub/Sub emulator until the stack closes; export its address for `main`."""
    from adapters import pubsub_emulator

    emulator = stack.enter_context(pubsub_emulator.running(project=settings.google_cloud_project))
    os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
    print(f"Pub/Sub emulator on {emulator.host} (stopped with the server)", flush=True)


def with_subscribers(main: ModuleType, stack: contextlib.ExitStack) -> Any:
    """The API plus the CloudEvent targets `main` defines, each fed by a push subscription."""
    import functions_framework

    from adapters.pubsub_admin import PushPolicy, ensure_topology

    mounts: dict[str, Any] = {}
    for target in (name for name in SUBSCRIBERS if hasattr(main, name)):
        app = functions_framework.create_app(target, main.__file__, "cloudevent")  # type: ignore[no-untyped-call]
        # create_app executes main.py again as a fresh `main` (its own settings and pool, like a
        # separate service): close that one on exit, and put ours back in sys.modules.
        stack.callback(sys.modules["main"].shutdown)
        mounts[f"{MOUNT}/{target}"] = app
    sys.modules["main"] = main
    settings = main.container.settings
    ensure_topology(
        project=settings.google_cloud_project,
        topic=settings.pubsub_topic,
        push_endpoints={path.rsplit("/", 1)[1]: local_url(settings, path) for path in mounts},
        # Production's policy, except the first retry comes after 1 s rather than 10 s.
        policy=PushPolicy(min_backoff=1.0),
        emulator_host=settings.pubsub_emulator_host,
    )
    log.info("push subscriptions: %s", ", ".join(local_url(settings, p) for p in mounts))
    return DispatcherMiddleware(main.app, mounts)


def local_url(settings: Settings, path: str) -> str:
    """This server's address as the emulator, on the same machine, reaches it."""
    # The trailing slash: the mounted app's own root, not a redirect to it.
    return f"http://127.0.0.1:{settings.port}{path}/"


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
    with contextlib.ExitStack() as stack:
        if settings.event_bus == "pubsub" and not settings.pubsub_emulator_host:
            start_emulator(settings, stack)
        # Imported only now: `main` reads its settings, PUBSUB_EMULATOR_HOST included, at import.
        import main

        stack.callback(main.shutdown)
        prepare(main.container)
        app = main.app
        if settings.event_bus == "pubsub":
            app = with_subscribers(main, stack)
        port = settings.port
        print(f"API listening on http://localhost:{port} (Ctrl-C to stop)", flush=True)
        run_simple("0.0.0.0", port, app, threaded=True, use_reloader=False)  # noqa: S104


if __name__ == "__main__":
    serve()
