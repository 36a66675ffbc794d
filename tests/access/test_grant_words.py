"""The words for a grant, for every kind of grant: what a page, a mail and GET /api/me tell."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from access.grant_words import Credits, GrantFacts, counted, day, feature_name, plural, words

END = datetime(2027, 1, 31, 12, tzinfo=UTC)
TRIAL_END = datetime(2027, 1, 5, tzinfo=UTC)


def trial(**facts: object) -> GrantFacts:
    given: dict[str, object] = {
        "kind": "subscription",
        "active": True,
        "status": "trialing",
        "trial_end": TRIAL_END,
        "current_period_end": TRIAL_END,
        "price": "$29.00",
        "interval": "month",
    }
    return GrantFacts(**(given | facts))  # type: ignore[arg-type]


def test_a_comp_is_free_until_its_end_and_never_says_who_gave_it_or_that_it_renews() -> None:
    told = words(GrantFacts(kind="comp", active=True, status="active", current_period_end=END))
    assert (told.told, told.label) == ("comp", "Complimentary")
    assert told.summary == "Complimentary access, free until Jan 31, 2027: nothing is charged."
    forever = words(GrantFacts(kind="comp", active=True, status="active"))
    assert forever.summary == "Complimentary access, free with no end date: nothing is charged."
    ended = words(GrantFacts(kind="comp", active=False, status="active", current_period_end=END))
    assert ended.summary == "Complimentary access, ended on Jan 31, 2027."
    for summary in (told.summary, forever.summary, ended.summary):
        assert "renew" not in summary
        assert "paid" not in summary.lower()


def test_a_trial_with_a_card_says_when_it_ends_and_when_and_how_much_the_first_charge_is() -> None:
    told = words(trial(has_card=True))
    assert (told.told, told.label) == ("trial", "Free trial")
    assert told.summary == (
        "A free trial until Jan 5, 2027. The first charge, $29.00, is on Jan 5, 2027,"
        " then one every month until you cancel."
    )


def test_a_trial_without_a_card_ends_unless_one_is_added() -> None:
    assert words(trial(has_card=False)).summary == (
        "A free trial until Jan 5, 2027. No card on file: it ends then unless you add one;"
        " with one, the first charge, $29.00, is on Jan 5, 2027."
    )
    assert words(trial(has_card=False, without_card="pause", price=None)).summary == (
        "A free trial until Jan 5, 2027. No card on file: it pauses then unless you add one."
    )
    assert words(trial(has_card=False, without_card="create_invoice")).summary == (
        "A free trial until Jan 5, 2027. No card on file: the first invoice, $29.00, comes on"
        " Jan 5, 2027, to pay then."
    )


def test_a_trial_whose_card_is_not_known_says_both_outcomes() -> None:
    assert words(trial()).summary == (
        "A free trial until Jan 5, 2027. The first charge, $29.00, is on Jan 5, 2027,"
        " then one every month until you cancel. Without a card on file, it ends then instead."
    )
    unpriced = words(trial(price=None, has_card=True)).summary
    assert unpriced == "A free trial until Jan 5, 2027. The first charge is on Jan 5, 2027."


def test_a_cancelled_or_ended_trial_charges_nothing() -> None:
    assert words(trial(cancel_at_period_end=True)).summary == (
        "A free trial until Jan 5, 2027, cancelled: it ends then and nothing is charged."
    )
    assert words(trial(active=False)).summary == "A free trial, ended on Jan 5, 2027."


def test_a_pack_tells_the_credits_it_added_and_what_is_left() -> None:
    told = words(
        GrantFacts(
            kind="purchase",
            active=True,
            status="paid",
            credits=[Credits("Generations", 500)],
            balance=[Credits("Generations", 420)],
        )
    )
    assert (told.told, told.label) == ("pack", "Credit pack")
    assert told.summary == (
        "A credit pack: 500 credits for Generations added to your balance;"
        " 420 credits for Generations left now."
    )
    assert "file" not in told.summary
    assert "download" not in told.summary
    refunded = words(
        GrantFacts(kind="purchase", active=False, status="refunded", credits=[Credits("X", 1)])
    )
    assert refunded.summary == "A credit pack, refunded: its credits are taken back."


def test_a_subscription_renews_is_cancelled_fails_or_ends() -> None:
    base: dict[str, object] = {
        "kind": "subscription",
        "active": True,
        "status": "active",
        "current_period_end": END,
        "price": "$29.00",
        "interval": "month",
    }
    renews = words(GrantFacts(**base))  # type: ignore[arg-type]
    assert (renews.told, renews.label) == ("subscription", "Subscription")
    assert renews.summary == "A subscription, renewing on Jan 31, 2027: $29.00 every month."
    cancelled = words(GrantFacts(**(base | {"cancel_at_period_end": True})))  # type: ignore[arg-type]
    assert cancelled.summary == "A subscription, cancelled: it ends on Jan 31, 2027."
    failing = words(GrantFacts(**(base | {"status": "past_due"})))  # type: ignore[arg-type]
    assert "payment failed" in failing.summary
    assert "access stays" in failing.summary
    ended = words(GrantFacts(**(base | {"active": False, "status": "canceled", "ended_at": END})))  # type: ignore[arg-type]
    assert ended.summary == "A subscription, ended on Jan 31, 2027."


def test_a_one_time_purchase_is_kept_until_refunded() -> None:
    kept = words(GrantFacts(kind="purchase", active=True, status="paid"))
    assert (kept.told, kept.label) == ("purchase", "One-time purchase")
    assert kept.summary == "A one-time purchase: yours to keep, nothing renews."
    refunded = words(GrantFacts(kind="purchase", active=False, status="refunded"))
    assert refunded.summary == "A one-time purchase, refunded: its access has ended."


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            GrantFacts(
                kind="subscription",
                active=True,
                status="active",
                current_period_end=END,
                team="Acme",
                price="$12.00",
                interval="month",
                per_seat=True,
            ),
            "A subscription through the team “Acme”, renewing on Jan 31, 2027:"
            " $12.00 a seat every month.",
        ),
        (
            GrantFacts(kind="comp", active=True, status="active", team="Acme"),
            "Complimentary access through the team “Acme”, free with no end date:"
            " nothing is charged.",
        ),
        (
            trial(team="Acme", has_card=False),
            "A free trial through the team “Acme” until Jan 5, 2027. No card on file: it ends then"
            " unless you add one; with one, the first charge, $29.00, is on Jan 5, 2027.",
        ),
    ],
)
def test_a_team_seat_names_the_team(facts: GrantFacts, expected: str) -> None:
    assert words(facts).summary == expected


def test_days_counts_and_feature_names_read_as_people_read_them() -> None:
    assert day(date(2026, 3, 9)) == "Mar 9, 2026"
    assert (plural(1, "seat"), plural(3, "seat"), plural(1200, "credit")) == (
        "1 seat",
        "3 seats",
        "1,200 credits",
    )
    assert counted([Credits("Exports", 1), Credits("Generations", 2), Credits("Seats", 3)]) == (
        "1 credit for Exports, 2 credits for Generations and 3 credits for Seats"
    )
    assert feature_name("templates", {"templates": "Templates"}) == "Templates"
    assert feature_name("templates") == "templates"
    repo = feature_name("github:example-org/saas-starter-pro")
    assert repo == "the example-org/saas-starter-pro repository"
