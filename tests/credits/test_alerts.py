"""The thresholds of a grant used that a consumption reaches: each by the one consumption that
takes what was used to it, never by a later one already past it."""

from __future__ import annotations

from datetime import UTC, datetime

from core.app_events import CREDITS_THRESHOLD
from credits.rules import AlertTerms, Taken, crossed, reached, threshold_events

THRESHOLDS = (50, 90, 100)


def test_a_threshold_is_reached_by_the_consumption_that_takes_the_use_to_it() -> None:
    assert crossed(before=100, after=51, granted=100, thresholds=THRESHOLDS) == ()
    assert crossed(before=51, after=50, granted=100, thresholds=THRESHOLDS) == (50,)
    assert crossed(before=50, after=49, granted=100, thresholds=THRESHOLDS) == ()
    assert crossed(before=60, after=0, granted=100, thresholds=THRESHOLDS) == (50, 90, 100)
    assert crossed(before=0, after=0, granted=100, thresholds=THRESHOLDS) == ()  # overage
    assert crossed(before=3, after=2, granted=3, thresholds=(50,)) == ()  # 1 of 3: 33%
    assert crossed(before=2, after=1, granted=3, thresholds=(50,)) == (50,)  # 2 of 3: 67%
    assert crossed(before=0, after=0, granted=0, thresholds=THRESHOLDS) == ()


def test_each_reached_threshold_is_one_event_per_period_and_threshold() -> None:
    at = datetime(2026, 12, 7, 12, tzinfo=UTC)
    taken = Taken("consumed", "generations", balance=5, first=True, granted=100, before=60, mark=7)
    terms = AlertTerms(resets_at=None, billed=True, cap=40)
    events = threshold_events(
        taken, account_id="acc", to={"email": "a@example.com"}, at=at, thresholds=THRESHOLDS,
        terms=terms,
    )  # fmt: skip
    assert [e.id for e, _ in events] == [
        "credits_threshold_acc_generations_7_50", "credits_threshold_acc_generations_7_90",
    ]  # fmt: skip
    assert {e.type for e, _ in events} == {CREDITS_THRESHOLD}
    assert {**events[1][0].object, "at": None} == {
        "email": "a@example.com", "feature": "generations", "percent": 90, "balance": 5,
        "granted": 100, "used": 95, "at": None, "resets_at": None, "billed": True, "cap": 40,
    }  # fmt: skip
    replayed = Taken("consumed", "generations", balance=5, granted=100, before=60, mark=7)
    assert reached(replayed, THRESHOLDS) == ()  # a key sent again reaches nothing
