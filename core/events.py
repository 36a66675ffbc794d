"""Stripe events as plain data: which types matter, and a parsed, trusted shape."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

# The types the Stripe webhook endpoint is configured to send; anything else is acknowledged
# and dropped at the door. `async_payment_succeeded` completes a delayed (bank) payment;
# `subscription.created` carries a trial's end; `trial_will_end` comes three days before it;
# product and price events keep the catalogue current.
SUBSCRIBED_TYPES = frozenset(
    {
        "checkout.session.completed",
        "checkout.session.async_payment_succeeded",
        "checkout.session.expired",
        "customer.subscription.created",
        "customer.subscription.updated",
        "customer.subscription.deleted",
        "customer.subscription.trial_will_end",
        "invoice.paid",
        "invoice.payment_failed",
        "charge.refunded",
        "charge.dispute.created",
        # An automatic top-up's off-session charge paid or failed (topups/): other payment
        # intents' events change nothing.
        "payment_intent.succeeded",
        "payment_intent.payment_failed",
        "product.created",
        "product.updated",
        "product.deleted",
        "price.created",
        "price.updated",
        "price.deleted",
        # Stripe's view of a customer's features, checked against the ones derived here.
        "entitlements.active_entitlement_summary.updated",
    }
)

# Events the application itself emits on the same bus (never accepted from the webhook).
APP_EVENT_PREFIX = "app."


class InvalidEvent(ValueError):
    """The payload is not a Stripe event this service can read; retrying will not help."""


@dataclass(frozen=True)
class Event:
    """A verified event: Stripe's, or one of the application's own (`app.*`)."""

    id: str
    type: str
    created: datetime
    livemode: bool
    object: Mapping[str, Any] = field(repr=False)
    # `data.previous_attributes` of an `*.updated` event: the fields that changed, as they were.
    previous: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # The Stripe API version that shaped the object (the endpoint's); None for our own events.
    api_version: str | None = None

    @property
    def attributes(self) -> dict[str, str]:
        """Message attributes for the bus: cheap routing without parsing the body."""
        return {
            "event_id": self.id,
            "event_type": self.type,
            "created": str(int(self.created.timestamp())),
            "livemode": "true" if self.livemode else "false",
        }


def event_from_json(data: bytes | str) -> Event:
    """The event in a JSON body (as Stripe sent it, or as the bus carries it).

    orjson: a 4 KB event parses in a quarter of the standard library's time, and every event
    is parsed twice in one process with the in-process bus. Raises ValueError (InvalidEvent
    included) when it is not JSON or not an event.
    """
    return parse_event(orjson.loads(data))


def events_in(data: bytes | str) -> list[Event | InvalidEvent]:
    """The events a bus message carries, each parsed or what is wrong with it: one event's JSON,
    or a JSON array of the events published together (`message_body`). Raises ValueError
    (InvalidEvent included) when the body is not JSON, or an empty array."""
    payload = orjson.loads(data)
    items = payload if isinstance(payload, list) else [payload]
    if not items:
        raise InvalidEvent("an empty list of events")
    found: list[Event | InvalidEvent] = []
    for item in items:
        try:
            found.append(parse_event(item))
        except InvalidEvent as exc:
            found.append(exc)
    return found


def message_body(bodies: Sequence[bytes]) -> bytes:
    """One message's data for events' JSON bodies: a lone event's own, or an array of them
    (joined as they are: each was parsed as JSON already, so the array is too)."""
    if len(bodies) == 1:
        return bodies[0]
    return b"[" + b",".join(bodies) + b"]"


def parse_event(payload: Any) -> Event:
    """Read the fields every consumer needs from a decoded event body."""
    if not isinstance(payload, Mapping):
        raise InvalidEvent("event body is not a JSON object")
    try:
        event_id, event_type, created = payload["id"], payload["type"], payload["created"]
        obj = payload["data"]["object"]
    except (KeyError, TypeError) as exc:
        raise InvalidEvent(f"event lacks {exc}") from exc
    valid = (
        isinstance(event_id, str)
        and isinstance(event_type, str)
        and isinstance(created, int)
        and isinstance(obj, Mapping)
    )
    if not valid:
        raise InvalidEvent("event fields have the wrong types")
    return Event(
        id=event_id,
        type=event_type,
        created=datetime.fromtimestamp(created, tz=UTC),
        livemode=bool(payload.get("livemode", False)),
        object=obj,
        previous=_previous(payload["data"]),
        api_version=version if isinstance(version := payload.get("api_version"), str) else None,
    )


def _previous(data: Mapping[str, Any]) -> Mapping[str, Any]:
    found = data.get("previous_attributes")
    return found if isinstance(found, Mapping) else {}


def is_app_event(event_type: str) -> bool:
    """Whether the type is one of the application's own events."""
    return event_type.startswith(APP_EVENT_PREFIX)


def stripe_id(value: Any) -> str | None:
    """A Stripe reference: an id string, or the object itself when expanded."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, Mapping) and isinstance(value.get("id"), str):
        return str(value["id"]) or None
    return None


def is_subscribed(event_type: str) -> bool:
    """Whether any consumer handles this Stripe event type."""
    return event_type in SUBSCRIBED_TYPES


def app_event(
    event_type: str, *, event_id: str, obj: Mapping[str, Any], created: datetime
) -> tuple[Event, bytes]:
    """An event of the application's own, in Stripe's envelope so every consumer reads one shape.

    The id is derived from what happened (not random), so publishing it twice is harmless.
    """
    if not event_type.startswith(APP_EVENT_PREFIX):
        raise ValueError(f"application event types start with {APP_EVENT_PREFIX!r}")
    body = {
        "id": event_id,
        "object": "event",
        "type": event_type,
        "created": int(created.timestamp()),
        "livemode": False,
        "data": {"object": dict(obj)},
    }
    data = json.dumps(body, separators=(",", ":")).encode()
    return parse_event(body), data
