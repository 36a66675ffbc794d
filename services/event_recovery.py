"""Recovering events that never reached us (reconcile) or that the subscribers gave up on
(replay): both only republish, and the subscribers are idempotent, so running either twice is
harmless."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from adapters.bus import EventBus
from adapters.db import ledger
from adapters.db.pool import Database
from core.events import SUBSCRIBED_TYPES, Event, InvalidEvent, event_from_json, parse_event
from services.errors import InvalidRequest

if TYPE_CHECKING:  # gRPC and the Stripe SDK load only when a command runs
    from adapters.bus.dead_letters import DeadLetter, DeadLetterBox
    from adapters.stripe_api import StripeGateway

log = logging.getLogger(__name__)

# Every Stripe event reaches the access subscriber, which records each in the ledger.
LEDGER_CONSUMER = "access"
# Stripe lists events of the last 30 days only.
LONGEST = timedelta(days=30)
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


def reconcile(
    *,
    stripe: StripeGateway,
    db: Database,
    bus: EventBus,
    since: datetime,
    dry_run: bool,
    report: Callable[[str], None],
) -> list[Found]:
    """Republish Stripe's events of our types since then that the ledger has no record of."""
    listed = [
        (parse_event(body), body)
        for body in stripe.events_since(
            created_gte=int(since.timestamp()), types=sorted(SUBSCRIBED_TYPES)
        )
    ]
    absent = ledger.missing(db, consumer=LEDGER_CONSUMER, event_ids=[e.id for e, _ in listed])
    report(f"Stripe lists {len(listed)} event(s) of our types since {since:%Y-%m-%d %H:%M} UTC")
    missing = sorted(((e, b) for e, b in listed if e.id in absent), key=lambda p: p[0].created)
    for event, body in missing:
        report(f"missing: {event.id} {event.type} created {event.created:%Y-%m-%d %H:%M:%S}")
        if not dry_run:
            bus.publish(event, json.dumps(body, separators=(",", ":")).encode())
    verb = "would republish" if dry_run else "republished"
    report(f"{verb} {len(missing)} event(s)")
    return [Found(e.id, e.type, e.created) for e, _ in missing]


def replay_dead_letters(
    *, box: DeadLetterBox, bus: EventBus, dry_run: bool, report: Callable[[str], None]
) -> list[Found]:
    """Republish what the dead-letter subscription holds, then take it off; unreadable stays."""
    letters = box.pull_all()
    replayed: list[tuple[DeadLetter, Event]] = []
    unreadable: list[DeadLetter] = []
    for letter in letters:
        event = _event_of(letter)
        if event is None:
            unreadable.append(letter)
            report(f"unreadable: message {letter.message_id} left in place")
            continue
        report(f"dead letter: {event.id} {event.type}")
        if not dry_run:
            bus.publish(event, letter.data)
        replayed.append((letter, event))
    if dry_run:
        box.release(letters)
    else:
        box.acknowledge([letter for letter, _ in replayed])
        box.release(unreadable)
    verb = "would replay" if dry_run else "replayed"
    report(f"{verb} {len(replayed)} of {len(letters)} dead letter(s)")
    return [Found(e.id, e.type, e.created) for _, e in replayed]


def _event_of(letter: DeadLetter) -> Event | None:
    try:
        return event_from_json(letter.data)
    except (ValueError, InvalidEvent) as exc:
        log.error("dead letter %s is not an event: %s", letter.message_id, exc)
        return None
