"""The welcome's rule: once, to a new person with an address (accounts/welcome_rules.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from accounts.welcome_rules import NEW_ACCOUNT_WINDOW, due, welcome
from core.app_events import ACCOUNT_CREATED

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_a_new_person_not_welcomed_yet_is_due() -> None:
    assert due(created_at=NOW - timedelta(minutes=1), welcomed_at=None, email="a@b.c", now=NOW)
    assert due(created_at=NOW - NEW_ACCOUNT_WINDOW, welcomed_at=None, email="a@b.c", now=NOW)


def test_welcomed_old_unknown_or_without_an_address_is_not_due() -> None:
    new = NOW - timedelta(minutes=1)
    assert not due(created_at=new, welcomed_at=NOW, email="a@b.c", now=NOW)
    old = NOW - NEW_ACCOUNT_WINDOW - timedelta(seconds=1)
    assert not due(created_at=old, welcomed_at=None, email="a@b.c", now=NOW)
    assert not due(created_at=None, welcomed_at=None, email="a@b.c", now=NOW)
    assert not due(created_at=new, welcomed_at=None, email=None, now=NOW)
    assert not due(created_at=new, welcomed_at=None, email="", now=NOW)


def test_the_welcome_is_the_persons_own_event() -> None:
    event, _ = welcome(user_id="u-1", email="a@b.c", name="Ada", now=NOW)
    again, _ = welcome(user_id="u-1", email="a@b.c", name="Ada", now=NOW + timedelta(days=1))
    assert event.type == ACCOUNT_CREATED
    assert event.id == again.id == "signup_u-1"  # published twice, sent once
    assert event.object == {"user_id": "u-1", "email": "a@b.c", "name": "Ada"}
