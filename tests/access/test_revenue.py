"""The revenue rules (access/revenue.py) and their fold in `decide`: a subscription's MRR, and
its movements against a model that stores what the access cycle's write stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from access.changes import to_changes
from access.decide import Answers, Pending, decide
from access.entitlements import Entitlement
from access.model import Account, State
from access.revenue import CataloguePrice, Level, kind, monthly, newer, snapshot
from core.events import Event, parse_event
from tests.helpers import stripe_event

T0 = 1_700_000_000
ADA = Account(
    id="acc_ada", kind="personal", owner_id="usr_ada", email="ada@example.com", name="Ada",
    customer_id="cus_ada", price_id=None, has_access=False, access_changed_at=None,
    price_changed_at=None, customers=("cus_ada",),
)  # fmt: skip
PRICE = {
    "id": "price_m",
    "unit_amount": 1000,
    "currency": "usd",
    "recurring": {"interval": "month", "interval_count": 1},
}


def sub(status: str = "active", quantity: int = 1, **more: Any) -> dict[str, Any]:
    item = {"id": "si_1", "price": more.pop("price", PRICE), "quantity": quantity}
    return {
        "id": "sub_1", "customer": "cus_ada", "status": status,
        "items": {"data": [item]}, **more,
    }  # fmt: skip


def test_the_monthly_amount_of_a_subscription() -> None:
    yearly = {**PRICE, "unit_amount": 12000, "recurring": {"interval": "year"}}
    snap = snapshot("customer.subscription.updated", sub(quantity=3, price=yearly))
    assert snap is not None
    assert monthly(snap, {}) == ("usd", 3000)
    # A coupon the event carries expanded: a percentage, or an amount off each invoice.
    for discount, amount in (({"percent_off": 25}, 2250), ({"amount_off": 1200}, 2900)):
        off = sub(quantity=3, price=yearly, discount={"coupon": discount})
        found = snapshot("customer.subscription.updated", off)
        assert found is not None
        assert monthly(found, {}) == ("usd", amount)
    # A trial, an incomplete first payment, an ended subscription: nothing yet, or any more.
    for status in ("trialing", "incomplete", "canceled", "unpaid", "paused"):
        found = snapshot("customer.subscription.updated", sub(status))
        assert found is not None
        assert monthly(found, {}) == ("usd", 0)
    # A meter's price beside the plan: usage billed after, no recurring revenue.
    meter = {"id": "price_meter", "unit_amount": 2, "currency": "usd",
             "recurring": {"interval": "month", "usage_type": "metered"}}  # fmt: skip
    both = sub(quantity=3, price=yearly)
    both["items"]["data"].append({"id": "si_2", "price": meter})
    metered = snapshot("customer.subscription.updated", both)
    assert metered is not None
    assert monthly(metered, {}) == ("usd", 3000)
    paused = snapshot("customer.subscription.updated", sub(pause_collection={"behavior": "void"}))
    assert paused is not None
    assert monthly(paused, {}) == ("usd", 0)
    # A price named by id only: the catalogue's, in major units; unknown to both: None.
    bare = snapshot("customer.subscription.created", sub(price={"id": "price_c"}))
    assert bare is not None
    assert monthly(bare, {}) is None
    catalogue = {"price_c": CataloguePrice(Decimal("19.00"), "month", "eur")}
    assert monthly(bare, catalogue) == ("eur", 1900)
    assert snapshot("invoice.paid", sub()) is None


def test_what_moved_and_what_is_newer() -> None:
    assert kind(0, 1900, ended=False) == "new"
    assert kind(1900, 2900, ended=False) == "expansion"
    assert kind(2900, 1900, ended=False) == "contraction"
    assert kind(1900, 0, ended=False) == "contraction"  # a full coupon: still a subscription
    assert kind(1900, 0, ended=True) == "churn"
    assert kind(1900, 1900, ended=True) is None
    at = datetime.fromtimestamp(T0, UTC)
    level = Level("usd", 1900, at, 1)
    assert newer(at, 2, level)
    assert newer(at, 1, level)
    assert not newer(at, 0, level)


def _cancellation(obj: dict[str, Any]) -> Any:
    found = snapshot("customer.subscription.updated", obj)
    assert found is not None
    return found.cancellation


@pytest.mark.parametrize(
    ("obj", "feedback", "comment"),
    [
        (sub(cancel_at_period_end=True), None, False),
        (sub(cancel_at=T0, cancellation_details={"feedback": "unused"}), "unused", False),
        (sub("canceled", cancellation_details={"comment": " ", "feedback": None}), None, False),
        (sub("canceled", cancellation_details={"comment": "bye", "feedback": "other"}),
         "other", True),
    ],
)  # fmt: skip
def test_a_cancellation_and_what_its_customer_said(
    obj: dict[str, Any], feedback: str | None, comment: bool
) -> None:
    found = _cancellation(obj)
    assert (found.feedback, found.has_comment) == (feedback, comment)
    assert _cancellation(sub()) is None
    assert _cancellation(sub("incomplete_expired")) is None


TYPES = {0: "customer.subscription.created", 1: "customer.subscription.updated"}


class Movements(RuleBasedStateMachine):
    """Stripe changes one subscription; its events reach the access cycle late, out of order,
    again, several in a batch. Stored as the write stores them (a level replaced only by a newer
    one, a movement once per event), the movements add up to the MRR of the newest event
    delivered, each counted once."""

    def __init__(self) -> None:
        super().__init__()
        self.emitted: list[tuple[Event, int]] = []  # with the MRR each says
        self.clock = T0
        self.deleted = False
        self.claimed: set[str] = set()
        self.delivered: set[int] = set()
        self.level: Level | None = None
        self.movements: dict[str, tuple[int, str]] = {}
        self.held: dict[str, Entitlement] = {}

    @rule(
        status=st.sampled_from(["active", "trialing", "past_due", "canceled"]),
        quantity=st.integers(1, 4),
        coupon=st.sampled_from([None, 50]),
        step=st.integers(1, 3),
    )
    def stripe_changes(self, status: str, quantity: int, coupon: int | None, step: int) -> None:
        if self.deleted:
            return
        self.clock += step
        discount = {"coupon": {"percent_off": coupon}} if coupon else None
        obj = sub(status, quantity, discount=discount)
        event_type = TYPES[min(len(self.emitted), 1)]
        paying = status in ("active", "past_due")
        amount = (1000 * quantity * (100 - (coupon or 0)) // 100) if paying else 0
        self._emit(event_type, obj, amount)

    @rule(step=st.integers(0, 1))
    def stripe_deletes(self, step: int) -> None:
        """Its end, possibly in the second of its last change (newer all the same)."""
        if self.deleted or not self.emitted:
            return
        self.clock += step
        self.deleted = True
        self._emit("customer.subscription.deleted", sub("canceled"), 0)

    def _emit(self, event_type: str, obj: dict[str, Any], amount: int) -> None:
        n = len(self.emitted)
        body = stripe_event(event_type, obj, created=self.clock, event_id=f"evt_{n}")
        self.emitted.append((parse_event(json.loads(body)), amount))

    @rule(picks=st.lists(st.integers(0, 50), min_size=1, max_size=4))
    def deliver(self, picks: list[int]) -> None:
        if not self.emitted:
            return
        chosen = [p % len(self.emitted) for p in picks]
        batch = [Pending(e, to_changes(e)) for e, _ in (self.emitted[n] for n in chosen)]
        fresh = {p.event.id for p in batch} - self.claimed
        state = State(
            claimed=fresh,
            accounts=[ADA],
            held={ADA.id: list(self.held.values())},
            purchases={},
            recorded={},
            levels={"sub_1": self.level} if self.level else {},
        )
        plan = decide(batch, state, Answers())
        if plan.asks:  # a tie of the grant: Stripe says what the subscription is now
            now = "canceled" if self.deleted else self.emitted[-1][0].object["status"]
            plan = decide(batch, state, Answers(statuses={"sub_1": now}))
        assert not plan.asks
        self.claimed |= fresh
        self.delivered |= set(chosen)
        self.held.update(plan.grants)
        for m in plan.movements:  # `on conflict (event_id) do nothing`
            assert m.event_id in fresh
            self.movements.setdefault(m.event_id, (m.delta, m.kind))
        written = plan.levels.get("sub_1")
        if written is not None and newer(written[0].at, written[0].rank, self.level):
            self.level = written[0]

    @invariant()
    def movements_add_up_to_the_newest_mrr(self) -> None:
        total = sum(delta for delta, _ in self.movements.values())
        if not self.delivered:
            assert total == 0
            return
        newest = max(self.delivered)  # emitted in Stripe's order, each newer than the last
        assert total == self.emitted[newest][1]
        assert self.level is not None
        assert self.level.amount == total

    @invariant()
    def each_kind_moves_its_way(self) -> None:
        for delta, moved in self.movements.values():
            assert (delta > 0) == (moved in ("new", "expansion")), (delta, moved)


TestMovements = Movements.TestCase
TestMovements.settings = settings(
    max_examples=200, stateful_step_count=20, deadline=None, database=None
)


@pytest.mark.parametrize(
    "price",
    [
        {**PRICE, "unit_amount": -500},
        {**PRICE, "unit_amount": None, "unit_amount_decimal": "NaN"},
        {**PRICE, "currency": "us dollars"},
        {**PRICE, "recurring": {"interval": "fortnight"}},
    ],
)
def test_a_price_no_table_would_take_is_no_figure(price: dict[str, Any]) -> None:
    """Odd input says no MRR (the access change goes on without it): a row the tables refuse
    would take the access change down with it."""
    snap = snapshot("customer.subscription.updated", sub(price=price))
    assert snap is not None
    assert monthly(snap, {}) is None


def test_an_odd_coupon_takes_off_no_more_than_there_is() -> None:
    for coupon in ({"percent_off": 250}, {"percent_off": float("nan")}, {"amount_off": -100}):
        snap = snapshot("customer.subscription.updated", sub(discount={"coupon": coupon}))
        assert snap is not None
        assert monthly(snap, {}) == ("usd", 1000)
    big = snapshot("customer.subscription.updated", sub(discount={"coupon": {"amount_off": 5000}}))
    assert big is not None
    assert monthly(big, {}) == ("usd", 0)
