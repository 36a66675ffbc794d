"""One subscriber target's deliveries, each handed to the domain handler `runtime/consumers.py`
names for its type: a batch goes out as one batch per handler, and each event's outcome (or
what it failed with, that one alone retried) comes back in the batch's order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from core.events import Event

# A handler's batch: each event's outcome, or the exception it failed with.
Outcomes = Sequence[str | Exception]
BatchFunction = Callable[[Sequence[Event]], Outcomes]


@dataclass(frozen=True)
class Dispatch:
    """A target's handlers, by name, and the name of each event type's handler."""

    handlers: Mapping[str, BatchFunction]
    handler_of: Callable[[str], str | None]

    def __call__(self, event: Event) -> str:
        [outcome] = self.apply_many([event])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def apply_many(self, events: Sequence[Event]) -> list[str | Exception]:
        # An event of a type no handler takes is one the filter let through (the in-process
        # bus has no filter): nothing to do.
        results: list[str | Exception] = ["ignored"] * len(events)
        by_handler: dict[str, list[int]] = {}
        for n, event in enumerate(events):
            name = self.handler_of(event.type)
            if name is not None:
                by_handler.setdefault(name, []).append(n)
        for name, positions in by_handler.items():
            outcomes = self.handlers[name]([events[n] for n in positions])
            for n, outcome in zip(positions, outcomes, strict=True):
                results[n] = outcome
        return results
