"""Credits against a small model: grants (paid periods, packs), their ends and refunds, the
subscription that carries the meter (active, on trial with or without a payment method, past
due, ended, replaced by an admin's comp), consumptions, reservations settled at what the work
took, checks (which change nothing), the cap on overage, and keys sent again, in any order
Hypothesis finds. Each step goes through the real statements on the test Postgres (the access
cycle's grant, reset and end; `credit_take`, `credits_settle`), and after each the balance, what
the grants say was used and the units for the meter must equal the model's. `run` takes any
database, number of examples and subclass of the machine: the fault run
(tests/faultrun/credits.py) drives the same steps with their connections killed mid-transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from adapters.db.pool import Database
from credits import store as credits
from credits.rules import Check, CreditEnd, CreditGrant, Taken
from tests.helpers import create_user

PLAN, PACK, METER = "price_model_plan", "price_model_pack", "model_meter"
PLAN_CREDITS, PACK_CREDITS = 4, 3
# A bigger plan an upgrade moves to within a period: its proration paid tops the period's
# credits up to its own, never past them, however often the plan goes up and down.
BIG_PLAN, BIG_CREDITS = "price_model_big_plan", 7
OVERAGE_CAP = 9  # the plan's overage units per period (its product's `overage_cap`)
SUBSCRIPTION, CUSTOMER = "sub_model", "cus_model"
# How the subscription that carries the meter stands, and whether Stripe will charge its
# overage: only an active one, or a trial a payment method backs.
STANDINGS = {
    "active": True,
    "trial with a card": True,
    "trial without a card": False,
    "past due": False,
    "ended": False,
    "comp": False,  # an admin's grant of the plan: nothing Stripe could bill
}


@dataclass
class Grant:
    source: str
    kind: str  # period or once
    amount: int
    used: int = 0
    live: bool = True


@dataclass
class Use:
    key: str
    amount: int
    state: str  # consumed, reserved, released, refused
    capped: bool = False  # refused because the overage would pass the cap
    covered: int = 0
    overage: int = 0
    draws: list[tuple[str, int]] = field(default_factory=list)  # (grant source, units)


class Model:
    """What the credits must be, computed without Postgres."""

    def __init__(self) -> None:
        self.grants: list[Grant] = []
        self.uses: dict[str, Use] = {}
        self.standing = "none"

    @property
    def balance(self) -> int:
        return sum(g.amount - g.used for g in self.grants if g.live)

    @property
    def used(self) -> int:
        return sum(g.used for g in self.grants if g.live)

    @property
    def metered(self) -> int:
        return sum(u.overage for u in self.uses.values() if u.state == "consumed")

    @property
    def overage_held(self) -> int:
        """The overage the period's cap counts: consumed, and drawn by reservations."""
        return sum(u.overage for u in self.uses.values() if u.state in ("consumed", "reserved"))

    def capped(self, amount: int) -> bool:
        """Whether `amount` beyond the balance would pass the cap."""
        return self.overage_held + amount - self.balance > OVERAGE_CAP

    def by_source(self, source: str) -> Grant:
        return next(g for g in self.grants if g.source == source)

    def take(self, key: str, amount: int, state: str) -> Use:
        billed = STANDINGS.get(self.standing, False)
        if self.balance < amount and not billed:
            use = Use(key, amount, "refused")
        elif self.balance < amount and self.capped(amount):
            use = Use(key, amount, "refused", capped=True)
        else:
            use = Use(key, amount, state)
            left = amount
            # Period credits first, then packs, oldest first.
            for grant in sorted(
                (g for g in self.grants if g.live and g.amount > g.used),
                key=lambda g: g.kind != "period",
            ):
                if left == 0:
                    break
                taken = min(left, grant.amount - grant.used)
                grant.used += taken
                use.draws.append((grant.source, taken))
                left -= taken
            use.covered, use.overage = amount - left, left
        self.uses[key] = use
        return use

    def settle(self, key: str, took: int) -> None:
        use = self.uses[key]
        back = max(use.covered - took, 0)  # what was drawn and not used
        for source, units in reversed(use.draws):
            if back == 0:
                break
            given = min(back, units)
            self.by_source(source).used -= given
            back -= given
        use.state = "released" if took == 0 else "consumed"
        use.covered, use.overage = min(use.covered, took), max(took - use.covered, 0)
        if took:
            use.amount = took


