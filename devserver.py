"""`make run`: the API on $PORT with everything it needs locally, in the foreground."""

from __future__ import annotations

import logging

from werkzeug.serving import run_simple

import main
from adapters import catalog, migrations

log = logging.getLogger("devserver")


def prepare() -> None:
    """Database up and migrated; demo products in development."""
    container = main.container
    settings = container.settings
    applied = migrations.apply_all(
        container.database_url(), allow_auth_stand_in=not settings.is_production
    )
    log.info("migrations applied now: %s", applied or "none needed")
    if settings.app_env == "development":
        seeded = catalog.seed_demo_products(container.db)
        log.info("demo products seeded: %d", seeded)


def serve() -> None:
    """Prepare, then serve until interrupted."""
    prepare()
    port = main.container.settings.port
    print(f"API listening on http://localhost:{port} (Ctrl-C to stop)", flush=True)
    try:
        run_simple("0.0.0.0", port, main.app, threaded=True, use_reloader=False)  # noqa: S104
    finally:
        main.shutdown()


if __name__ == "__main__":
    serve()
