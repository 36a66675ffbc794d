"""Pushes in flight at once share one batch; each answers with its own event's outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from adapters.bus.coalesce import Coalescer
from core.events import Event
from tests.helpers import wait_for


def event(n: int) -> Event:
    created = datetime(2026, 11, 26, tzinfo=UTC)
    return Event(id=f"evt_{n}", type="invoice.paid", created=created, livemode=False, object={})


class Recorder:
    """A batch handler that records its batches and holds the first until released."""

    def __init__(self, outcome: Callable[[Event], object] = lambda e: f"applied {e.id}") -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()
        self.entered = threading.Event()
        self.at_work = 0
        self.most_at_work = 0
        self._outcome = outcome
        self._lock = threading.Lock()

    def __call__(self, events: Sequence[Event]) -> list[object]:
        with self._lock:
            self.batches.append([e.id for e in events])
            self.at_work += 1
            self.most_at_work = max(self.most_at_work, self.at_work)
        self.entered.set()
        self.release.wait(timeout=10)
        with self._lock:
            self.at_work -= 1
        return [self._outcome(e) for e in events]


def held_then_released(
    coalescer: Coalescer, recorder: Recorder, count: int
) -> list[Future[object]]:
    """`count` calls: the first holds its batch until the others wait, then all go on."""
    pool = ThreadPoolExecutor(max_workers=count)
    first = pool.submit(coalescer, event(0))
    assert recorder.entered.wait(timeout=10)
    rest = [pool.submit(coalescer, event(n)) for n in range(1, count)]
    wait_for(lambda: coalescer.waiting == count - 1)
    recorder.release.set()
    pool.shutdown(wait=True)
    return [first, *rest]


def test_a_push_alone_is_handled_at_once() -> None:
    recorder = Recorder()
    recorder.release.set()
    assert Coalescer(recorder, max_batch=8)(event(1)) == "applied evt_1"
    assert recorder.batches == [["evt_1"]]


def test_pushes_that_arrive_during_a_batch_go_together_in_the_next() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder, max_batch=8)
    futures = held_then_released(coalescer, recorder, 6)
    assert [f.result() for f in futures] == [f"applied evt_{n}" for n in range(6)]
    assert recorder.batches[0] == ["evt_0"]
    assert sorted(recorder.batches[1]) == [f"evt_{n}" for n in range(1, 6)]
    assert len(recorder.batches) == 2


def test_a_batch_is_never_larger_than_max_batch() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder, max_batch=2)
    futures = held_then_released(coalescer, recorder, 6)
    assert sorted(str(f.result()) for f in futures) == sorted(f"applied evt_{n}" for n in range(6))
    assert [len(b) for b in recorder.batches] == [1, 2, 2, 1]


def test_one_event_that_failed_fails_its_push_alone() -> None:
    failure = RuntimeError("Stripe is down")
    recorder = Recorder(lambda e: failure if e.id == "evt_2" else "granted")
    futures = held_then_released(Coalescer(recorder, max_batch=8), recorder, 4)
    with pytest.raises(RuntimeError, match="Stripe is down"):
        futures[2].result()
    assert [futures[n].result() for n in (0, 1, 3)] == ["granted"] * 3


def test_a_batch_that_raised_fails_its_pushes_and_the_next_ones_go_on() -> None:
    calls: list[list[str]] = []

    def handle(events: Sequence[Event]) -> list[object]:
        calls.append([e.id for e in events])
        if len(calls) == 1:
            raise ConnectionError("database unavailable")
        return ["granted"] * len(events)

    coalescer = Coalescer(handle, max_batch=8)
    with pytest.raises(ConnectionError):
        coalescer(event(1))
    assert coalescer(event(2)) == "granted"
    assert coalescer.waiting == 0


def test_a_handler_answering_for_fewer_events_fails_them_all() -> None:
    coalescer = Coalescer(lambda events: [], max_batch=8)
    with pytest.raises(RuntimeError, match="0 outcomes for 1 events"):
        coalescer(event(1))


def test_never_two_batches_at_once() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder, max_batch=1)
    futures = held_then_released(coalescer, recorder, 5)
    assert len([f.result() for f in futures]) == 5
    assert recorder.most_at_work == 1


def test_a_batch_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Coalescer(lambda events: [], max_batch=0)
