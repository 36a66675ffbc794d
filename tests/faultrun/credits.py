"""The credits state machine (tests/credits/test_store_model.py) under the fault run's
kind of fault: its steps' Postgres connections killed mid-transaction with
`pg_terminate_backend`, each killed step sent again as its client would, under the same
idempotency key (a consumption's, or the access cycle's source and event), and the database
still equal to the model after every step.

Where a step is killed is chosen so that the kill lands inside its transaction, not by chance:
- the access cycle's writes (grants, their ends, the subscription's standing) are killed after
  their statements ran and before their commit, from their own connection's backend id;
- `credit_take` and `credits_settle`, one round trip each, are made to wait inside their
  transaction on a lock another connection holds (the account's grants, which a first
  consumption locks after it recorded its key and a settle after it locked its reservation;
  else the key's row, or the ledger's table), and are killed while they wait. Killed once, the
  pool sends the statement again on a new connection itself; killed twice (the machine's pool
  holds one connection, so it tries twice), the pool gives up, and the step sends the key again.

The machine is the suite's with automatic top-up (tests/topups/test_top_up_model.py): a charge of
a claimed top-up is killed while Stripe makes it (Stripe held slow, the worker's transaction
holding the claim killed, Stripe then answering): the charge is sent again, its idempotency key
answers the same intent, and the stand-in holds one charge per claim charged.

Which steps are killed, and how often, comes from a generator seeded with the run's seed and
the example's number; Hypothesis draws the examples from the same seed, so a failure
reproduces with it.
"""

from __future__ import annotations

import random
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo

from adapters.db.pool import Database, DatabaseUnavailable
from adapters.stripe_api import StripeGateway
from core.app_events import CREDITS_TOP_UP
from core.events import Event
from core.stripe_objects import CURRENT_VERSION
from credits.rules import Taken
from dev.stripe_stand_in import API_KEY, StripeStandIn
from tests.credits import test_store_model as machine
from tests.topups.test_top_up_model import TopUpCredits

APPLICATION = "faultrun-credits"
HOLDER = "faultrun-credits-holder"
SHARE = 3  # one call in this many is killed
TRIES = 5  # a call killed is sent again up to this many times
KILLED_WAIT_MS = 5000  # pg_terminate_backend waits for the backend to be gone
T = TypeVar("T")


@dataclass
class Figures:
    examples: int = 0
    calls: int = 0  # the steps' calls to Postgres (a step makes one or two)
    killed_calls: int = 0  # calls whose connection was killed at least once
    kills: int = 0  # backends killed
    sent_again: int = 0  # calls the pool gave up on (or a write's), sent again by the step
    missed: int = 0  # calls meant to be killed that never waited on the lock (none expected)
    charges_killed: int = 0  # top-up charges killed while Stripe made them, sent again


class Killer:
    """Two connections of its own: one holds the lock a step is made to wait on, the other kills
    the step's backend."""

    def __init__(self, url: str) -> None:
        self._kills = psycopg.connect(url, autocommit=True)
        self._holder = psycopg.connect(make_conninfo(url, application_name=HOLDER))
        self.figures = Figures()

    def close(self) -> None:
        self._holder.close()
        self._kills.close()

    def terminate(self, pid: int) -> None:
        row = self._kills.execute(
            "select pg_terminate_backend(%s, %s)", (pid, KILLED_WAIT_MS)
        ).fetchone()
        assert row is not None, pid
        assert row[0], f"backend {pid} not terminated"
        self.figures.kills += 1

    @contextmanager
    def holding(self, lock: str, params: Any, kills: int) -> Iterator[None]:
        """Inside the block, a step that waits on `lock` is killed `kills` times (a new
        connection of the pool's waits again), then the lock is let go."""
        self._holder.execute(lock, params)
        done = threading.Event()
        killing = threading.Thread(target=self._kill_waiting, args=(kills, done), daemon=True)
        killing.start()
        try:
            yield
        finally:
            done.set()
            killing.join()

    def charging(self) -> int | None:
        """The backend of a top-up's charge waiting on Stripe inside its transaction."""
        row = self._kills.execute(
            "select a.pid from pg_stat_activity a join pg_locks l on l.pid = a.pid"
            " where a.application_name = %s and a.state = 'idle in transaction'"
            " and l.relation = 'public.credit_top_ups'::regclass and l.mode = 'RowShareLock'",
            (APPLICATION,),
        ).fetchone()
        return int(row[0]) if row else None

    def _kill_waiting(self, kills: int, done: threading.Event) -> None:
        holder = self._holder.info.backend_pid
        killed: list[int] = []
        try:
            while len(killed) < kills and not done.is_set():
                rows = self._kills.execute(
                    "select pid from pg_stat_activity where application_name = %s"
                    " and %s = any(pg_blocking_pids(pid)) and pid <> all(%s)",
                    (APPLICATION, holder, killed),
                ).fetchall()
                if not rows:
                    done.wait(0.002)  # the step has not reached the lock yet
                    continue
                self.terminate(rows[0][0])
                killed.append(rows[0][0])
            if len(killed) < kills:
                self.figures.missed += 1
        finally:
            self._holder.rollback()  # the lock let go: the step sent again goes through


