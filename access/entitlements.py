"""What each purchase and subscription entitles a user to, and how one event changes it.

Access is kept per grant: one entitlement per subscription (keyed by its id) and one per
one-time purchase (keyed by its checkout session), each held by the paying account. Each is
ordered on its own by Stripe's `created`, so the end of a subscription ends only that
subscription's entitlement, and a refund only its purchase's; an account has access while any
of its entitlements is active.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

# `comp`: a complimentary grant an admin gave (the support API); the access cycle never reads one.
GrantKind = Literal["subscription", "purchase", "comp"]
SUBSCRIPTION: GrantKind = "subscription"
PURCHASE: GrantKind = "purchase"

# Subscription states in which the customer has paid for access.
ACTIVE_STATUSES = frozenset({"active", "trialing"})
# A failed renewal: Stripe retries the card and access stays until it gives up.
ACCESS_STATUSES = ACTIVE_STATUSES | {"past_due"}

GRANTED, REVOKED, STALE, ENDED_ALREADY = "granted", "revoked", "stale", "ended already"


class Ordering(enum.Enum):
    NEWER = "newer"
    STALE = "stale"
    TIE = "tie"


def ordering(event_created: datetime, last_applied: datetime | None) -> Ordering:
    """Compare an event with the newest access change already applied to the profile."""
    if last_applied is None or event_created > last_applied:
        return Ordering.NEWER
    if event_created < last_applied:
        return Ordering.STALE
    return Ordering.TIE


def grant_at_tie(*, wanted: bool, subscription_status: str | None) -> bool:
    """Resolve two changes in the same second by what Stripe says now.

    Stripe's `created` has one-second resolution, so a grant and a revoke can tie. The
    subscription's current status is the truth both events describe; without a subscription
    (a one-time purchase) nothing newer can contradict the change, so it stands.
    """
    if subscription_status is None:
        return wanted
    return subscription_status in ACCESS_STATUSES


class StatusNeededAtTie(Exception):  # a request, not a failure
    """A tie needs this subscription's status from Stripe, which was not fetched beforehand."""

    def __init__(self, subscription_id: str) -> None:
        super().__init__(f"a tie needs the status of {subscription_id}")
        self.subscription_id = subscription_id


# Subscription id -> its status at Stripe, fetched before the transaction that needs it.
TieStatuses = Mapping[str, str | None]


@dataclass(frozen=True)
class Entitlement:
    """One grant of access, as stored; dates are aware datetimes."""

    account_id: str  # the paying account that holds it
    source_id: str  # the subscription id, or the checkout session id of a one-time purchase
    kind: GrantKind
    price_id: str | None
    status: str  # Stripe's subscription status; `paid` or `refunded` for a purchase
    active: bool
    current_period_end: datetime | None = None
    cancel_at_period_end: bool = False
    trial_end: datetime | None = None
    ended_at: datetime | None = None
    changed_at: datetime | None = None  # Stripe's `created` of the newest change applied
    event_id: str | None = None
    # The Stripe customer who pays it: its meter's overage is reported on this one.
    customer_id: str | None = None
    # Whether a payment method backs the subscription (None: not said): a trial without one
    # bills no overage (Stripe cancels it at its end and nobody pays).
    payment_method: bool | None = None


@dataclass(frozen=True)
class GrantChange:
    """What one event says of one grant; None facts leave what is stored as it is."""

    source_id: str
    kind: GrantKind
    grant: bool
    status: str
    price_id: str | None = None
    current_period_end: int | None = None
    cancel_at_period_end: bool | None = None
    trial_end: int | None = None
    ended_at: int | None = None
    customer_id: str | None = None
    payment_method: bool | None = None


@dataclass(frozen=True)
class Stepped:
    """An entitlement after one change, and what the change did."""

    entitlement: Entitlement
    outcome: str  # granted, revoked, stale or ended already
    applied: bool  # False: stale, nothing written but a price the grant did not know

    @property
    def ended_now(self) -> bool:
        """Whether this change is the one that ended the grant (its end is announced once)."""
        return self.outcome == REVOKED


def find(entitlements: Iterable[Entitlement], change: GrantChange) -> Entitlement | None:
    """The stored grant a change is about."""
    return next((e for e in entitlements if e.source_id == change.source_id), None)


