"""Apply an access (or plan) change to a locked profile, unless a newer one was applied."""

from __future__ import annotations

from adapters.db import profiles
from adapters.db.pool import Connection
from adapters.db.profiles import Profile
from adapters.stripe_api import StripeGateway
from core.access import Ordering, grant_at_tie, ordering
from core.events import Event


def apply_access(
    conn: Connection,
    event: Event,
    profile: Profile,
    *,
    grant: bool,
    subscription_id: str | None,
    stripe: StripeGateway,
    price_id: str | None = None,
) -> str:
    """Set access as the event says, 'stale' when a newer access change was applied; and the
    plan it carries, unless a newer plan change was applied (each is ordered on its own)."""
    if price_id is not None:
        apply_plan(conn, event, profile, price_id=price_id)
    order = ordering(event.created, profile.access_changed_at)
    if order is Ordering.STALE:
        return "stale"
    if order is Ordering.TIE:
        status = stripe.subscription_status(subscription_id) if subscription_id else None
        grant = grant_at_tie(wanted=grant, subscription_status=status)
    profiles.set_access(conn, profile.id, grant=grant, changed_at=event.created, event_id=event.id)
    return "granted" if grant else "revoked"


def apply_plan(conn: Connection, event: Event, profile: Profile, *, price_id: str) -> None:
    """Put the profile on `price_id` unless a plan change as new or newer was applied.

    At a tie (two plan changes within one second, which Stripe's `created` cannot order) the
    first applied stays.
    """
    if ordering(event.created, profile.price_changed_at) is Ordering.NEWER:
        profiles.set_plan(conn, profile.id, price_id=price_id, changed_at=event.created)
