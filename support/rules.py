"""The support API's rules, over plain data: what an admin must give for a change, how long a
complimentary grant may run, which events concern a person, and the figures a founder reads
(MRR normalised to a month, per currency)."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from access.changes import key, to_changes
from core.events import Event

# Long enough to say why, short enough that the log stays a log.
REASON_MAX = 500
# A comp runs at most this long when it has an end (null `until`: for good, said outright).
COMP_LONGEST = timedelta(days=3660)
# A page of a listing.
PAGE_DEFAULT = 50
PAGE_MOST = 200
# What "lately" means for new and churned subscriptions and refunds.
RECENT = timedelta(days=30)
# The e-mails an admin may send again: each tells of something done that stays true (a
# purchase, a paid invoice, a cancellation, repository access given). The others would not be
# true when read again later: a sign-in link or a recovery link that has expired, an
# invitation whose link was replaced (a team resends its own, with a new link), a trial's end
# or a failed payment that has moved on, a seat given or taken since, the founder's own notice.
RESENDABLE = frozenset(
    {"purchase-confirmation", "invoice-paid", "subscription-cancelled", "github-access-granted"}
)
# A subscription's interval as months: Stripe's `month` and `year` (the catalogue's two).
MONTHS = {"month": Decimal(1), "year": Decimal(12)}
# A subscription Stripe still bills (past_due: it retries the card) or lets run free.
BILLED = frozenset({"active", "past_due"})
TRIAL = "trialing"


# A Stripe customer's id, as a search names one.
_STRIPE_CUSTOMER = re.compile(r"cus_[A-Za-z0-9]+")


def searched(q: str) -> str:
    """What the audit log keeps of a customer search's `q`. The log is kept for good and the
    person may be deleted: an id (a user's, a Stripe customer's) is kept as typed, since it
    names no one once they are gone; anything else (a name, an address, part of either) as the
    SHA-256 of its trimmed lower-case form, so a founder can still check whether a given name or
    address was looked up, and nobody reads it back."""
    term = q.strip()
    if _STRIPE_CUSTOMER.fullmatch(term):
        return term
    try:
        uuid.UUID(term)
    except ValueError:
        return "sha256:" + hashlib.sha256(term.lower().encode()).hexdigest()
    return term


def reason_problem(reason: object) -> str | None:
    """Why `reason` cannot be an admin change's reason; None when it can."""
    if not isinstance(reason, str) or not reason.strip():
        return "A reason is required (reason): say why, for the audit log"
    if len(reason) > REASON_MAX:
        return f"A reason is at most {REASON_MAX} characters (reason)"
    return None


def until_problem(until: datetime | None, *, now: datetime) -> str | None:
    """Why a comp cannot end at `until`; None when it can (None: it runs for good)."""
    if until is None:
        return None
    if until.tzinfo is None:
        return "until must be a date-time with its time zone (until)"
    if until <= now:
        return "until must lie in the future (until)"
    if until - now > COMP_LONGEST:
        return "until must lie within ten years (until); null gives it for good"
    return None


@dataclass(frozen=True)
class Identity:
    """What identifies a person in a Stripe event."""

    user_id: str
    email: str | None
    customers: frozenset[str]
    accounts: frozenset[str]


def concerns(event: Event, person: Identity) -> bool:
    """Whether the event is about this person: its changes name one of their Stripe
    customers, their id, their e-mail address or one of their accounts (a team's)."""
    try:
        keys = [key(change) for change in to_changes(event)]
    except (KeyError, TypeError, ValueError):
        keys = []
    email = (person.email or "").lower()
    for k in keys:
        if k.customer_id and k.customer_id in person.customers:
            return True
        if k.user_id == person.user_id or (k.account_id and k.account_id in person.accounts):
            return True
        if email and (k.email or "").lower() == email:
            return True
    customer = event.object.get("customer")
    return isinstance(customer, str) and customer in person.customers


@dataclass
class Money:
    """Amounts per currency, in the catalogue's major units."""

    amounts: dict[str, Decimal] = field(default_factory=dict)

    def add(self, currency: str, amount: Decimal) -> None:
        self.amounts[currency] = self.amounts.get(currency, Decimal(0)) + amount

    def answer(self) -> dict[str, str]:
        return {c: str(a.quantize(Decimal("0.01"))) for c, a in sorted(self.amounts.items())}


def monthly(price: Decimal, interval: str | None, quantity: int) -> Decimal | None:
    """A subscription's amount per month; None when its interval is unknown."""
    months = MONTHS.get(interval or "")
    return None if months is None else price * quantity / months


def metrics(
    subscriptions: Iterable[Mapping[str, Any]],
    refunds: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
) -> dict[str, Any]:
    """The figures from the local state: MRR per currency (billed subscriptions, normalised to
    a month; a trial pays nothing yet), active subscriptions, trials, new and churned in the
    last 30 days, refunds in the last 30 days."""
    since = now - RECENT
    mrr = Money()
    active = trials = new = churned = 0
    for s in subscriptions:
        status = s["status"]
        if s["active"] and status in BILLED:
            active += 1
            per_month = (
                monthly(Decimal(s["price"]), s["billing_interval"], int(s["quantity"]))
                if s["price"] is not None
                else None
            )
            if per_month is not None:
                mrr.add(s["currency"] or "unknown", per_month)
        if s["active"] and status == TRIAL:
            trials += 1
        if s["created_at"] is not None and s["created_at"] >= since:
            new += 1
        if s["ended_at"] is not None and s["ended_at"] >= since:
            churned += 1
    return {
        "mrr": mrr.answer(),
        "activeSubscriptions": active,
        "trials": trials,
        "newLast30Days": new,
        "churnedLast30Days": churned,
        "refundsLast30Days": {
            r["currency"]: {"count": int(r["count"]), "amount": int(r["amount"])} for r in refunds
        },
        "computedAt": now.isoformat(),
    }
