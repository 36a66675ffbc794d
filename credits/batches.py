"""Consumptions of one instance taken together: the calls in flight at the same moment go to
Postgres as one statement (`public.credit_take` or `credit_take_for` once per consumption, in
one transaction, one round trip), so an instance's rate is not bounded by its connections.

While a connection of the pool is free, a call goes alone at once, as without batches; a call
that arrives while the pool's every connection carries a batch waits for one of them to come
back, then goes in the next: it waits at most the round trip in flight and its own. Each
consumption is decided as it would be alone (its key, its account's grants locked in id order);
the batch's consumptions are sent in the order of their accounts (else their people), so two
batches lock the accounts they share in the same order. Should the batch fail as a whole (one
consumption's error aborts its transaction), each of its consumptions is sent again alone and
answers for itself: every consumption is safe to send again under its key.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.db.pool import Database

# The most consumptions one statement takes (a larger backlog goes in the next).
LARGEST = 500

BATCH = (
    "select case when v.person is not null"
    " then public.credit_take_for(v.person, v.feature, v.amount, v.key, v.state)"
    " else public.credit_take(v.account, v.feature, v.amount, v.key, v.state) end as taken"
    " from unnest(%s::uuid[], %s::uuid[], %s::text[], %s::integer[], %s::text[], %s::text[])"
    " with ordinality as v(account, person, feature, amount, key, state, n)"
    " order by v.n"
)
ALONE_ACCOUNT = "select public.credit_take(%s::uuid, %s, %s, %s, %s) as taken"
ALONE_PERSON = "select public.credit_take_for(%s::uuid, %s, %s, %s, %s) as taken"


@dataclass(frozen=True)
class Consumption:
    """One consumption to take: from an account, or from a person's pool (`person`)."""

    account: str | None
    person: str | None
    feature: str
    amount: int
    key: str
    state: str  # consumed or reserved


@dataclass
class _Call:
    consumption: Consumption
    done: threading.Event = field(default_factory=threading.Event)
    answer: Mapping[str, Any] | None = None
    error: BaseException | None = None
    lead: list[_Call] | None = None  # set when this call's thread is to send the next batch


class Batches:
    """The consumptions of one `Database` (one instance's pool), taken in batches."""

    def __init__(self, db: Database, *, flushes: int | None = None, largest: int = LARGEST) -> None:
        self._db = db
        self._flushes = flushes or db.max_size  # one batch in flight per connection
        self._largest = largest
        self._lock = threading.Lock()
        self._waiting: list[_Call] = []
        self._in_flight = 0

    def take(self, consumption: Consumption) -> Mapping[str, Any]:
        """What `credit_take` (or `credit_take_for`) answered this consumption."""
        call = _Call(consumption)
        with self._lock:
            self._waiting.append(call)
            batch = self._next() if self._in_flight < self._flushes else None
            if batch is not None:
                self._in_flight += 1
        if batch is not None:
            self._send(batch)
        while not call.done.is_set() or call.lead is not None:
            call.done.wait()
            if call.lead is not None:  # handed the next batch, which holds this call too
                lead, call.lead = call.lead, None
                self._send(lead)
        if call.error is not None:
            raise call.error
        assert call.answer is not None
        return call.answer

    def _next(self) -> list[_Call]:
        """The calls waiting, up to `largest`, taken off the queue (the lock held)."""
        batch, self._waiting = self._waiting[: self._largest], self._waiting[self._largest :]
        return batch

    def _send(self, batch: list[_Call]) -> None:
        """Send a batch, answer its calls, then hand the next batch (if calls wait) to one of
        its calls' threads, or stand down."""
        try:
            self._answer(batch)
        finally:
            with self._lock:
                following = self._next()
                if not following:
                    self._in_flight -= 1
            if following:
                following[0].lead = following
                following[0].done.set()
            for call in batch:
                call.done.set()

    def _answer(self, batch: list[_Call]) -> None:
        ordered = sorted(
            batch,
            key=lambda c: (c.consumption.account or "", c.consumption.person or ""),
        )
        items = [c.consumption for c in ordered]
        try:
            rows = self._db.fetch_all(
                BATCH,
                (
                    [i.account for i in items],
                    [i.person for i in items],
                    [i.feature for i in items],
                    [i.amount for i in items],
                    [i.key for i in items],
                    [i.state for i in items],
                ),
            )
            for call, row in zip(ordered, rows, strict=True):
                call.answer = row["taken"]
        except Exception:  # one consumption's failure aborted them all: each alone
            for call in ordered:
                self._alone(call)

    def _alone(self, call: _Call) -> None:
        c = call.consumption
        try:
            query = ALONE_PERSON if c.person is not None else ALONE_ACCOUNT
            whose = c.person if c.person is not None else c.account
            [row] = self._db.fetch_all(query, (whose, c.feature, c.amount, c.key, c.state))
            call.answer = row["taken"]
        except Exception as exc:
            call.error = exc


_BATCHES: weakref.WeakKeyDictionary[Database, Batches] = weakref.WeakKeyDictionary()
_BATCHES_LOCK = threading.Lock()


def batches_of(db: Database) -> Batches:
    """The batches of this database's pool (one per pool: one instance's)."""
    with _BATCHES_LOCK:
        found = _BATCHES.get(db)
        if found is None:
            found = _BATCHES[db] = Batches(db)
        return found
