"""Pushes in flight at once share one batch; each answers with its own event's outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from adapters.bus.coalesce import Coalescer
from core.events import Event
from tests.helpers import HANG_GUARD, wait_for


def event(n: int) -> Event:
    created = datetime(2026, 11, 26, tzinfo=UTC)
    return Event(id=f"evt_{n}", type="invoice.paid", created=created, livemode=False, object={})


class Recorder:
    """A batch handler that records its batches and holds each until its gate opens."""

    def __init__(self, outcome: Callable[[Event], object] = lambda e: f"applied {e.id}") -> None:
        self.batches: list[list[str]] = []
        self.gates = [threading.Event() for _ in range(16)]
        self.at_work = 0
        self.most_at_work = 0
        self._outcome = outcome
        self._lock = threading.Lock()

    def __call__(self, events: Sequence[Event]) -> list[object]:
        with self._lock:
            n = len(self.batches)
            self.batches.append([e.id for e in events])
            self.at_work += 1
            self.most_at_work = max(self.most_at_work, self.at_work)
        self.gates[n].wait(timeout=HANG_GUARD)
        with self._lock:
            self.at_work -= 1
        return [self._outcome(e) for e in events]

    def open_all(self) -> None:
        for gate in self.gates:
            gate.set()


def calls(coalescer: Coalescer, numbers: range, pool: ThreadPoolExecutor) -> list[Future[object]]:
    """A push of one event each: its outcome."""
    return [pool.submit(lambda n: coalescer([event(n)])[0], n) for n in numbers]


def two_lone_pushes_then(coalescer: Coalescer, recorder: Recorder, count: int) -> list[object]:
    """Two pushes at work, each alone; `count - 2` more wait; then everything goes on."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = calls(coalescer, range(1), pool)
        wait_for(lambda: len(recorder.batches) == 1)
        futures += calls(coalescer, range(1, 2), pool)
        wait_for(lambda: len(recorder.batches) == 2)
        futures += calls(coalescer, range(2, count), pool)
        wait_for(lambda: coalescer.waiting == count - 2)
        recorder.open_all()
        return [f.result() if f.exception() is None else f.exception() for f in futures]


def test_a_push_alone_is_handled_at_once() -> None:
    recorder = Recorder()
    recorder.open_all()
    assert Coalescer(recorder, max_batch=8)([event(1)]) == ["applied evt_1"]
    assert recorder.batches == [["evt_1"]]


def test_the_events_of_one_push_go_in_one_batch_each_with_its_outcome() -> None:
    recorder = Recorder()
    recorder.open_all()
    outcomes = Coalescer(recorder, max_batch=8)([event(1), event(2), event(3)])
    assert outcomes == ["applied evt_1", "applied evt_2", "applied evt_3"]
    assert recorder.batches == [["evt_1", "evt_2", "evt_3"]]


def test_a_push_that_finds_a_lone_push_at_work_does_not_wait_for_it() -> None:
    recorder = Recorder()
    two_lone_pushes_then(Coalescer(recorder, max_batch=8), recorder, 2)
    assert recorder.batches == [["evt_0"], ["evt_1"]]
    assert recorder.most_at_work == 2


def test_pushes_that_arrive_meanwhile_go_together_in_the_next_batch() -> None:
    recorder = Recorder()
    outcomes = two_lone_pushes_then(Coalescer(recorder, max_batch=8), recorder, 6)
    assert outcomes == [f"applied evt_{n}" for n in range(6)]
    assert recorder.batches[:2] == [["evt_0"], ["evt_1"]]
    assert sorted(recorder.batches[2]) == [f"evt_{n}" for n in range(2, 6)]
    assert len(recorder.batches) == 3


def test_a_push_that_finds_a_batch_of_many_at_work_waits_for_it() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder, max_batch=8)
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = calls(coalescer, range(1), pool)
        wait_for(lambda: len(recorder.batches) == 1)
        futures += calls(coalescer, range(1, 2), pool)
        wait_for(lambda: len(recorder.batches) == 2)
        futures += calls(coalescer, range(2, 4), pool)
        wait_for(lambda: coalescer.waiting == 2)
        recorder.gates[0].set()  # the first lone push ends: the two waiting go together
        wait_for(lambda: len(recorder.batches) == 3)
        assert sorted(recorder.batches[2]) == ["evt_2", "evt_3"]
        futures += calls(coalescer, range(4, 5), pool)
        wait_for(lambda: coalescer.waiting == 1)
        recorder.gates[1].set()  # a batch of two is still at work: the fifth push waits
        wait_for(lambda: futures[1].done())
        assert coalescer.waiting == 1
        assert len(recorder.batches) == 3
        recorder.open_all()
        assert [f.result() for f in futures] == [f"applied evt_{n}" for n in range(5)]
    assert recorder.batches[3] == ["evt_4"]
    assert recorder.most_at_work == 2


def test_a_batch_is_never_larger_than_max_batch() -> None:
    recorder = Recorder()
    outcomes = two_lone_pushes_then(Coalescer(recorder, max_batch=2), recorder, 7)
    assert sorted(map(str, outcomes)) == sorted(f"applied evt_{n}" for n in range(7))
    assert max(len(batch) for batch in recorder.batches) == 2
    assert sorted(e for batch in recorder.batches for e in batch) == sorted(
        f"evt_{n}" for n in range(7)
    )


def test_one_event_that_failed_fails_its_push_alone() -> None:
    failure = RuntimeError("Stripe is down")
    recorder = Recorder(lambda e: failure if e.id == "evt_3" else "granted")
    outcomes = two_lone_pushes_then(Coalescer(recorder, max_batch=8), recorder, 5)
    assert outcomes[3] is failure
    assert [outcomes[n] for n in (0, 1, 2, 4)] == ["granted"] * 4


def test_a_batch_that_raised_fails_its_pushes_and_the_next_ones_go_on() -> None:
    calls_seen: list[list[str]] = []

    def handle(events: Sequence[Event]) -> list[object]:
        calls_seen.append([e.id for e in events])
        if len(calls_seen) == 1:
            raise ConnectionError("database unavailable")
        return ["granted"] * len(events)

    coalescer = Coalescer(handle, max_batch=8)
    [failed] = coalescer([event(1)])
    assert isinstance(failed, ConnectionError)
    assert coalescer([event(2)]) == ["granted"]
    assert coalescer.waiting == 0


def test_a_handler_answering_for_fewer_events_fails_them_all() -> None:
    coalescer = Coalescer(lambda events: [], max_batch=8)
    [failed] = coalescer([event(1)])
    assert isinstance(failed, RuntimeError)
    assert str(failed) == "0 outcomes for 1 events"


def test_a_batch_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Coalescer(lambda events: [], max_batch=0)
