"""Pushes that arrive together are handled together: group commit for a push target.

Pub/Sub pushes one message per request; once its push rate has ramped up, many are in flight
at once, each on a thread of the same instance. Handled one by one, each pays its own
transaction and round trips. Here the first push to find no batch at work takes every push
waiting (up to `max_batch`) and hands their events to the batch handler at once, as the pull
consumer does; the others wait and each answers with its own event's outcome. Nothing waits
for company: a push alone is handled at once, and those that come while a batch is at work
go in the next one.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from adapters.bus import BatchHandler
from core.events import Event


@dataclass(eq=False)
class _Slot:
    event: Event
    outcome: object = None
    taken: bool = False  # in a batch at work
    done: bool = False


class Coalescer:
    """A handler of one push's events that shares `handle`'s batches with the concurrent
    callers.

    One batch at a time, but for this: a push that finds a lone push at work does not wait for
    it, so that pushes coming two at a time (the emulator's way, and Pub/Sub's while its rate
    ramps up) keep their pace (one at a time, each waited a whole cycle for the other: half the
    pace). Two batches of many at work at once would lock the same rows and, in the bench, cost
    a quarter more CPU per event than one for little more throughput (bench/README.md).
    """

    def __init__(self, handle: BatchHandler, *, max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._handle = handle
        self._max_batch = max_batch
        self._at_work: list[int] = []  # the size of each batch at work
        self._waiting: deque[_Slot] = deque()
        self._changed = threading.Condition()

    @property
    def waiting(self) -> int:
        """How many pushes wait for a batch to take them."""
        with self._changed:
            return len(self._waiting)

    def __call__(self, events: Sequence[Event]) -> list[object]:
        """Each event's outcome (or what it failed with) once the batches holding them are
        handled; a push's events (a message may carry several) are taken in order."""
        slots = [_Slot(event) for event in events]
        with self._changed:
            self._waiting.extend(slots)
            while not all(slot.done for slot in slots):
                mine = any(not slot.taken for slot in slots)
                if mine and (not self._at_work or self._at_work == [1]):
                    self._lead()
                else:
                    self._changed.wait()
        return [slot.outcome for slot in slots]

    def _lead(self) -> None:
        """Handle the oldest waiting pushes (called and returning with the lock held)."""
        batch = [self._waiting.popleft() for _ in range(min(self._max_batch, len(self._waiting)))]
        for slot in batch:
            slot.taken = True
        self._at_work.append(len(batch))
        self._changed.release()
        outcomes: Sequence[object] = []
        try:
            outcomes = _outcomes(self._handle, [slot.event for slot in batch])
        except BaseException as exc:  # the worker is stopping: none of them is left waiting
            outcomes = [exc] * len(batch)
            raise
        finally:
            self._changed.acquire()
            self._at_work.remove(len(batch))
            for slot, outcome in zip(batch, outcomes, strict=True):
                slot.outcome, slot.done = outcome, True
            self._changed.notify_all()


def _outcomes(handle: BatchHandler, events: Sequence[Event]) -> Sequence[object]:
    try:
        outcomes = handle(events)
    except Exception as exc:  # the whole batch failed: each push answers 5xx and comes back
        return [exc] * len(events)
    if len(outcomes) != len(events):
        error = RuntimeError(f"{len(outcomes)} outcomes for {len(events)} events")
        return [error] * len(events)
    return outcomes
