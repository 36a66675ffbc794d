"""The in-process bus keeps Pub/Sub's delivery semantics for local runs."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Sequence

import pytest

from adapters.bus import PublishError
from adapters.bus.inline import InlineBus
from core import tracing
from core.events import Event, InvalidEvent, parse_event
from tests.helpers import HANG_GUARD, wait_for


def published(event_id: str) -> tuple[Event, bytes]:
    """An event and the bytes published for it, as the webhook hands them to the bus."""
    body = {
        "id": event_id,
        "type": "invoice.paid",
        "created": 1_700_000_000,
        "data": {"object": {}},
    }
    return parse_event(body), json.dumps(body).encode()


EVENT, DATA = published("evt_1")


def publish_ten(bus: InlineBus) -> tuple[list[str], list[str]]:
    """Publish ten events: the ids the bus took, and the messages it refused the rest with."""
    accepted, refused = [], []
    for n in range(10):
        event, data = published(f"evt_{n}")
        try:
            bus.publish(event, data)
            accepted.append(event.id)
        except PublishError as exc:
            refused.append(str(exc))
    return accepted, refused


def test_publish_returns_before_subscribers_run() -> None:
    release, ran = threading.Event(), threading.Event()

    def slow(_: Event) -> None:
        release.wait(5)
        ran.set()

    bus = InlineBus({"slow": slow})
    bus.publish(EVENT, DATA)
    assert not ran.is_set()
    release.set()
    assert bus.wait_idle(HANG_GUARD)
    assert ran.is_set()
    bus.close()


def test_a_failing_subscriber_is_retried_with_growing_backoff() -> None:
    attempts: list[float] = []

    def flaky(_: Event) -> None:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise RuntimeError("database unavailable")

    bus = InlineBus({"flaky": flaky}, min_backoff=0.05)
    bus.publish(EVENT, DATA)
    assert bus.wait_idle(HANG_GUARD)
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
    bus.publish(EVENT, DATA)
    assert bus.wait_idle(HANG_GUARD)
    assert calls == ["evt_1"] * 3
    assert bus.dead_letters == [("broken", EVENT)]
    bus.close()


def test_an_unreadable_event_is_dropped_without_retry() -> None:
    calls = []

    def refuses(event: Event) -> None:
        calls.append(event.id)
        raise InvalidEvent("not an event")

    bus = InlineBus({"refuses": refuses}, min_backoff=0.01)
    bus.publish(EVENT, DATA)
    assert bus.wait_idle(HANG_GUARD)
    assert calls == ["evt_1"]
    assert bus.dead_letters == []
    bus.close()


def test_a_closed_bus_refuses_to_publish() -> None:
    bus = InlineBus({})
    bus.close()
    with pytest.raises(PublishError):
        bus.publish(EVENT, DATA)


def test_past_max_pending_publish_refuses_then_recovers() -> None:
    release, delivered = threading.Event(), []

    def stuck(event: Event) -> None:
        release.wait(5)
        delivered.append(event.id)

    bus = InlineBus({"stuck": stuck}, workers=1, max_pending=3)
    accepted, refused = publish_ten(bus)  # one in the worker's hands, three queued, refused
    assert 3 <= len(accepted) <= 4
    assert refused
    assert all("full" in message for message in refused)
    release.set()
    assert bus.wait_idle(HANG_GUARD)
    assert sorted(delivered) == sorted(accepted)
    bus.publish(EVENT, DATA)  # room again
    assert bus.wait_idle(HANG_GUARD)
    bus.close()


def test_one_slow_subscriber_does_not_hold_up_another() -> None:
    release, fast_done = threading.Event(), threading.Event()
    handlers = {"slow": lambda _: release.wait(5), "fast": lambda _: fast_done.set()}
    bus = InlineBus(handlers, workers=1)
    bus.publish(EVENT, DATA)
    assert fast_done.wait(5)
    release.set()
    assert bus.wait_idle(HANG_GUARD)
    bus.close()


def test_each_delivery_reads_the_published_bytes() -> None:
    seen: list[Event] = []
    body = {"id": "evt_b", "type": "invoice.paid", "created": 1, "data": {"object": {"n": 7}}}
    bus = InlineBus({"reader": seen.append})
    bus.publish(EVENT, json.dumps(body).encode())  # what a push subscriber gets is the bytes
    assert bus.wait_idle(HANG_GUARD)
    assert [(event.id, event.object) for event in seen] == [("evt_b", {"n": 7})]
    bus.close()


def test_bytes_that_are_not_an_event_are_dropped_without_retry() -> None:
    calls: list[Event] = []
    bus = InlineBus({"reader": calls.append}, min_backoff=0.01)
    bus.publish(EVENT, b"not json")
    bus.publish(EVENT, b'{"id": "evt_x"}')
    assert bus.wait_idle(HANG_GUARD)
    assert calls == []
    assert bus.dead_letters == []
    bus.close()


def test_a_background_subscriber_waits_while_another_has_work() -> None:
    release, mailed = threading.Event(), threading.Event()
    handlers = {"access": lambda _: release.wait(5), "emails": lambda _: mailed.set()}
    bus = InlineBus(handlers, background=("emails",), quiet=0.01)
    bus.publish(EVENT, DATA)
    assert not mailed.wait(0.3)  # access is still applying the event
    release.set()
    assert mailed.wait(5)
    assert bus.wait_idle(HANG_GUARD)
    bus.close()


def test_a_background_subscriber_past_half_its_bound_runs_anyway() -> None:
    release, mailed = threading.Event(), []
    handlers = {
        "access": lambda _: release.wait(5),
        "emails": lambda event: mailed.append(event.id),
    }
    bus = InlineBus(handlers, background=("emails",), workers=1, max_pending=4)
    for n in range(3):  # access holds one and queues two; e-mail's queue reaches half of 4
        bus.publish(*published(f"evt_{n}"))
    wait_for(lambda: len(mailed) >= 1)
    assert not release.is_set()
    release.set()
    assert bus.wait_idle(HANG_GUARD)
    assert sorted(mailed) == ["evt_0", "evt_1", "evt_2"]
    bus.close()


def test_background_names_must_be_subscribers() -> None:
    with pytest.raises(ValueError, match="mail"):
        InlineBus({"access": lambda _: None}, background=("mail",))


def test_a_background_subscriber_has_its_own_bound() -> None:
    release, mailed = threading.Event(), []

    def stuck(event: Event) -> None:
        release.wait(5)
        mailed.append(event.id)

    handlers = {"access": lambda _: None, "emails": stuck}
    bus = InlineBus(handlers, background=("emails",), workers=1, max_pending=100, max_backlog=3)
    # E-mail holds one (past half its bound it runs), queues three, then refuses.
    accepted, refused = publish_ten(bus)
    assert 3 <= len(accepted) <= 4
    assert refused
    assert all("for emails" in message for message in refused)
    release.set()
    assert bus.wait_idle(HANG_GUARD)
    assert sorted(mailed) == sorted(accepted)
    bus.close()


class Batches:
    """A batch handler: records each batch's ids; the first call waits for `release`; events
    named in `failing` fail (each time) with the exception given."""

    def __init__(self, failing: dict[str, Exception] | None = None) -> None:
        self.release = threading.Event()
        self.calls: list[list[str]] = []
        self.failing = failing or {}

    def __call__(self, events: Sequence[Event]) -> list[object]:
        if not self.calls:
            self.release.wait(5)
        self.calls.append([event.id for event in events])
        return [self.failing.get(event.id, "done") for event in events]


def test_deliveries_queued_meanwhile_are_handed_over_together() -> None:
    batches = Batches()
    bus = InlineBus({"access": lambda _: None}, batches={"access": batches}, batch_workers=1)
    bus.publish(*published("evt_first"))
    wait_for(lambda: bus.pending() == 0)  # the worker holds the first
    for n in range(10):
        bus.publish(*published(f"evt_{n}"))
    batches.release.set()
    assert bus.wait_idle(HANG_GUARD)
    assert batches.calls == [["evt_first"], [f"evt_{n}" for n in range(10)]]
    bus.close()


def test_a_batch_is_at_most_batch_size() -> None:
    batches = Batches()
    bus = InlineBus(
        {"access": lambda _: None}, batches={"access": batches}, batch_workers=1, batch_size=4
    )
    bus.publish(*published("evt_first"))
    wait_for(lambda: bus.pending() == 0)
    for n in range(10):
        bus.publish(*published(f"evt_{n}"))
    batches.release.set()
    assert bus.wait_idle(HANG_GUARD)
    assert [len(call) for call in batches.calls] == [1, 4, 4, 2]
    bus.close()


def test_each_event_of_a_batch_is_retried_or_dropped_on_its_own() -> None:
    batches = Batches({"evt_1": RuntimeError("later"), "evt_2": InvalidEvent("never")})
    batches.release.set()
    bus = InlineBus(
        {"access": lambda _: None},
        batches={"access": batches},
        max_attempts=3,
        min_backoff=0.01,
    )
    for n in range(3):
        bus.publish(*published(f"evt_{n}"))
    assert bus.wait_idle(HANG_GUARD)
    ids = [event_id for call in batches.calls for event_id in call]
    assert (ids.count("evt_0"), ids.count("evt_1"), ids.count("evt_2")) == (1, 3, 1)
    assert [(name, event.id) for name, event in bus.dead_letters] == [("access", "evt_1")]
    bus.close()


def test_a_batch_handler_that_raises_retries_every_event() -> None:
    calls: list[list[str]] = []

    def broken(events: Sequence[Event]) -> list[object]:
        calls.append([event.id for event in events])
        if len(calls) == 1:
            raise RuntimeError("database unavailable")
        return ["done"] * len(events)

    bus = InlineBus({"access": lambda _: None}, batches={"access": broken}, min_backoff=0.01)
    bus.publish(*published("evt_a"))
    assert bus.wait_idle(HANG_GUARD)
    assert calls == [["evt_a"], ["evt_a"]]
    assert bus.dead_letters == []
    bus.close()


def test_batch_names_must_be_subscribers() -> None:
    with pytest.raises(ValueError, match="mail"):
        InlineBus({"access": lambda _: None}, batches={"mail": lambda events: []})


def test_a_bus_of_background_subscribers_only_still_delivers() -> None:
    mailed = threading.Event()
    bus = InlineBus({"emails": lambda _: mailed.set()}, background=("emails",), quiet=0.01)
    bus.publish(EVENT, DATA)
    assert mailed.wait(5)
    assert bus.wait_idle(HANG_GUARD)
    bus.close()


def test_a_subscriber_runs_under_the_publishers_trace_in_a_span_of_its_own() -> None:
    seen: list[tracing.Trace | None] = []
    attempts = itertools.count(1)

    def flaky(event: Event) -> None:
        seen.append(tracing.current())
        if event.id == EVENT.id and next(attempts) == 1:
            raise RuntimeError("retried under the same trace")

    bus = InlineBus({"emails": flaky}, min_backoff=0.01)
    published_under = tracing.Trace("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", True)
    with tracing.active(published_under):
        bus.publish(EVENT, DATA)
    untraced, data = published("evt_untraced")
    bus.publish(untraced, data)
    assert bus.wait_idle(HANG_GUARD)
    bus.close()

    traced = [trace for trace in seen if trace is not None]
    assert len(traced) == 2  # the first attempt and its retry
    assert {trace.trace_id for trace in traced} == {published_under.trace_id}
    assert published_under.span_id not in {trace.span_id for trace in traced}
    assert seen.count(None) == 1
    assert tracing.current() is None