def prepare(db: Database) -> None:
    """The plan (period credits, billed on a meter beyond them) and the pack, in the catalogue."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, credits, credits_period, meter, overage_cap) values"
            " ('Model plan', 9, %s, 'link', 'subscription', 'month', %s, 'period', %s, %s),"
            " ('Model pack', 5, %s, 'link', 'one_time', null, %s, 'once', null, null),"
            " ('Model big plan', 19, %s, 'link', 'subscription', 'month', %s, 'period', %s,"
            " %s) on conflict do nothing",
            (
                PLAN,
                f'{{"generations": {PLAN_CREDITS}}}',
                METER,
                OVERAGE_CAP,
                PACK,
                f'{{"generations": {PACK_CREDITS}}}',
                BIG_PLAN,
                f'{{"generations": {BIG_CREDITS}}}',
                METER,
                OVERAGE_CAP,
            ),
        )


class Credits(RuleBasedStateMachine):
    """One account's credits of `generations`, against `Model`."""

    db: Database  # set by the test that runs it

    keys = Bundle("keys")
    reservations = Bundle("reservations")
    packs = Bundle("packs")

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        user = create_user(self.db, f"model-{uuid.uuid4().hex[:12]}@example.com")
        [row] = self.db.fetch_all(
            "select id from public.accounts where owner_id = %s and kind = 'personal'", (user,)
        )
        self.account = str(row["id"])
        self.tag = uuid.uuid4().hex[:12]  # this example's keys and sources, unique in the run
        self.subscription = f"{SUBSCRIPTION}_{self.tag}"
        self.customer = f"{CUSTOMER}_{self.tag}"
        self.start = datetime.now(UTC)
        self.periods = 0
        self.upgrades = 0  # within the current period
        self.asked: dict[str, tuple[int, bool]] = {}  # what each key asked, and if reserving
        with self.db.transaction() as conn:
            conn.execute(
                "update public.accounts set customer_id = %s where id = %s",
                (self.customer, self.account),
            )

    @initialize()
    def subscribed(self) -> None:
        """Each example starts on the plan, active, its first period paid."""
        self.subscription_now("active")
        self.paid_period()

    # Every statement of a step goes through these three, so the fault run's machine
    # (tests/faultrun/credits.py) can kill their connections mid-transaction and send again.

    def _write(self, *writes: tuple[str, Any]) -> None:
        """The access cycle's writes, in one transaction."""
        with self.db.transaction() as conn:
            for statement, params in writes:
                conn.execute(statement, params)

    def _take(self, amount: int, key: str, *, reserve: bool = False) -> Taken:
        return credits.take(self.db, self.account, "generations", amount, key, reserve=reserve)

    def _settle(self, key: str, took: int) -> Taken:
        return credits.settle(self.db, key, took)

    def _check(self, amount: int) -> Check:
        return credits.check(self.db, self.account, "generations", amount)

    # Grants and their ends, through the access cycle's own statements.

    @rule()
    def paid_period(self) -> None:
        """A paid period of the plan: its credits granted, the period before ended."""
        self.periods += 1
        starts = self.start + timedelta(seconds=self.periods)
        grant = CreditGrant(
            self.account,
            f"{self.subscription}@in_{self.periods}",
            self.subscription,
            PLAN,
            starts,
            starts + timedelta(days=30),
            f"evt_{self.tag}_{self.periods}",
        )
        self._write((credits.GRANT, credits.grant_columns([grant])))
        self._write((credits.RESET, credits.reset_columns([grant])))
        for old in self.model.grants:
            if old.kind == "period":
                old.live = False
        self.model.grants.append(Grant(grant.source, "period", PLAN_CREDITS))
        self.upgrades = 0

    @rule(again=st.booleans())
    def upgraded(self, again: bool) -> None:
        """An upgrade to the big plan within the period, its proration invoice paid (then, with
        `again`, the same invoice's event once more): the period's credits topped up to the big
        plan's, less what the period's live grants gave; a downgrade after it grants nothing
        until its own period (`paid_period`), and nothing used comes back."""
        self.upgrades += 1
        starts = self.start + timedelta(seconds=self.periods, milliseconds=self.upgrades)
        grant = CreditGrant(
            self.account,
            f"{self.subscription}@in_up_{self.periods}_{self.upgrades}",
            self.subscription,
            BIG_PLAN,
            starts,
            self.start + timedelta(seconds=self.periods, days=30),
            f"evt_{self.tag}_up_{self.upgrades}",
            top_up=True,
        )
        for _ in range(2 if again else 1):
            self._write(
                (credits.GRANT, credits.grant_columns([grant])),
                (credits.RESET, credits.reset_columns([grant])),
            )
        held = sum(g.amount for g in self.model.grants if g.live and g.kind == "period")
        if held < BIG_CREDITS:
            self.model.grants.append(Grant(grant.source, "period", BIG_CREDITS - held))

    @invariant()
    def never_more_than_the_highest_plan_paid_for(self) -> None:
        [row] = self.db.fetch_all(
            "select coalesce(sum(amount), 0) as live from public.credit_grants"
            " where account_id = %s and kind = 'period' and ended_at is null",
            (self.account,),
        )
        assert row["live"] <= BIG_CREDITS

    @rule(target=packs)
    def bought_pack(self) -> str:
        source = f"cs_{self.tag}_{len(self.model.grants)}"
        grant = CreditGrant(
            self.account, source, None, PACK, datetime.now(UTC), None, f"evt_{source}"
        )
        self._write((credits.GRANT, credits.grant_columns([grant])))
        self.model.grants.append(Grant(source, "once", PACK_CREDITS))
        return source

    @rule(source=consumes(packs))
    def refunded_pack(self, source: str) -> None:
        """A pack refunded in full: what is left of it taken back, what was used stays used."""
        end = CreditEnd(None, source, datetime.now(UTC))
        self._write((credits.END, credits.end_columns([end])))
        self.model.by_source(source).live = False

    @rule(standing=st.sampled_from(sorted(STANDINGS)))
    def subscription_now(self, standing: str) -> None:
        """The subscription that carries the meter changes (as its events would say)."""
        status, active, trial, card = {
            "active": ("active", True, False, None),
            "trial with a card": ("trialing", True, True, True),
            "trial without a card": ("trialing", True, True, False),
            "past due": ("past_due", True, False, None),
            "ended": ("canceled", False, False, None),
            "comp": ("canceled", False, False, None),
        }[standing]
        self._write(
            (
                "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
                " active, trial_end, customer_id, payment_method) values (%s, %s,"
                " 'subscription', %s, %s, %s, case when %s then now() + interval '14 days' end,"
                " %s, %s) on conflict (source_id) do update set status = excluded.status,"
                " active = excluded.active, trial_end = excluded.trial_end,"
                " payment_method = excluded.payment_method",
                (self.account, self.subscription, PLAN, status, active, trial, self.customer, card),
            ),
            (
                "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
                " active) values (%s, %s, 'comp', %s, 'active', %s) on conflict (source_id)"
                " do update set active = excluded.active",
                (self.account, f"comp_{self.tag}", PLAN, standing == "comp"),
            ),
        )
        if standing == "ended":  # its end ends its period credits
            end = CreditEnd(self.subscription, None, datetime.now(UTC))
            self._write((credits.END, credits.end_columns([end])))
            for grant in self.model.grants:
                if grant.kind == "period":
                    grant.live = False
        self.model.standing = standing

    # Consumptions, reservations and keys sent again, through `credit_take` and its settling.

    @rule(target=keys, amount=st.integers(1, 6))
    def consume(self, amount: int) -> str:
        key = f"{self.tag}-{len(self.model.uses)}"
        taken = self._take(amount, key)
        self.asked[key] = (amount, False)
        expected = self.model.take(key, amount, "consumed")
        assert (taken.state, taken.overage, taken.capped) == (
            expected.state,
            expected.overage,
            expected.capped,
        )
        return key

    @rule(target=reservations, amount=st.integers(1, 10))
    def reserve(self, amount: int) -> str:
        key = f"{self.tag}-{len(self.model.uses)}"
        taken = self._take(amount, key, reserve=True)
        self.asked[key] = (amount, True)
        expected = self.model.take(key, amount, "reserved")
        assert (taken.state, taken.capped) == (expected.state, expected.capped)
        return key

    @rule(key=consumes(reservations), share=st.floats(0, 1))
    def settle(self, key: str, share: float) -> None:
        use = self.model.uses[key]
        took = round(use.amount * share)
        settled = self._settle(key, took)
        if use.state == "refused":
            assert settled.state == "refused"
            return
        self.model.settle(key, took)
        assert (settled.state, settled.overage) == (use.state, use.overage)

    @rule(key=st.one_of(keys, reservations))
    def sent_again(self, key: str) -> None:
        """A key sent again answers its first answer and takes nothing more."""
        use = self.model.uses[key]
        asked, reserve = self.asked[key]
        taken = self._take(asked, key, reserve=reserve)
        assert (taken.state, taken.first, taken.capped) == (use.state, False, use.capped)
        other = self._take(asked + 1, key)
        assert other.state == "conflict"

    @rule(amount=st.integers(1, 12))
    def checked(self, amount: int) -> None:
        """A check answers what a consumption of `amount` would answer now, and changes
        nothing (the invariant holds the rest to the model, which it does not touch)."""
        before = self._state()
        found = self._check(amount)
        billed = STANDINGS.get(self.model.standing, False)
        allowed = self.model.balance >= amount or (billed and not self.model.capped(amount))
        assert (found.allowed, found.balance) == (allowed, self.model.balance)
        assert found.overage == (allowed and self.model.balance < amount)
        assert self._state() == before

    def _state(self) -> list[Any]:
        """Every row a consumption writes, of this account."""
        return [
            self.db.fetch_all(
                "select * from public.credit_grants where account_id = %s order by id",
                (self.account,),
            ),
            self.db.fetch_all(
                "select * from public.credit_uses where account_id = %s order by key",
                (self.account,),
            ),
        ]

    @invariant()
    def equal_to_the_model(self) -> None:
        held = credits.balance(self.db, self.account, "generations")
        [row] = self.db.fetch_all(
            "select coalesce(sum(overage) filter (where state = 'consumed'), 0) as metered,"
            " coalesce(sum(covered) filter (where state in ('consumed', 'reserved')), 0)"
            " as covered, coalesce(sum(overage) filter (where state in ('consumed',"
            " 'reserved')), 0) as overage from public.credit_uses where account_id = %s",
            (self.account,),
        )
        assert held.balance == self.model.balance
        assert held.used == self.model.used
        assert row["metered"] == self.model.metered
        drawn = sum(
            u.covered for u in self.model.uses.values() if u.state in ("consumed", "reserved")
        )
        assert row["covered"] == drawn
        assert row["overage"] == self.model.overage_held <= OVERAGE_CAP  # never passed


def run(
    db: Database,
    *,
    examples: int,
    steps: int = 40,
    machine: type[Credits] = Credits,
    seed: int | None = None,
) -> None:
    """Run `machine` (this one, or the fault run's subclass) on `db` for `examples` examples.
    With a `seed` the examples are those of the seed, and a failure is told as found (not
    shrunk), so a bounded run stays bounded and a failure reproduces with its seed."""
    prepare(db)
    bound = type(f"{machine.__name__}On", (machine,), {"db": db})
    phases = list(Phase) if seed is None else [Phase.explicit, Phase.generate]
    run_state_machine_as_test(
        bound if seed is None else hypothesis_seed(seed)(bound),
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
            phases=phases,
        ),
    )


@pytest.mark.timeout(600)  # a failure is shrunk to its shortest steps, which takes a while
def test_credits_equal_the_model_in_any_order(db: Database) -> None:
    run(db, examples=40)
