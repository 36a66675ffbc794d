"""Pub/Sub messages in, events out: one shape whether a push subscription or Eventarc sent it."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from core.events import Event, InvalidEvent, parse_event

log = logging.getLogger(__name__)


def event_from_message(data: Any) -> Event:
    """The event inside a CloudEvent's `data`: `{"message": {"data": <base64 JSON>, ...}}`.

    Functions Framework turns a raw push request into exactly this; Eventarc sends it as is.
    """
    message = data.get("message") if isinstance(data, Mapping) else None
    encoded = message.get("data") if isinstance(message, Mapping) else None
    if not isinstance(encoded, str):
        raise InvalidEvent("not a Pub/Sub message with data")
    try:
        payload = orjson.loads(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise InvalidEvent(f"message data is not base64 JSON: {exc}") from exc
    return parse_event(payload)


def deliver(data: Any, handler: Callable[[Event], object], *, target: str) -> None:
    """Run `handler` on the message's event; an unreadable message is logged and acknowledged.

    Any other exception propagates: the push answers 5xx and Pub/Sub redelivers with backoff,
    then dead-letters after the last attempt.
    """
    try:
        event = event_from_message(data)
    except InvalidEvent as exc:
        log.error("%s: dropping a message that is not an event (%s)", target, exc)
        return
    handler(event)


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
