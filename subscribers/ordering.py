"""Apply access (and plan) changes to locked profiles, unless a newer one was applied.

`decide` computes a profile's next state from one event without writing, so a batch of events
can be folded over the profiles it locked and written once; `apply_access` is one such step.

Stripe is never asked while rows are locked: at a tie (two changes within one second) the
subscription's status must come from Stripe, and `decide` raises `StatusNeededAtTie` unless the
caller fetched it beforehand; the caller's transaction rolls back, the caller asks Stripe with
no transaction open (`with_tie_statuses`) and runs the transaction again with the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from adapters.db import profiles
from adapters.db.pool import Connection
from adapters.db.profiles import Profile
from adapters.stripe_api import StripeGateway
from core.access import Ordering, grant_at_tie, ordering
from core.events import Event

T = TypeVar("T")
# Subscription id -> its status at Stripe, fetched before the transaction that needs it.
TieStatuses = Mapping[str, str | None]


class StatusNeededAtTie(Exception):  # a request, not a failure
    """A tie needs this subscription's status from Stripe, which was not fetched beforehand."""

    def __init__(self, subscription_id: str) -> None:
        super().__init__(f"a tie needs the status of {subscription_id}")
        self.subscription_id = subscription_id


def with_tie_statuses(
    stripe: StripeGateway, work: Callable[[TieStatuses], T], *, most: int = 64
) -> T:
    """Run `work` (a transaction); each time it stops at a tie, ask Stripe for that status,
    outside any transaction, and run it again with every status known so far."""
    statuses: dict[str, str | None] = {}
    for _ in range(most):
        try:
            return work(statuses)
        except StatusNeededAtTie as needed:
            statuses[needed.subscription_id] = stripe.subscription_status(needed.subscription_id)
    raise RuntimeError(f"more than {most} ties in one transaction")


@dataclass(frozen=True)
class Applied:
    """A profile after one access change, and what the change did."""

    profile: Profile
    outcome: str  # granted, revoked or stale
    access_event_id: str | None  # the event that set access, None when it was stale

    def writes(self, before: Profile) -> bool:
        """Whether the profile is to be written (a tie may set access to what it was)."""
        return self.profile != before or self.access_event_id is not None


def decide(
    profile: Profile,
    event: Event,
    *,
    grant: bool,
    subscription_id: str | None,
    tie_statuses: TieStatuses,
    price_id: str | None = None,
) -> Applied:
    """Access as the event says, 'stale' when a newer access change was applied; and the plan
    it carries, unless a newer plan change was applied (each is ordered on its own)."""
    after = profile if price_id is None else plan_after(profile, event, price_id=price_id)
    order = ordering(event.created, profile.access_changed_at)
    if order is Ordering.STALE:
        return Applied(after, "stale", None)
    if order is Ordering.TIE:
        if subscription_id and subscription_id not in tie_statuses:
            raise StatusNeededAtTie(subscription_id)
        status = tie_statuses.get(subscription_id) if subscription_id else None
        grant = grant_at_tie(wanted=grant, subscription_status=status)
    after = replace(after, has_access=grant, access_changed_at=event.created)
    return Applied(after, "granted" if grant else "revoked", event.id)


def plan_after(profile: Profile, event: Event, *, price_id: str) -> Profile:
    """The profile on `price_id` unless a plan change as new or newer was applied.

    At a tie (two plan changes within one second, which Stripe's `created` cannot order) the
    first applied stays.
    """
    if ordering(event.created, profile.price_changed_at) is Ordering.NEWER:
        return replace(profile, price_id=price_id, price_changed_at=event.created)
    return profile


def apply_access(
    conn: Connection,
    event: Event,
    profile: Profile,
    *,
    grant: bool,
    subscription_id: str | None,
    tie_statuses: TieStatuses,
    price_id: str | None = None,
) -> str:
    """`decide`, written to the locked profile; returns the outcome."""
    applied = decide(
        profile,
        event,
        grant=grant,
        subscription_id=subscription_id,
        tie_statuses=tie_statuses,
        price_id=price_id,
    )
    if applied.writes(profile):
        profiles.save_states(conn, {applied.profile.id: (applied.profile, applied.access_event_id)})
    return applied.outcome


def apply_plan(conn: Connection, event: Event, profile: Profile, *, price_id: str) -> None:
    """Put the locked profile on `price_id`, as `plan_after` says."""
    after = plan_after(profile, event, price_id=price_id)
    if after != profile:
        profiles.save_states(conn, {after.id: (after, None)})
