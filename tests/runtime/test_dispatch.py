"""Each target's deliveries go to the domain handler `runtime/consumers.py` names for their
type, and only there: one table, one job per handler."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.app_events import (
    ACCOUNT_DELETION_REQUESTED,
    APP_EVENTS,
    CREDITS_TOP_UP,
    USAGE_RECORDED,
)
from core.events import SUBSCRIBED_TYPES, Event, parse_event
from runtime.consumers import CONSUMED, FALLBACK, HANDLERS, handler_of
from runtime.dispatch import Dispatch
from runtime.targets import TARGETS


def event(n: int, kind: str) -> Event:
    return parse_event(
        {"id": f"evt_{n}", "type": kind, "created": 1, "livemode": False, "data": {"object": {}}}
    )


def test_every_target_has_handlers_and_no_type_has_two_in_one_target() -> None:
    assert set(HANDLERS) == set(TARGETS)
    assert all(FALLBACK[target] in HANDLERS[target] for target in TARGETS)
    for handlers in HANDLERS.values():
        seen: set[str] = set()
        for types in handlers.values():
            assert not seen & types
            seen |= types


def test_access_runs_its_four_jobs_by_type() -> None:
    assert handler_of("access", USAGE_RECORDED) == "overage"
    assert handler_of("access", ACCOUNT_DELETION_REQUESTED) == "deletion"
    assert handler_of("access", CREDITS_TOP_UP) == "top-up"
    assert {handler_of("access", t) for t in SUBSCRIBED_TYPES} == {"access"}
    # Without a filter (the in-process bus), what no row names goes where it always went.
    assert handler_of("access", "app.anything") == "access"
    assert handler_of("emails", "checkout.session.completed") == "mail"
    handled = {USAGE_RECORDED, ACCOUNT_DELETION_REQUESTED, CREDITS_TOP_UP}
    assert CONSUMED["access"] == SUBSCRIBED_TYPES | handled
    # The announcements access publishes itself never come back to it.
    assert not (APP_EVENTS - handled) & CONSUMED["access"]


def test_a_batch_goes_out_per_handler_and_comes_back_in_order() -> None:
    calls: dict[str, list[str]] = {}

    def handler(
        name: str, fail: str | None = None
    ) -> Callable[[Sequence[Event]], list[str | Exception]]:
        def run(events: Sequence[Event]) -> list[str | Exception]:
            calls[name] = [e.id for e in events]
            return [ValueError(e.id) if e.id == fail else f"{name} {e.id}" for e in events]

        return run

    table = {"a": frozenset({"x"}), "b": frozenset({"y"})}
    dispatch = Dispatch(
        {"a": handler("a"), "b": handler("b", fail="evt_3")},
        lambda kind: next((n for n, t in table.items() if kind in t), None),
    )
    batch = [event(1, "x"), event(2, "y"), event(3, "y"), event(4, "z"), event(5, "x")]
    outcomes = dispatch.apply_many(batch)
    assert calls == {"a": ["evt_1", "evt_5"], "b": ["evt_2", "evt_3"]}
    assert outcomes[:3] == ["a evt_1", "b evt_2", outcomes[2]]
    assert isinstance(outcomes[2], ValueError)
    assert outcomes[3:] == ["ignored", "a evt_5"]