class FaultyCredits(TopUpCredits):
    """The suite's machine (with automatic top-up), its steps' connections killed
    mid-transaction."""

    killer: Killer  # set by `run`
    seed: int

    def __init__(self) -> None:
        super().__init__()
        figures = self.killer.figures
        self.rng = random.Random(f"{self.seed}:{figures.examples}")
        figures.examples += 1

    def _faulted(self) -> int:
        """How many times this call's connection is killed (0: not at all)."""
        self.killer.figures.calls += 1
        if self.rng.randrange(SHARE):
            return 0
        self.killer.figures.killed_calls += 1
        return self.rng.choice((1, 2))

    def _again(self, step: Callable[[], T]) -> T:
        """The step, sent again while the database answers it was unavailable."""
        for _ in range(TRIES - 1):
            try:
                return step()
            except DatabaseUnavailable:
                self.killer.figures.sent_again += 1
        return step()

    def _write(self, *writes: tuple[str, Any]) -> None:
        if not self._faulted():
            super()._write(*writes)
            return
        # Killed after its statements ran, before its commit: rolled back, sent again whole.
        try:
            with self.db.transaction() as conn:
                for statement, params in writes:
                    conn.execute(statement, params)
                self.killer.terminate(conn.info.backend_pid)
        except DatabaseUnavailable:
            self.killer.figures.sent_again += 1
        else:
            raise AssertionError("a transaction whose backend was killed committed")
        self._again(lambda: super(FaultyCredits, self)._write(*writes))

    def _take(self, amount: int, key: str, *, reserve: bool = False) -> Taken:
        kills = self._faulted()
        call = super()._take
        if not kills:
            return call(amount, key, reserve=reserve)
        if key not in self.model.uses and any(g.live for g in self.model.grants):
            # A first consumption waits on the grants after recording its key: the kill
            # rolls the key back, and the key sent again is taken once.
            lock = "select id from public.credit_grants where account_id = %s for update"
            params: Any = (self.account,)
        else:
            lock, params = "lock table public.credit_uses in share mode", None
        with self.killer.holding(lock, params, kills):
            taken = self._again(lambda: call(amount, key, reserve=reserve))
        if key not in self.model.uses:
            assert taken.first, f"{key}: the killed attempt left its key taken"
        return taken

    def _handle(self, event: Event) -> str | None:
        """A claim's charge killed while Stripe makes it, then sent again."""
        call = super()._handle
        if event.type != CREDITS_TOP_UP or not self._faulted():
            return self._again(lambda: call(event))
        failed: list[BaseException] = []
        answered: list[str | None] = []

        def charge() -> None:
            try:
                answered.append(call(event))
            except DatabaseUnavailable as exc:
                failed.append(exc)

        self.stand_in.responding.clear()  # Stripe slow: the charge waits in its transaction
        worker = threading.Thread(target=charge, daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                pid = self.killer.charging()
                if pid is not None:
                    self.killer.terminate(pid)
                    self.killer.figures.charges_killed += 1
                    break
                worker.join(0.002)
        finally:
            self.stand_in.responding.set()
            worker.join()
        if not failed:  # answered before it was killed (turned off: no charge to wait on)
            [outcome] = answered
            return outcome
        self.killer.figures.sent_again += 1
        return self._again(lambda: call(event))

    def _settle(self, key: str, took: int) -> Taken:
        kills = self._faulted()
        call = super()._settle
        if not kills:
            return call(key, took)
        use = self.model.uses[key]
        if use.state == "reserved" and use.covered > took:
            # Waits on the grants it gives back to, its reservation locked.
            lock = "select id from public.credit_grants where account_id = %s for update"
            params: Any = (self.account,)
        else:
            lock, params = "select 1 from public.credit_uses where key = %s for update", (key,)
        with self.killer.holding(lock, params, kills):
            return self._again(lambda: call(key, took))


def run(
    url: str, *, seed: int, examples: int, steps: int, stripe: StripeStandIn
) -> tuple[Figures, list[str]]:
    """The machine with faults on the database at `url` (its top-ups charged on `stripe`): its
    figures, and what differed from the model (the failing example's error, as Hypothesis
    tells it)."""
    db = Database(lambda: make_conninfo(url, application_name=APPLICATION), max_size=1)
    killer = Killer(url)
    gateway = StripeGateway(
        api_key=API_KEY, api_base=stripe.url, api_version=CURRENT_VERSION, timeout=10
    )
    machine.prepare(db)
    with db.transaction() as conn:
        conn.execute(
            "update public.products set top_up = true where stripe_price_id = %s", (machine.PACK,)
        )
    faulty = type(
        "FaultyCredits",
        (FaultyCredits,),
        {"killer": killer, "seed": seed, "stand_in": stripe, "stripe": gateway},
    )
    differences: list[str] = []
    try:
        machine.run(db, examples=examples, steps=steps, machine=faulty, seed=seed)
    except Exception as exc:  # the model's assertion, or what a step raised
        differences.append(
            f"credits machine (seed {seed}): " + "".join(traceback.format_exception_only(exc))
        )
    finally:
        killer.close()
        db.close()
    if killer.figures.missed:
        differences.append(
            f"credits machine: {killer.figures.missed} calls meant to be killed never waited"
        )
    return killer.figures, differences
