"""Overage reported to Stripe's meters: what consumption beyond the credits an account is
billed on a meter for, once per consumption key.

A consumption with overage is written with its overage in the same statement (the outbox:
`credit_uses`), then announced on the bus (`app.usage.recorded`). This reporter takes a batch
of announcements, claims the overages not reported yet, sends each to Stripe's
`POST /v1/billing/meter_events` with `identifier` = the consumption's key, and marks it
reported. Never twice for one key: a redelivery finds it reported or claimed; a reporter that
crashed between sending and marking leaves a claim that lapses, and the next send carries the
same identifier (and idempotency key), which Stripe counts once. One past Stripe's 35-day
window is given up and logged at ERROR: an alert, not a silent loss.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from adapters.db.pool import Database
from adapters.stripe_api import StripeGateway
from core.app_events import USAGE_RECORDED
from core.events import Event
from credits import store as credits
from credits.rules import reportable

log = logging.getLogger(__name__)

OUTSIDE_WINDOW = "past Stripe's 35-day window for meter events"


@dataclass(frozen=True)
class UsageReporter:
    db: Database
    stripe: StripeGateway

    def report_many(self, events: Sequence[Event]) -> list[str | Exception]:
        """Each announcement's outcome, or what it failed with (that one alone is retried)."""
        keys = {
            str(e.object.get("key")): n
            for n, e in enumerate(events)
            if e.type == USAGE_RECORDED and e.object.get("key")
        }
        results: list[str | Exception] = ["ignored"] * len(events)
        for n in keys.values():
            results[n] = "reported before"
        try:
            claimed = credits.claim_reports(self.db, list(keys), str(uuid.uuid4()))
            held = {str(row["key"]) for row in claimed}
            elsewhere = credits.still_unreported(self.db, [k for k in keys if k not in held])
        except Exception as exc:
            return [exc if n in keys.values() else r for n, r in enumerate(results)]
        for key in elsewhere:  # claimed by another delivery: done there, or here once it lapses
            results[keys[key]] = RuntimeError(f"the overage of {key} is being reported")
        now = datetime.now(UTC)
        done: list[str] = []
        for row in claimed:
            key = str(row["key"])
            if row["customer_id"] is None:  # an account billed on a meter without a customer
                log.error("usage: overage of %s (%d %s) has no Stripe customer: not billed",
                          key, row["overage"], row["meter"])  # fmt: skip
                credits.reported(self.db, [key], error="no Stripe customer")
                results[keys[key]] = "unreportable"
                continue
            if not reportable(row["created_at"], now):
                log.error(
                    "usage: overage of %s (%d %s) for customer %s is %s: not billed",
                    key, row["overage"], row["meter"], row["customer_id"], OUTSIDE_WINDOW,
                )  # fmt: skip
                credits.reported(self.db, [key], error=OUTSIDE_WINDOW)
                results[keys[key]] = "unreportable"
                continue
            try:
                self.stripe.meter_event(
                    identifier=key,
                    event_name=str(row["meter"]),
                    customer_id=str(row["customer_id"]),
                    value=int(row["overage"]),
                    timestamp=int(row["created_at"].timestamp()),
                )
            except Exception as exc:  # retried with its delivery; the claim lapses
                log.warning("usage: meter event %s not sent: %s", key, exc)
                results[keys[key]] = exc
                continue
            done.append(key)
            results[keys[key]] = "reported"
        try:
            credits.reported(self.db, done)
        except Exception as exc:  # sent but not marked: sent again later, counted once
            for key in done:
                results[keys[key]] = exc
        return results
