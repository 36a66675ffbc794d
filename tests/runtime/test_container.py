"""The container builds the adapters from the settings: the pool is as large as configured."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from config import Settings
from runtime.container import Container
from tests.helpers import HANG_GUARD, wait_for


@pytest.mark.parametrize(("setting", "size"), [({}, 10), ({"database_pool_size": 3}, 3)])
def test_the_pool_is_database_pool_size(
    settings_factory: Callable[..., Settings], setting: dict[str, Any], size: int
) -> None:
    container = Container(settings_factory(**setting))
    try:
        assert container.db.fetch_all("select 1 as one") == [{"one": 1}]
        assert container.db.pool.get_stats()["pool_max"] == size
    finally:
        container.close()


def test_a_request_past_the_pool_size_waits_for_a_connection(
    settings_factory: Callable[..., Settings],
) -> None:
    container = Container(settings_factory(database_pool_size=2))
    db = container.db
    release = threading.Event()
    held = threading.Barrier(3)

    def hold() -> None:
        with db.transaction() as conn:
            conn.execute("select 1")
            held.wait(timeout=HANG_GUARD)
            release.wait(timeout=HANG_GUARD)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    answered: list[list[dict[str, Any]]] = []
    late = threading.Thread(target=lambda: answered.append(db.fetch_all("select 2 as two")))
    try:
        for thread in holders:
            thread.start()
        held.wait(timeout=HANG_GUARD)
        late.start()
        wait_for(lambda: db.pool.get_stats().get("requests_waiting") == 1)
        assert db.pool.get_stats()["pool_size"] == 2, "no third connection was opened"
        assert answered == []
    finally:
        release.set()
        for thread in [*holders, late]:
            if thread.ident is not None:
                thread.join(timeout=HANG_GUARD)
        container.close()
    assert answered == [[{"two": 2}]]
