"""The in-process bus keeps Pub/Sub's delivery semantics for local runs."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime

import pytest

from adapters.bus import PublishError
from adapters.bus.inline import InlineBus
from core.events import Event, InvalidEvent

EVENT = Event(id="evt_1", type="invoice.paid", created=datetime.now(UTC), livemode=False, object={})


def test_publish_returns_before_subscribers_run() -> None:
    release, ran = threading.Event(), threading.Event()

    def slow(_: Event) -> None:
        release.wait(5)
        ran.set()

    bus = InlineBus({"slow": slow})
    bus.publish(EVENT, b"{}")
    assert not ran.is_set()
    release.set()
    assert bus.wait_idle(5)
    assert ran.is_set()
    bus.close()


def test_a_failing_subscriber_is_retried_with_growing_backoff() -> None:
    attempts: list[float] = []

    def flaky(_: Event) -> None:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise RuntimeError("database unavailable")

    bus = InlineBus({"flaky": flaky}, min_backoff=0.05)
    bus.publish(EVENT, b"{}")
    assert bus.wait_idle(5)
    assert len(attempts) == 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert gaps[0] >= 0.05
    assert gaps[1] >= 0.1
    assert bus.dead_letters == []
    bus.close()


def test_after_the_last_attempt_the_event_is_dead_lettered() -> None:
    calls = []

    def broken(event: Event) -> None:
        calls.append(event.id)
        raise RuntimeError("always")

    bus = InlineBus({"broken": broken, "fine": lambda _: None}, max_attempts=3, min_backoff=0.01)
    bus.publish(EVENT, b"{}")
    assert bus.wait_idle(5)
    assert calls == ["evt_1"] * 3
    assert bus.dead_letters == [("broken", EVENT)]
    bus.close()


def test_an_unreadable_event_is_dropped_without_retry() -> None:
    calls = []

    def refuses(event: Event) -> None:
        calls.append(event.id)
        raise InvalidEvent("not an event")

    bus = InlineBus({"refuses": refuses}, min_backoff=0.01)
    bus.publish(EVENT, b"{}")
    assert bus.wait_idle(5)
    assert calls == ["evt_1"]
    assert bus.dead_letters == []
    bus.close()


def test_a_closed_bus_refuses_to_publish() -> None:
    bus = InlineBus({})
    bus.close()
    with pytest.raises(PublishError):
        bus.publish(EVENT, b"{}")


def test_past_max_pending_publish_refuses_then_recovers() -> None:
    release, delivered = threading.Event(), []

    def stuck(event: Event) -> None:
        release.wait(5)
        delivered.append(event.id)

    bus = InlineBus({"stuck": stuck}, workers=1, max_pending=3)
    accepted, refused = [], []
    for n in range(10):  # one in the worker's hands, three queued, then refused
        event = Event(f"evt_{n}", "invoice.paid", datetime.now(UTC), False, {})
        try:
            bus.publish(event, b"{}")
            accepted.append(event.id)
        except PublishError as exc:
            refused.append(str(exc))
    assert 3 <= len(accepted) <= 4
    assert refused
    assert all("full" in message for message in refused)
    release.set()
    assert bus.wait_idle(5)
    assert sorted(delivered) == sorted(accepted)
    bus.publish(EVENT, b"{}")  # room again
    assert bus.wait_idle(5)
    bus.close()


def test_one_slow_subscriber_does_not_hold_up_another() -> None:
    release, fast_done = threading.Event(), threading.Event()
    handlers = {"slow": lambda _: release.wait(5), "fast": lambda _: fast_done.set()}
    bus = InlineBus(handlers, workers=1)
    bus.publish(EVENT, b"{}")
    assert fast_done.wait(5)
    release.set()
    assert bus.wait_idle(5)
    bus.close()
