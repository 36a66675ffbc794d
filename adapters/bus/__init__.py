"""The event bus port: verified events handed on to the subscribers.

Two implementations sit beside it: `inline` (in-process, local runs and tests) and `pubsub`
(Google Pub/Sub, production); `topology` provisions Pub/Sub's topic and push subscriptions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from core.errors import Unavailable
from core.events import Event

log = logging.getLogger(__name__)

# The most events one message carries: the events of one type that reach the api together are
# published together (adapters/bus/pubsub.py), at most one per thread of its one process (16).
# E-mail's one instance takes 4 pushes at once and sends at Resend's default 2 requests a
# second, so the last of 4 pushes of 16 mails ends within 32 s, about half the 60 s a push may
# take (cloudbuild.yaml).
MESSAGE_EVENTS = 16

Handler = Callable[[Event], object]
# Handles several deliveries at once: for each event, what became of it or the exception it
# failed with (that one alone is retried).
BatchHandler = Callable[[Sequence[Event]], Sequence[object]]


class PublishError(RuntimeError):
    """The event could not be handed to the bus; the caller must not acknowledge it."""


class EventBus(Protocol):
    def publish(self, event: Event, data: bytes) -> None:
        """Hand over a verified event; returns once the bus has it, raises PublishError if not."""

    def drain(self, timeout: float) -> bool:
        """Wait until what was published here has been handed on: handled by the subscribers
        (in-process) or stored (Pub/Sub, which confirms each publish before it returns); True
        if that happened in time."""

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is pending and stop."""


def publish_or_unavailable(bus: EventBus, event: Event, data: bytes, *, told: str) -> None:
    """Publish, or answer 503 with `told` (what was done, and what to do) when the bus does not
    take it: the caller's work is recorded, the event is not, and the caller may try again."""
    try:
        bus.publish(event, data)
    except PublishError as exc:
        raise Unavailable(told) from exc


def publish_or_log(bus: EventBus, event: Event, data: bytes, *, what: str) -> bool:
    """Publish what may be lost (a welcome, say), logging a bus that did not take it; whether
    it did."""
    try:
        bus.publish(event, data)
    except PublishError as exc:
        log.warning("could not publish %s: %s", what, exc)
        return False
    return True
