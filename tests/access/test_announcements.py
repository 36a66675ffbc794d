"""What a mail's key was about (access/announcements.py), as `users show` names it."""

from __future__ import annotations

import pytest

from access.announcements import about


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("granted_cs_test_a1", "checkout cs_test_a1"),
        ("invited_cs_test_a1", "checkout cs_test_a1"),
        ("revoked_evt_1Q2", "event evt_1Q2"),
        ("trial_evt_1Q2", "event evt_1Q2"),
        ("evt_1Q2", "event evt_1Q2"),
        ("signup_7f0c", "signup_7f0c"),
        ("granted_", "granted_"),
    ],
)
def test_a_key_names_its_checkout_or_event(key: str, said: str) -> None:
    assert about(key) == said
