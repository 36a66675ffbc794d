"""The webhook's whole job: verify, filter, hand to the bus; handling happens in subscribers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from adapters.bus import EventBus, PublishError
from adapters.stripe_api import SignatureError, verify_signature
from core import stripe_objects
from core.errors import InvalidRequest, Unavailable
from core.events import event_from_json, is_subscribed
from credits.rules import MeterError, meter_error

log = logging.getLogger(__name__)

TOLERANCE_SECONDS = 300


@dataclass(frozen=True)
class MeterEvents:
    """How the meters' thin events are checked and told: the signing secret of their event
    destination, the full event as Stripe holds it (a thin event comes without its data), and
    the customer each consumption key was billed to."""

    secret: str | None
    fetch: Callable[[str], Mapping[str, Any] | None]
    customers: Callable[[Sequence[str]], Mapping[str, str | None]]


def receive(
    *,
    payload: bytes,
    signature: str | None,
    secret: str,
    livemode: bool | None,
    bus: EventBus,
    meters: MeterEvents | None = None,
) -> str:
    """Accept one signed Stripe event; returns what became of it.

    `livemode` is the mode of the configured Stripe key (None when it cannot be told): a test
    event must never grant access in a live deployment, nor the reverse. A meter's thin event,
    signed with its destination's secret, is logged at ERROR with the customers it is about.
    """
    try:
        verify_signature(payload, signature, secret=secret, tolerance=TOLERANCE_SECONDS)
    except SignatureError as exc:
        if meters is None or meters.secret is None:
            raise InvalidRequest(str(exc)) from exc
        try:
            verify_signature(payload, signature, secret=meters.secret, tolerance=TOLERANCE_SECONDS)
        except SignatureError:
            raise InvalidRequest(str(exc)) from exc
        return _meter_error(payload, meters)
    try:
        event = event_from_json(payload)
    except ValueError as exc:  # InvalidEvent is one; so is JSON nested past orjson's limit
        raise InvalidRequest(f"Invalid event payload: {exc}") from exc
    if livemode is not None and event.livemode != livemode:
        log.error(
            "webhook: refusing %s %s: livemode=%s, but STRIPE_SECRET_KEY is a %s key",
            event.type,
            event.id,
            event.livemode,
            "live" if livemode else "test",
        )
        raise InvalidRequest(
            "Event mode (live or test) does not match this service's Stripe key (livemode)"
        )
    if not stripe_objects.is_supported(event.api_version):
        # Read half, an event could grant or revoke on facts it does not hold: refused, so
        # Stripe keeps it (and retries) until the service reads that version; then it is
        # delivered again, or `events reconcile` recovers it.
        log.error(
            "webhook: refusing %s %s: Stripe API version %s is not one this service reads (%s)",
            event.type,
            event.id,
            event.api_version,
            stripe_objects.SUPPORTED,
            extra={"event_id": event.id, "api_version": event.api_version},
        )
        raise InvalidRequest(
            f"Unsupported Stripe API version {event.api_version} (api_version); supported: "
            + stripe_objects.SUPPORTED
        )
    if not is_subscribed(event.type):
        log.info("webhook: ignoring %s %s (no subscriber)", event.type, event.id)
        return "ignored"
    try:
        bus.publish(event, payload)
    except PublishError as exc:
        log.error("webhook: could not publish %s %s: %s", event.type, event.id, exc)
        raise Unavailable("Event could not be queued; Stripe will retry") from exc
    # Counted by the `events-published` log-based metric (ops/monitoring).
    log.info(
        "webhook: published %s %s",
        event.type,
        event.id,
        extra={"stage": "published", "event_id": event.id, "event_type": event.type},
    )
    return "published"


def _meter_error(payload: bytes, meters: MeterEvents) -> str:
    """A meter's error, told at ERROR with the customers whose meter events it names (their
    identifiers are our consumption keys): Stripe did not count them, so they are not billed."""
    try:
        body = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("Invalid event payload: not JSON") from exc
    found = meter_error(body) if isinstance(body, dict) else None
    if found is None:
        raise InvalidRequest("Only the meters' error events are taken with this signature")
    if not found.complete:  # a thin event: its data is Stripe's to give
        full = meters.fetch(found.event_id)
        found = (meter_error(full) if full is not None else None) or found
    told = _told(found, meters.customers(list(found.identifiers)))
    log.error(
        "meter: %s %s for meter %s: %s; %s",
        found.type,
        found.event_id,
        found.meter,
        found.summary or "no summary",
        told,
        extra={"event_id": found.event_id, "event_type": found.type},
    )
    return "logged"


def _told(found: MeterError, customers: Mapping[str, str | None]) -> str:
    if not found.identifiers:
        return "no meter event named"
    return ", ".join(
        f"{key} (customer {customers.get(key) or 'unknown'})" for key in found.identifiers
    )
