"""Recovering events that never reached us (reconcile) or that the subscribers gave up on
(replay): both only republish, and the subscribers are idempotent, so running either twice is
harmless."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import orjson

from adapters.bus import EventBus, PublishError
from adapters.db.pool import Database
from core import stripe_objects
from core.errors import InvalidRequest
from core.events import SUBSCRIBED_TYPES, Event, InvalidEvent, events_in, parse_event
from events import ledger

if TYPE_CHECKING:  # gRPC and the Stripe SDK load only when a command runs
    from adapters.bus.dead_letters import DeadLetter, DeadLetterBox
    from adapters.stripe_api import StripeGateway

log = logging.getLogger(__name__)

# Every Stripe event reaches the access subscriber, which records each in the ledger.
LEDGER_CONSUMER = "access"
# Stripe lists events of the last 30 days only.
LONGEST = timedelta(days=30)
# How long a drain may take at least (the in-process bus retries with backoff before it gives
# up), and how often the ledger is read while waiting for an event to be applied.
DRAIN_SECONDS = 30.0
POLL_SECONDS = 0.25
_DURATION = re.compile(r"(\d+)([mhd])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


@dataclass(frozen=True)
class Found:
    id: str
    type: str
    created: datetime


def parse_since(text: str) -> timedelta:
    """'90m', '72h' or '7d': at least a minute, at most Stripe's 30 days."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise InvalidRequest(f"--since takes a duration such as 90m, 72h or 7d, not {text!r}")
    span = timedelta(**{_UNITS[match[2]]: int(match[1])})
    if not timedelta(minutes=1) <= span <= LONGEST:
        raise InvalidRequest("--since must lie between 1m and 30d (Stripe keeps 30 days)")
    return span


class RecoveryIncomplete(Exception):
    """Some events were not republished, or not applied in the time given."""

    def __init__(self, *, unpublished: list[str], unapplied: list[str]) -> None:
        self.unpublished = unpublished
        self.unapplied = unapplied
        parts = []
        if unpublished:
            parts.append(f"not republished (the bus refused): {' '.join(unpublished)}")
        if unapplied:
            parts.append(f"republished but not applied in time: {' '.join(unapplied)}")
        super().__init__("; ".join(parts))


def reconcile(
    *,
    stripe: StripeGateway,
    db: Database,
    bus: EventBus,
    since: datetime,
    dry_run: bool,
    report: Callable[[str], None],
    wait: float | None = None,
) -> list[Found]:
    """Republish Stripe's events of our types since then that the ledger has no record of.

    Returns once the bus has handed them on (`EventBus.drain`), and, with `wait`, once the
    ledger shows each applied (at most `wait` seconds); RecoveryIncomplete names the events
    that were not republished or not applied, so a run that says it recovered them did.
    """
    listed = [
        (parse_event(body), body)
        for body in stripe.events_since(
            created_gte=int(since.timestamp()), types=sorted(SUBSCRIBED_TYPES)
        )
    ]
    absent = ledger.missing(db, consumer=LEDGER_CONSUMER, event_ids=[e.id for e, _ in listed])
    report(f"Stripe lists {len(listed)} event(s) of our types since {since:%Y-%m-%d %H:%M} UTC")
    missing = sorted(((e, b) for e, b in listed if e.id in absent), key=lambda p: p[0].created)
    unpublished: list[str] = []
    for event, body in missing:
        report(f"missing: {event.id} {event.type} created {event.created:%Y-%m-%d %H:%M:%S}")
        if not stripe_objects.is_supported(event.api_version):
            # As the webhook does: never applied half-read (docs/deploy.md, "API versions").
            report(f"not republished: {event.id} is at API version {event.api_version}")
            unpublished.append(event.id)
            continue
        data = json.dumps(body, separators=(",", ":")).encode()
        if not dry_run and not _published(bus, event, data, report):
            unpublished.append(event.id)
    found = [Found(e.id, e.type, e.created) for e, _ in missing]
    if dry_run:
        report(f"would republish {len(missing)} event(s)")
        return found
    republished = [f.id for f in found if f.id not in unpublished]
    report(f"republished {len(republished)} event(s)")
    unapplied = _await_applied(db, bus, republished, wait=wait, report=report)
    if unpublished or unapplied:
        raise RecoveryIncomplete(unpublished=unpublished, unapplied=unapplied)
    return found


