"""`make run`'s stack (`python -m dev.server`) in a process of its own, on free ports, for the
frontend's tests: the API, web/ on the same origin (SITE_URL's local default), the Stripe
stand-in and the outbox."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dev import pubsub_emulator
from dev.processes import Target
from tests.conftest import SETTINGS_VARIABLES
from tests.pubsub_fixtures import spawn


@dataclass(frozen=True)
class Site:
    process: Target
    # http://localhost:<port>: SITE_URL's local default, the origin every e-mail links to.
    url: str
    outbox: Path
    data: Path


@pytest.fixture(scope="module")
def site(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    scratch = tmp_path_factory.mktemp("site")
    port = pubsub_emulator.free_port()
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {
        "PORT": str(port),
        "DATABASE_URL": database_url,
        "DATA_DIR": str(scratch / "data"),
        "EMAIL_OUTBOX_DIR": str(scratch / "outbox"),
    }
    server = spawn([sys.executable, "-m", "dev.server"], env=env, port=port, log=scratch / "log")
    try:
        yield Site(server, f"http://localhost:{port}", scratch / "outbox", scratch / "data")
    finally:
        server.stop()
