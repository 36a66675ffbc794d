"""Credits as plain data: what a consumption answered, and when a balance is low.

A consumption is decided in Postgres in one statement (`public.credit_take`, under the grants'
row locks: the only place that can decide it without a race); this module says what each of its
answers means to the caller, and the rules over balances that need no lock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from core.app_events import CREDITS_THRESHOLD, CREDITS_TOP_UP, USAGE_RECORDED
from core.events import Event, app_event

ConsumptionState = Literal["consumed", "reserved", "released", "refused", "conflict", "unknown"]
LONGEST_KEY = 100  # Stripe's meter event identifier holds at most 100 characters


@dataclass(frozen=True)
class Answer:
    """What the first request under a key answered (a route's status, content type and
    body): a request sent again with the key is given it, and the work does not run again."""

    status: int
    content_type: str | None
    body: bytes
    request: str | None = None  # the digest of the request it answered (`request_digest`)


@dataclass(frozen=True)
class Taken:
    """What one consumption (or its settling) answered: `first` false when its key had
    answered before (nothing more was taken)."""

    state: ConsumptionState
    feature: str
    balance: int = 0
    overage: int = 0  # units beyond the credits, billed on the account's meter
    first: bool = False
    granted: int = 0  # what the live grants gave, when it was taken
    before: int = 0  # the balance before it
    mark: int | None = None  # the period (or pack) its low balance is told once for
    answer: Answer | None = None  # the first request's answer, kept (given to a replay)
    capped: bool = False  # refused because the overage would pass its cap for the period

    @property
    def allowed(self) -> bool:
        return self.state in ("consumed", "reserved", "released")


@dataclass(frozen=True)
class Check:
    """Whether `amount` of `feature` would be taken now (nothing is taken by asking), what the
    balance is, and whether any of it would be billed as overage."""

    feature: str
    allowed: bool
    balance: int
    overage: bool


@dataclass(frozen=True)
class Credits:
    """An account's credits of one feature, as a person sees them."""

    feature: str
    balance: int
    granted: int
    used: int
    resets_at: datetime | None  # when the current period's credits end; None: a pack's only
    team_id: str | None  # the team whose pool it is; None: the person's own
    packs: int = 0  # what packs hold of the balance (they do not end with a period)
    packs_expire_at: datetime | None = None  # when the first pack with some left ends; None: never


# What a request sent again with a key is told when its first request's answer is not there to
# give: the first still runs (or its answer was not kept yet), or its work failed.
STILL_RUNNING = "A request with this Idempotency-Key is still running; retry it later"
GIVEN_BACK = "A request with this Idempotency-Key failed and was given back; send a new key"
ANOTHER_REQUEST = "This Idempotency-Key was used for another request; send a new key"
NOT_KEPT = (
    "The request with this Idempotency-Key was answered, but its answer is not kept"
    " (streamed or too large); send a new key"
)

# The largest answer kept for a key (a database row per consumption, not a file store): a
# larger or streamed one is given once, and a request sent again is told it is not kept.
LONGEST_KEPT_ANSWER = 256 * 1024


def request_digest(method: str, path: str, body: bytes) -> str:
    """What identifies a request under a key: its method, path with query, and body."""
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), body):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def kept_answer(
    status: int, content_type: str | None, body: bytes | None, request: str | None
) -> Answer:
    """The answer kept for a request sent again with its key: the answer itself, or (a body
    streamed, None, or beyond `LONGEST_KEPT_ANSWER`) a 409 saying it is not kept. Only the
    status, type and body are kept: never a header (a cookie, a session) of the first."""
    if body is None or len(body) > LONGEST_KEPT_ANSWER:
        refusal = json.dumps({"error": NOT_KEPT}).encode()
        return Answer(409, "application/json", refusal, request)
    return Answer(status, content_type, body, request)


def replay(taken: Taken, request: str | None = None) -> Answer | str | None:
    """How a request under a key is answered, from what the key's first request decided: None
    when this request is the first (its work runs), the first's kept answer when it answered
    this same request (`request`, its digest), or why it is refused (409): another request
    under the key is never given the first's answer. The work behind a key never runs twice."""
    if taken.first:
        return None
    if taken.answer is not None:
        if taken.answer.request is not None and taken.answer.request != request:
            return ANOTHER_REQUEST
        return taken.answer
    return GIVEN_BACK if taken.state == "released" else STILL_RUNNING


def not_enough(feature: str) -> str:
    """The refusal a consumption beyond the balance answers."""
    return f"Not enough {feature} credits"


def overage_limit(feature: str) -> str:
    """The refusal a consumption answers when its overage would pass its product's cap."""
    return f"The overage limit of {feature} is reached"


def crossed(*, before: int, after: int, granted: int, thresholds: Sequence[int]) -> tuple[int, ...]:
    """The thresholds (percent of `granted` used) this consumption reached, from a balance of
    `before` to `after`: each once, by the consumption that reached it (later ones, already
    past it, do not)."""
    if granted <= 0:
        return ()
    used_before, used_after = granted - before, granted - after
    return tuple(p for p in thresholds if used_before * 100 < p * granted <= used_after * 100)


@dataclass(frozen=True)
class AlertTerms:
    """What an alert tells of what comes next, read when a threshold is reached: when the
    period's credits end (None: packs only), whether a meter bills what goes beyond them, and
    the overage units it may bill per period (None: no cap)."""

    resets_at: datetime | None
    billed: bool
    cap: int | None


