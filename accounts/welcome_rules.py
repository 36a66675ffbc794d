"""The welcome mail: once to every new person after their first sign-in, whatever its method.

A magic link or OAuth passes the API's sign-in callback; a password sign-up does not (the
browser holds the session Supabase Auth answered), so the first signed-in `GET /api/me`, which
every page asks after a sign-in, welcomes too. Both publish under the person's id, so the mail
goes once (the e-mail subscriber sends at most one per event and kind); the profile records that
it was handed on, so that later calls publish nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from core.app_events import ACCOUNT_CREATED
from core.events import Event, app_event

# A person created longer ago than this is not new: no welcome on their next sign-in (those who
# were there before the welcome existed are not welcomed years late).
NEW_ACCOUNT_WINDOW = timedelta(days=7)


def due(
    *, created_at: datetime | None, welcomed_at: datetime | None, email: str | None, now: datetime
) -> bool:
    """Whether this person is to be welcomed now."""
    return (
        welcomed_at is None
        and bool(email)
        and created_at is not None
        and now - created_at <= NEW_ACCOUNT_WINDOW
    )


def welcome(*, user_id: str, email: str, name: str | None, now: datetime) -> tuple[Event, bytes]:
    """`app.account.created` for this person, under an id that is theirs alone."""
    return app_event(
        ACCOUNT_CREATED,
        event_id=f"signup_{user_id}",
        obj={"user_id": user_id, "email": email, "name": name},
        created=now,
    )