def _published(bus: EventBus, event: Event, data: bytes, report: Callable[[str], None]) -> bool:
    try:
        bus.publish(event, data)
    except PublishError as exc:
        report(f"could not republish {event.id}: {exc}")
        return False
    return True


def _await_applied(
    db: Database,
    bus: EventBus,
    event_ids: list[str],
    *,
    wait: float | None,
    report: Callable[[str], None],
) -> list[str]:
    """The events the ledger still lacks once the bus is drained (and `wait` has passed)."""
    deadline = time.monotonic() + (wait or 0.0)
    if not bus.drain(timeout=max(wait or 0.0, DRAIN_SECONDS)):
        report("the bus did not hand everything on in time")
    if not event_ids or wait is None:
        return []
    while absent := ledger.missing(db, consumer=LEDGER_CONSUMER, event_ids=event_ids):
        if time.monotonic() >= deadline:
            return sorted(absent)
        time.sleep(POLL_SECONDS)
    report(f"applied: {len(event_ids)} event(s), as the ledger shows")
    return []


def replay_dead_letters(
    *, box: DeadLetterBox, bus: EventBus, dry_run: bool, report: Callable[[str], None]
) -> list[Found]:
    """Republish what the dead-letter subscription holds, then take it off. What is unreadable,
    or what the bus refused, stays (RecoveryIncomplete names the latter)."""
    letters = box.pull_all()
    replayed: list[tuple[DeadLetter, Event]] = []
    left: list[DeadLetter] = []
    unpublished: list[str] = []
    for letter in letters:
        carried = _events_of(letter)
        if not carried:
            left.append(letter)
            report(f"unreadable: message {letter.message_id} left in place")
            continue
        refused = []
        for event, data in carried:
            report(f"dead letter: {event.id} {event.type}")
            if not dry_run and not _published(bus, event, data, report):
                refused.append(event.id)
        if refused:
            # Kept whole: its events that went are duplicates when it is replayed again.
            left.append(letter)
            unpublished += refused
        else:
            replayed += [(letter, event) for event, _ in carried]
    if dry_run:
        box.release(letters)
    else:
        box.acknowledge(_letters(replayed))
        box.release(left)
    verb = "would replay" if dry_run else "replayed"
    gone = len(_letters(replayed))
    report(f"{verb} {gone} of {len(letters)} dead letter(s), {len(replayed)} event(s)")
    if unpublished:
        raise RecoveryIncomplete(unpublished=unpublished, unapplied=[])
    return [Found(e.id, e.type, e.created) for _, e in replayed]


def _letters(replayed: list[tuple[DeadLetter, Event]]) -> list[DeadLetter]:
    return list({letter.message_id: letter for letter, _ in replayed}.values())


def _events_of(letter: DeadLetter) -> list[tuple[Event, bytes]]:
    """The letter's events, each with its own JSON to publish again (a message may carry
    several); none when it holds none."""
    try:
        found = events_in(letter.data)
    except ValueError as exc:
        log.error("dead letter %s is not an event: %s", letter.message_id, exc)
        return []
    if len(found) == 1 and isinstance(found[0], Event):
        return [(found[0], letter.data)]
    bodies = orjson.loads(letter.data)
    carried = []
    for item, body in zip(found, bodies, strict=True):
        if isinstance(item, InvalidEvent):
            log.error("dead letter %s holds what is not an event: %s", letter.message_id, item)
        else:
            carried.append((item, orjson.dumps(body)))
    return carried