@dataclass(frozen=True)
class CreditGrant:
    """Credits a paid period or a pack grants: the products at `price_id` say which and how
    many (`public.products.credits`), so a grant is written once per source and feature."""

    account_id: str
    source: str  # `<subscription>@<invoice>` for a paid period, the checkout session for a pack
    subscription_id: str | None
    price_id: str
    starts_at: datetime
    ends_at: datetime | None  # the period's end; None for a pack (its expiry is the product's)
    event_id: str
    # An upgrade's proration paid: the new plan's period credits less what the period's live
    # grants gave, until the period's end; it leaves the period's grants as they are.
    top_up: bool = False


@dataclass(frozen=True)
class CreditEnd:
    """Credits taken back at `at`: a subscription's period credits when it ends, or what is
    left of one pack (`source`) when it is refunded in full."""

    subscription_id: str | None
    source: str | None
    at: datetime


# Stripe takes a meter event dated within the past 35 calendar days; a report is given up (and
# alerted on) a day before, so a report in flight at the edge is not refused after being sent.
REPORT_WINDOW = timedelta(days=34)


def overage_recorded(key: str, at: datetime) -> tuple[Event, bytes]:
    """The application event a consumption with overage publishes once committed; its id is
    derived from the key, so publishing it again is harmless."""
    return app_event(USAGE_RECORDED, event_id=f"usage_{key}", obj={"key": key}, created=at)


def top_up_claimed(
    account_id: str, feature: str, crossing: int, at: datetime
) -> tuple[Event, bytes]:
    """The application event a consumption that claimed an automatic top-up publishes once
    committed: the access target charges it. Its id names the account, the feature and the
    claim's number, so announcing it again (the sweep) charges nothing more."""
    obj = {"account_id": account_id, "feature": feature, "crossing": crossing}
    event_id = f"credits_top_up_{account_id}_{feature}_{crossing}"
    return app_event(CREDITS_TOP_UP, event_id=event_id, obj=obj, created=at)


def reportable(created_at: datetime, now: datetime) -> bool:
    """Whether an overage consumed at `created_at` can still be reported to Stripe's meter."""
    return now - created_at < REPORT_WINDOW


# Stripe's thin events about meter events it could not count (sent to an event destination).
METER_ERROR_TYPES = frozenset(
    {"v1.billing.meter.error_report_triggered", "v1.billing.meter.no_meter_found"}
)


@dataclass(frozen=True)
class MeterError:
    """What a meter error event says: which meter, which of our consumptions (their keys are
    the meter events' identifiers), and Stripe's summary. `complete` is false for a thin event
    as delivered (its `data` comes only when the event is fetched)."""

    event_id: str
    type: str
    meter: str | None
    identifiers: tuple[str, ...]
    summary: str
    complete: bool


def meter_error(body: Mapping[str, Any]) -> MeterError | None:
    """The meter error a `v2.core.event` body tells of, or None for any other body."""
    if body.get("object") != "v2.core.event" or body.get("type") not in METER_ERROR_TYPES:
        return None
    related = body.get("related_object")
    data = body.get("data")
    identifiers: list[str] = []
    summary = ""
    if isinstance(data, Mapping):
        summary = str(data.get("developer_message_summary") or "")
        reason = data.get("reason")
        kinds = reason.get("error_types") if isinstance(reason, Mapping) else None
        for kind in kinds if isinstance(kinds, list) else []:
            for sample in (kind.get("sample_errors") or []) if isinstance(kind, Mapping) else []:
                request = sample.get("request") if isinstance(sample, Mapping) else None
                if isinstance(request, Mapping) and isinstance(request.get("identifier"), str):
                    identifiers.append(request["identifier"])
    return MeterError(
        event_id=str(body.get("id") or ""),
        type=str(body["type"]),
        meter=str(related.get("id")) if isinstance(related, Mapping) else None,
        identifiers=tuple(dict.fromkeys(identifiers)),
        summary=summary,
        complete=isinstance(data, Mapping),
    )


def reached(taken: Taken, thresholds: Sequence[int]) -> tuple[int, ...]:
    """The thresholds a consumption reached (none for a key sent again, nor without a grant)."""
    if not taken.first or taken.mark is None:
        return ()
    return crossed(
        before=taken.before, after=taken.balance, granted=taken.granted, thresholds=thresholds
    )


def threshold_events(
    taken: Taken,
    *,
    account_id: str,
    to: Mapping[str, Any],
    at: datetime,
    thresholds: Sequence[int],
    terms: AlertTerms,
) -> list[tuple[Event, bytes]]:
    """The announcements of the thresholds a consumption reached: each id names the account,
    the feature, the period (or pack) and the threshold, so each is told once per period (again
    for a new pack only). `to` is whom the mail addresses."""
    found = []
    for percent in reached(taken, thresholds):
        obj = {
            **to,
            "feature": taken.feature,
            "percent": percent,
            "balance": taken.balance,
            "granted": taken.granted,
            "used": taken.granted - taken.balance,
            "at": at.isoformat(),
            "resets_at": terms.resets_at.isoformat() if terms.resets_at else None,
            "billed": terms.billed,
            "cap": terms.cap,
        }
        event_id = f"credits_threshold_{account_id}_{taken.feature}_{taken.mark}_{percent}"
        found.append(app_event(CREDITS_THRESHOLD, event_id=event_id, obj=obj, created=at))
    return found
