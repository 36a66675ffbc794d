"""Consuming credits, the one implementation behind every entry point: `POST /api/usage`,
`@consumes` on a founder's route, and a reservation settled once the work's amount is known.

The decision is Postgres's (`credits/store.py`: one statement, once per key); this module
finds the account and turns an answer into the domain's errors.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from adapters.db.pool import Database
from core.errors import Conflict, NotEnoughCredits, NotFound, Replayed
from core.events import Event
from credits import store
from credits.rules import (
    Answer,
    Check,
    Credits,
    Taken,
    not_enough,
    overage_limit,
    overage_recorded,
    reached,
    replay,
    threshold_events,
    top_up_claimed,
)

log = logging.getLogger(__name__)

# Hands an application event to the bus (raises when the bus does not take it).
Publish = Callable[[Event, bytes], None]


@dataclass(frozen=True)
class Payer:
    """Whose credits: a person (their own pool, else a seated team's) or a team's pool."""

    user_id: str | None = None
    team_id: str | None = None


def consume(
    db: Database,
    payer: Payer,
    feature: str,
    amount: int,
    key: str,
    *,
    reserve: bool = False,
    publish: Publish | None = None,
    alerts: Sequence[int] = (),
) -> Taken:
    """Take `amount` credits of `feature` under `key` (the same key again answers the first
    time's answer). Raises NotFound, Conflict (a key used for another consumption) or
    NotEnoughCredits. An overage (beyond the credits, on a meter) is announced on the bus, and
    so is each of `alerts` (percent of the grant used) this consumption reached."""
    if payer.team_id is not None:
        account = store.team_account(db, payer.team_id)
        if account is None:
            raise NotFound("No such team (teamId)")
        taken = store.take(db, account, feature, amount, key, reserve=reserve)
    else:
        taken, found = store.take_for(
            db, payer.user_id or "", feature, amount, key, reserve=reserve
        )
        if found is None:
            raise NotFound("No such user (userId)")
        account = found
    taken = checked(taken, key)
    _publish_consumption(taken, key, publish)
    _alert(db, account, taken, publish, alerts)
    _top_up(db, account, taken, publish)
    return taken


def check(db: Database, payer: Payer, feature: str, amount: int) -> Check:
    """Whether `amount` of `feature` would be taken now from the payer's pool, and whether any
    of it would be overage; takes nothing and writes nothing. Raises NotFound."""
    if payer.team_id is not None:
        account = store.team_account(db, payer.team_id)
        if account is None:
            raise NotFound("No such team (teamId)")
        return store.check(db, account, feature, amount)
    found = store.check_for(db, payer.user_id or "", feature, amount)
    if found is None:
        raise NotFound("No such user (userId)")
    return found


def first_time(taken: Taken, request: str | None = None) -> None:
    """Let the work behind a key run only for the key's first request: the same request sent
    again (`request`, its digest) is given the first one's kept answer (`Replayed`); another
    request under the key, or one while the first still runs or after its work failed, is 409
    (`replay`, credits/rules.py)."""
    kept = replay(taken, request)
    if isinstance(kept, Answer):
        raise Replayed(kept)
    if kept is not None:
        raise Conflict(kept)


def settle(
    db: Database,
    key: str,
    amount: int,
    *,
    answer: Answer | None = None,
    publish: Publish | None = None,
) -> Taken:
    """A reservation settled at what the work took (0: released whole), with its request's
    answer kept for a request sent again with the key."""
    taken = checked(store.settle(db, key, amount, answer), key)
    _publish_consumption(taken, key, publish)
    return taken


def _publish_consumption(taken: Taken, key: str, publish: Publish | None) -> None:
    """An overage consumed now is announced for its report to the meter. Should the bus not
    take it, the consumption stands: its row is the outbox, and `flask --app main credits
    report` announces what is still unreported."""
    # Announced again when the key is sent again (the first announcement may have been lost):
    # the reporter sends each overage once whatever it is told.
    if publish is None or not (taken.overage and taken.state == "consumed"):
        return
    try:
        publish(*overage_recorded(key, datetime.now(UTC)))
    except Exception as exc:
        log.warning("credits: overage of %s not announced (the sweep will): %s", key, exc)


@contextmanager
def reserved(
    db: Database,
    payer: Payer,
    feature: str,
    amount: int,
    key: str | None = None,
    *,
    request: str | None = None,
    publish: Publish | None = None,
) -> Iterator[Reservation]:
    """Reserve up to `amount` before the work; the block says what it took
    (`reservation.took(n)`), and the rest is given back. Work that fails releases it all.
    `request`: the digest of the request the key was sent with (`first_time`)."""
    reservation = Reservation(key or str(uuid.uuid4()), amount)
    taken = consume(db, payer, feature, amount, reservation.key, reserve=True, publish=publish)
    first_time(taken, request)
    try:
        yield reservation
    except BaseException:
        settle(db, reservation.key, 0)
        raise
    settle(db, reservation.key, reservation.used, publish=publish)


@dataclass
class Reservation:
    key: str
    amount: int
    used: int = 0

    def took(self, used: int) -> None:
        if not 0 <= used <= self.amount:
            raise ValueError(f"took {used}, reserved {self.amount}")
        self.used = used


def answered(db: Database, key: str, answer: Answer) -> None:
    """Keep the answer of a request whose reservation was settled before it answered. Should
    it not be kept, the consumption stands and a request sent again with its key is 409."""
    try:
        store.answered(db, key, answer)
    except Exception as exc:
        log.warning("credits: the answer under %s not kept: %s", key, exc)


def checked(taken: Taken, key: str) -> Taken:
    if taken.state == "refused":
        refusal = overage_limit if taken.capped else not_enough
        raise NotEnoughCredits(refusal(taken.feature), balance=taken.balance)
    if taken.state == "conflict":
        raise Conflict("This key was used for another consumption (key)")
    if taken.state == "unknown":
        raise NotFound(f"No reservation under this key (key {key!r})")
    return taken


def held(db: Database, user_id: str) -> list[Credits]:
    """Every feature's credits the person has, per account they have access through."""
    return store.held(db, user_id)


def _top_up(db: Database, account: str, taken: Taken, publish: Publish | None) -> None:
    """A consumption that leaves the balance below its holder's automatic top-up threshold
    claims the top-up (one in flight per account and feature) and announces it once committed;
    the charge is made off this request, by the access target (topups/charge.py). Should the
    announcement not reach the bus, the claim stands and `flask --app main credits report`
    announces it again."""
    if publish is None or not taken.first or not taken.allowed:
        return
    try:
        crossing = store.claim_top_up(db, account, taken.feature)
        if crossing is not None:
            publish(*top_up_claimed(account, taken.feature, crossing, datetime.now(UTC)))
    except Exception as exc:  # the consumption stands; the sweep announces a claim left
        log.warning("credits: the top-up of %s not announced (the sweep will): %s", account, exc)


def _alert(
    db: Database, account: str, taken: Taken, publish: Publish | None, alerts: Sequence[int]
) -> None:
    """Each threshold of the grant used that this consumption reached is told to its holder,
    once a period (the event's id names the threshold and the period, and the e-mail subscriber
    sends an event's mail once)."""
    if publish is None or not reached(taken, alerts):
        return
    try:
        to = store.contact(db, account)
        if not to:
            return
        terms = store.alert_terms(db, account, taken.feature)
        now = datetime.now(UTC)
        for event in threshold_events(
            taken, account_id=account, to=to, at=now, thresholds=alerts, terms=terms
        ):
            publish(*event)
    except Exception as exc:  # the consumption stands; the mail is a courtesy
        log.warning("credits: the thresholds reached by %s not announced: %s", account, exc)
