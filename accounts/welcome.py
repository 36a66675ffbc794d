"""The welcome mail handed on once per person (the rule: accounts/welcome_rules.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from accounts import welcome_rules as rules
from adapters.bus import EventBus, publish_or_log
from adapters.db import profiles
from adapters.db.pool import Database
from adapters.db.profiles import Profile

log = logging.getLogger(__name__)


def welcome_if_new(profile: Profile, *, db: Database, bus: EventBus) -> None:
    """Publish the person's welcome when it is due, then record it. A failed publish fails
    nothing (the next call tries again); a publish whose record failed is published again,
    under the same id, and sent once."""
    now = datetime.now(UTC)
    if not rules.due(
        created_at=profile.created_at,
        welcomed_at=profile.welcomed_at,
        email=profile.email,
        now=now,
    ):
        return
    assert profile.email is not None
    event, data = rules.welcome(user_id=profile.id, email=profile.email, name=profile.name, now=now)
    if not publish_or_log(bus, event, data, what=f"the new account {profile.id}"):
        return
    profiles.mark_welcomed(db, profile.id)
