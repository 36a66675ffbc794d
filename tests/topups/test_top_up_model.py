"""Automatic top-up against the credits model: the credits machine (tests/credits/
test_store_model.py: grants, packs, refunds, the metered plan and its cap, reservations, checks,
keys sent again) with top-up turned on and off, each consumption claiming it as the service does,
claims made in parallel, charges on the Stripe stand-in (again, as a redelivery would) and
Stripe's word that one was paid (twice). After every step: one claim at most in flight, a claim
per crossing and none more, nothing charged while it was off, each paid pack granted once, a
check changing nothing, and the overage never past its cap."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from adapters.db.pool import Database
from adapters.stripe_api import StripeGateway
from core.events import Event, parse_event
from core.stripe_objects import CURRENT_VERSION
from credits import store as credits
from credits.rules import Taken, top_up_claimed
from dev.stripe_stand_in import API_KEY, StripeStandIn
from tests.credits import test_store_model as base
from topups import store as top_ups
from topups.charge import TopUps
from topups.rules import Claim


@dataclass
class TopUpModel:
    on: bool = False
    below: int = 0
    in_flight: bool = False
    crossings: int = 0
    charged: list[str] = field(default_factory=list)  # the intents charged, in order
    granted: set[str] = field(default_factory=set)


class TopUpCredits(base.Credits):
    """The credits machine with automatic top-up of its pack."""

    stand_in: StripeStandIn  # set by the test that runs it
    stripe: StripeGateway

    def __init__(self) -> None:
        super().__init__()
        self.top = TopUpModel()
        self.announced: list[Claim] = []  # claims made, in order
        self.handled: list[Claim] = []
        self.stand_in.save_card(self.customer)
        self.worker = TopUps(self.db, self.stripe, lambda event, data: None)

    def _take(self, amount: int, key: str, *, reserve: bool = False) -> Taken:
        """A consumption, then its claim of the top-up as the service makes it once committed
        (credits/service.py `_top_up`)."""
        taken = super()._take(amount, key, reserve=reserve)
        before = self.top.in_flight
        if taken.first and taken.allowed:
            crossing = credits.claim_top_up(self.db, self.account, "generations")
            expected = self.top.on and not before and taken.balance < self.top.below
            assert (crossing is not None) == expected
            if crossing is not None:
                self.top.crossings += 1
                assert crossing == self.top.crossings
                self.top.in_flight = True
                self.announced.append(Claim(self.account, "generations", crossing))
        return taken

    @initialize(below=st.integers(1, 12))
    def chosen(self, below: int) -> None:
        """Each example starts with top-up on, so that its claims come early and often."""
        self.turn_on(below)

    @rule(below=st.integers(1, 12))
    def turn_on(self, below: int) -> None:
        top_ups.turn_on(self.db, self.account, "generations", base.PACK, below)
        self.top.on, self.top.below = True, below

    @rule()
    def turn_off(self) -> None:
        top_ups.turn_off(self.db, self.account, "generations")
        self.top.on = False

    @rule(n=st.integers(2, 6))
    def claims_in_parallel(self, n: int) -> None:
        """Several consumptions' claims at once: one at most is taken."""
        with ThreadPoolExecutor(n) as pool:
            found = list(
                pool.map(
                    lambda _: credits.claim_top_up(self.db, self.account, "generations"), range(n)
                )
            )
        made = [c for c in found if c is not None]
        expected = self.top.on and not self.top.in_flight and self.model.balance < self.top.below
        assert len(made) == (1 if expected else 0)
        if made:
            self.top.crossings += 1
            assert made == [self.top.crossings]
            self.top.in_flight = True
            self.announced.append(Claim(self.account, "generations", made[0]))

    @precondition(lambda self: len(self.handled) < len(self.announced))
    @rule()
    def charge(self) -> None:
        claim = self.announced[len(self.handled)]
        self.handled.append(claim)
        outcome = self._handle(self._claim_event(claim))
        if not self.top.on:
            assert outcome == "top-up turned off before its charge"
            self.top.in_flight = False
            return
        if self.model.balance >= self.top.below:
            # Credits granted, or the threshold lowered, since the claim: nothing bought.
            assert outcome == "top-up not needed: the balance is not below its threshold"
            self.top.in_flight = False
            return
        assert outcome == "top-up charged"
        [intent] = [i for i in self._intents() if i not in self.top.charged]
        self.top.charged.append(intent)

    @precondition(lambda self: bool(self.handled))
    @rule(data=st.data())
    def charge_again(self, data: st.DataObject) -> None:
        """A claim's announcement delivered again charges nothing more."""
        claim = data.draw(st.sampled_from(self.handled))
        outcome = self._handle(self._claim_event(claim))
        assert outcome in ("top-up charged before", "top-up settled before")

    @precondition(lambda self: bool(self.top.charged))
    @rule(data=st.data(), twice=st.booleans())
    def paid(self, data: st.DataObject, twice: bool) -> None:
        """Stripe says a charge was paid (and may say it again): its pack granted once."""
        intent = data.draw(st.sampled_from(self.top.charged))
        found = self.stand_in.payment_intents[intent]
        event = parse_event(
            {
                "id": f"evt_{intent}",
                "object": "event",
                "type": "payment_intent.succeeded",
                "created": found["created"],
                "livemode": False,
                "api_version": CURRENT_VERSION,
                "data": {"object": found},
            }
        )
        for _ in range(2 if twice else 1):
            assert self._handle(event) is not None
        if intent not in self.top.granted:
            self.top.granted.add(intent)
            self.model.grants.append(base.Grant(intent, "once", base.PACK_CREDITS))
            crossing = int(found["metadata"]["top_up_crossing"])
            if crossing == self.top.crossings:
                self.top.in_flight = False

    def _handle(self, event: Event) -> str | None:
        """A top-up's event handled by the access target's worker (the fault run kills its
        connection here)."""
        return self.worker.handle(event)

    def _claim_event(self, claim: Claim) -> Event:
        event, _ = top_up_claimed(
            claim.account_id, claim.feature, claim.crossing, datetime.now(UTC)
        )
        return event

    def _intents(self) -> list[str]:
        return [
            i["id"]
            for i in self.stand_in.off_session_charges()
            if i["metadata"].get("top_up_account") == self.account
        ]

    def _state(self) -> list[Any]:
        return [
            *super()._state(),
            self.db.fetch_all(
                "select * from public.credit_top_ups where account_id = %s", (self.account,)
            ),
        ]

    @invariant()
    def top_up_equal_to_the_model(self) -> None:
        rows = self.db.fetch_all(
            "select enabled, crossings, claimed_at is not null as claimed from"
            " public.credit_top_ups where account_id = %s",
            (self.account,),
        )
        if not rows:
            assert self.top.crossings == 0
            return
        [row] = rows
        assert (row["enabled"], row["crossings"], row["claimed"]) == (
            self.top.on,
            self.top.crossings,
            self.top.in_flight,
        )
        # Charged once per claim charged, never more, never while off.
        assert sorted(self._intents()) == sorted(self.top.charged)


@pytest.mark.timeout(600)
def test_top_up_equals_the_model_in_any_order(
    db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    stand_in = fakes[0]
    gateway = StripeGateway(
        api_key=API_KEY, api_base=stand_in.url, api_version=CURRENT_VERSION, timeout=10
    )
    base.prepare(db)
    with db.transaction() as conn:
        conn.execute("update public.products set top_up = true where stripe_price_id = %s",
                     (base.PACK,))  # fmt: skip
    machine = type("TopUpCreditsWith", (TopUpCredits,), {"stand_in": stand_in, "stripe": gateway})
    base.run(db, examples=25, machine=machine)
