"""What a signed-in user has: their access and the grants behind it, for their frontend."""

from __future__ import annotations

from dataclasses import dataclass, field

from access import entitlements_store as entitlements
from access import features_store as features
from access.entitlements_store import Held
from adapters.db import profiles
from adapters.db.pool import Database
from adapters.db.profiles import Profile
from adapters.tokens import User


@dataclass(frozen=True)
class UserSummary:
    user_id: str
    email: str | None
    name: str | None
    has_access: bool
    portal_available: bool  # a Stripe customer exists: the customer portal can open
    held: list[Held]
    features: list[str] = field(default_factory=list)  # sorted names (public.features_of)
    profile: Profile | None = None  # as read for this answer


def account_of(user: User, *, db: Database) -> UserSummary:
    """The user's profile and entitlements (a user the profile trigger has not reached yet, or
    whose profile is gone, has nothing)."""
    profile = profiles.by_id(db, user.id)
    if profile is None:
        return UserSummary(user.id, user.email, None, False, False, [])
    return UserSummary(
        user_id=profile.id,
        email=profile.email or user.email,
        name=profile.name,
        has_access=features.has_access(db, profile.id),  # a running comp counts too
        portal_available=bool(profile.customer_id),
        held=entitlements.of_user(db, profile.id),
        features=features.of_user(db, profile.id),
        profile=profile,
    )
