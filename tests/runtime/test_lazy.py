"""Build-once values: one build, also when threads race."""

from __future__ import annotations

import threading
import time

from runtime.lazy import Lazy, once


class Slow:
    built = 0

    @once
    def thing(self) -> object:
        type(self).built += 1
        time.sleep(0.05)  # widen the race window: the assertion is about the lock, not time
        return object()


def race(get: object) -> list[object]:
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(get())) for _ in range(8)]  # type: ignore[operator]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def test_racing_threads_build_a_collaborator_once() -> None:
    holder = Slow()
    seen = race(lambda: holder.thing)
    assert Slow.built == 1
    assert len({id(x) for x in seen}) == 1


def test_a_lazy_value_is_built_once_and_only_when_asked() -> None:
    calls: list[int] = []

    def build() -> object:
        calls.append(1)
        time.sleep(0.05)
        return object()

    lazy = Lazy(build)
    assert lazy.built is None
    assert calls == []
    seen = race(lazy.get)
    assert len(calls) == 1
    assert len({id(x) for x in seen}) == 1
    assert lazy.built is seen[0]
