"""Pub/Sub messages in, events out: one shape whether a push subscription or Eventarc sent it."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from typing import Any

from adapters.bus import BatchHandler
from core.events import Event, InvalidEvent, events_in

log = logging.getLogger(__name__)


def events_from_message(data: Any) -> list[Event | InvalidEvent]:
    """The events inside a CloudEvent's `data`: `{"message": {"data": <base64 JSON>, ...}}`,
    the JSON one event or an array of them (`core.events.events_in`), each parsed or what is
    wrong with it. Functions Framework turns a raw push request into exactly this; Eventarc
    sends it as is."""
    message = data.get("message") if isinstance(data, Mapping) else None
    encoded = message.get("data") if isinstance(message, Mapping) else None
    if not isinstance(encoded, str):
        raise InvalidEvent("not a Pub/Sub message with data")
    try:
        return events_in(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise InvalidEvent(f"message data is not base64 JSON events: {exc}") from exc


def deliver(data: Any, handle: BatchHandler, *, target: str) -> None:
    """Run `handle` on the message's events; what is not an event is logged and dropped.

    Should any event fail, the exception propagates: the push answers 5xx and Pub/Sub
    redelivers the message with backoff (its other events are then duplicates, each applied
    once), then dead-letters it after the last attempt.
    """
    try:
        found = events_from_message(data)
    except InvalidEvent as exc:
        log.error("%s: dropping a message that is not an event (%s)", target, exc)
        return
    events = []
    for item in found:
        if isinstance(item, InvalidEvent):
            log.error("%s: dropping what is not an event in a message (%s)", target, item)
        else:
            events.append(item)
    if not events:
        return
    for outcome in handle(events):
        if isinstance(outcome, Exception):
            raise outcome


def outcome_fields(consumer: str, event: Event, outcome: str, **more: str) -> dict[str, str]:
    """The fields of a subscriber's line about one event, which the log-based metrics count
    (ops/monitoring: applied by outcome, duplicates, e-mails sent by kind)."""
    return {
        "stage": "consumed",
        "consumer": consumer,
        "event_id": event.id,
        "event_type": event.type,
        "outcome": outcome,
        **more,
    }
