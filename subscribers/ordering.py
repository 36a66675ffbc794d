"""Apply an access change to a locked profile, unless a newer one was applied already."""

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
    """Set access (and the plan) as the event says; 'stale' when a newer change was applied."""
    order = ordering(event.created, profile.access_changed_at)
    if order is Ordering.STALE:
        return "stale"
    if order is Ordering.TIE:
        status = stripe.subscription_status(subscription_id) if subscription_id else None
        grant = grant_at_tie(wanted=grant, subscription_status=status)
    profiles.set_access(
        conn,
        profile.id,
        grant=grant,
        changed_at=event.created,
        event_id=event.id,
        price_id=price_id,
    )
    return "granted" if grant else "revoked"
