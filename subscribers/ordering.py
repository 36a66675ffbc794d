"""Apply access (and plan) changes to locked profiles and their entitlements, unless a newer
change to the same grant was applied.

`decide` computes the next state from one event without writing, so a batch of events can be
folded over the rows it locked and written once; `apply_access` is one such step, written.

Stripe is never asked while rows are locked: at a tie (two changes to one subscription within
one second) its status must come from Stripe, and `core.entitlements.step` raises
`StatusNeededAtTie` unless the caller fetched it beforehand; the caller's transaction rolls
back, the caller asks Stripe with no transaction open (`with_tie_statuses`) and runs the
transaction again with the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from adapters.db import entitlements, profiles
from adapters.db.pool import Connection
from adapters.db.profiles import Profile
from adapters.stripe_api import StripeGateway
from core.entitlements import (
    Change,
    Entitlement,
    Ordering,
    StatusNeededAtTie,
    Stepped,
    TieStatuses,
    find,
    has_access,
    last_change,
    ordering,
    step,
)
from core.events import Event

T = TypeVar("T")

__all__ = ["StatusNeededAtTie", "TieStatuses", "apply_access", "decide", "with_tie_statuses"]


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
    """A profile and its entitlements after one change, and what the change did."""

    profile: Profile
    held: tuple[Entitlement, ...]  # the user's entitlements after the change
    stepped: Stepped
    adopted: tuple[str, str] | None = None  # a carried-over row's (old, new) source id

    @property
    def outcome(self) -> str:
        return self.stepped.outcome

    def writes(self, before: Profile) -> bool:
        """Whether the profile is to be written (a tie may leave its access as it was)."""
        return self.profile != before or self.access_event_id is not None

    @property
    def access_event_id(self) -> str | None:
        """The event that last set access, when this one did."""
        return self.stepped.entitlement.event_id if self.stepped.applied else None


def decide(
    profile: Profile,
    held: Sequence[Entitlement],
    event: Event,
    change: Change,
    *,
    tie_statuses: TieStatuses,
    price_id: str | None = None,
) -> Applied:
    """The grant as the event says, 'stale' when a newer change to it was applied; the profile's
    access derived from all its grants; and the plan the event carries, unless a newer plan
    change was applied (each is ordered on its own)."""
    after = profile if price_id is None else plan_after(profile, event, price_id=price_id)
    current = find(held, change)
    stepped = step(
        current,
        change,
        user_id=profile.id,
        created=event.created,
        event_id=event.id,
        tie_statuses=tie_statuses,
    )
    if not stepped.applied:
        return Applied(after, tuple(held), stepped)
    now = (*(e for e in held if e is not current), stepped.entitlement)
    adopted = None
    if current is not None and current.source_id != change.source_id:
        adopted = (current.source_id, change.source_id)
    after = replace(after, has_access=has_access(now), access_changed_at=last_change(now))
    return Applied(after, now, stepped, adopted)


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
    change: Change,
    *,
    tie_statuses: TieStatuses,
    price_id: str | None = None,
) -> Applied:
    """`decide` over the profile (locked by the caller) and its entitlements, written."""
    held = entitlements.lock_for_users(conn, [profile.id])[profile.id]
    applied = decide(profile, held, event, change, tie_statuses=tie_statuses, price_id=price_id)
    if applied.stepped.applied:
        entitlements.save(
            conn,
            [applied.stepped.entitlement],
            adopted=dict([applied.adopted] if applied.adopted else []),
        )
    if applied.writes(profile):
        profiles.save_states(conn, {profile.id: (applied.profile, applied.access_event_id)})
    return applied


def apply_plan(conn: Connection, event: Event, profile: Profile, *, price_id: str) -> None:
    """Put the locked profile on `price_id`, as `plan_after` says."""
    after = plan_after(profile, event, price_id=price_id)
    if after != profile:
        profiles.save_states(conn, {after.id: (after, None)})