def step(
    current: Entitlement | None,
    change: GrantChange,
    *,
    account_id: str,
    created: datetime,
    event_id: str,
    tie_statuses: TieStatuses,
    tie_prices: TieStatuses | None = None,
) -> Stepped:
    """Apply one change to a grant unless a newer change to it was applied.

    At a tie (Stripe's `created` has one-second resolution) a subscription's current status at
    Stripe decides; `StatusNeededAtTie` asks the caller to fetch it outside any transaction. A
    purchase has nothing newer to ask about: the change stands.
    """
    before = current or _new(change, account_id)
    order = ordering(created, current.changed_at if current else None)
    if order is Ordering.STALE:
        return Stepped(told_late(before, change) if current else before, STALE, applied=False)
    grant, status, price = change.grant, change.status, change.price_id
    if order is Ordering.TIE and change.kind == SUBSCRIPTION:
        if change.source_id not in tie_statuses:
            raise StatusNeededAtTie(change.source_id)
        now = tie_statuses[change.source_id]
        grant = grant_at_tie(wanted=grant, subscription_status=now)
        status = now or status
        # Two plans in one second (an upgrade right after another change): the plan the
        # subscription is on now at Stripe, whichever of the two was applied last.
        moved = price and current is not None and current.price_id not in (None, price)
        if moved and tie_prices is not None:
            if change.source_id not in tie_prices:
                raise StatusNeededAtTie(change.source_id)
            price = tie_prices[change.source_id] or price
    after = replace(
        before,
        source_id=change.source_id,
        price_id=price or before.price_id,
        status=status,
        active=grant,
        current_period_end=_when(change.current_period_end) or before.current_period_end,
        cancel_at_period_end=_either(change.cancel_at_period_end, before.cancel_at_period_end),
        trial_end=_when(change.trial_end) or before.trial_end,
        ended_at=None if grant else (_when(change.ended_at) or before.ended_at or created),
        changed_at=created,
        event_id=event_id,
        customer_id=change.customer_id or before.customer_id,
        payment_method=_either_none(change.payment_method, before.payment_method),
    )
    if grant:
        return Stepped(after, GRANTED, applied=True)
    ended_before = current is not None and not current.active and current.ended_at is not None
    return Stepped(after, ENDED_ALREADY if ended_before else REVOKED, applied=True)


def told_late(current: Entitlement, change: GrantChange) -> Entitlement:
    """What a late (stale) change still tells a grant that no newer change said: its price (a
    renewal applied before its checkout: without it, what the grant sells, a team's seats or
    features, would stay unknown), and a subscription's trial end and payment method (a trial's
    paid invoice of nothing, handled first, says `active` and nothing of the trial: without them
    a trial nobody will pay for would be billed overage as a paid subscription)."""
    return replace(
        current,
        price_id=current.price_id or change.price_id,
        trial_end=current.trial_end or _when(change.trial_end),
        payment_method=_either_none(current.payment_method, change.payment_method),
    )


def still_held(entitlements: Iterable[Entitlement], source_id: str | None) -> bool:
    """Whether the grant from `source_id` has not ended (one not recorded yet, its checkout
    perhaps still on the way, has not): what a trial's coming end is announced for."""
    grant = next((e for e in entitlements if e.source_id == source_id), None)
    return grant is None or grant.active


def has_access(entitlements: Iterable[Entitlement]) -> bool:
    """An account's access: true while any of its grants is active."""
    return any(entitlement.active for entitlement in entitlements)


def last_change(entitlements: Iterable[Entitlement]) -> datetime | None:
    """When access last changed, for operators (`profiles.access_changed_at`)."""
    return max((e.changed_at for e in entitlements if e.changed_at), default=None)


def _new(change: GrantChange, account_id: str) -> Entitlement:
    return Entitlement(
        account_id=account_id,
        source_id=change.source_id,
        kind=change.kind,
        price_id=change.price_id,
        status=change.status,
        active=False,
    )


def _when(timestamp: int | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, tz=UTC) if timestamp is not None else None


def _either(value: bool | None, kept: bool) -> bool:
    return kept if value is None else value


def _either_none(value: bool | None, kept: bool | None) -> bool | None:
    return kept if value is None else value
