"""The rules of entitlements, on plain data: each grant ordered on its own, access derived."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from access.checkouts import Checkout, checkout_change, refund_change
from access.entitlements import (
    ENDED_ALREADY,
    GRANTED,
    PURCHASE,
    REVOKED,
    STALE,
    SUBSCRIPTION,
    Entitlement,
    GrantChange,
    StatusNeededAtTie,
    find,
    has_access,
    step,
    still_held,
)

ACCOUNT = "00000000-0000-4000-8000-000000000001"


def at(second: int) -> datetime:
    return datetime.fromtimestamp(1_700_000_000 + second, tz=UTC)


def sub(grant: bool, status: str, **facts: object) -> GrantChange:
    return GrantChange("sub_1", SUBSCRIPTION, grant=grant, status=status, **facts)  # type: ignore[arg-type]


def apply(current: Entitlement | None, change: GrantChange, second: int, **ties: str | None):  # type: ignore[no-untyped-def]
    return step(
        current,
        change,
        account_id=ACCOUNT,
        created=at(second),
        event_id=f"evt_{second}",
        tie_statuses=ties,
    )


LIFETIME = GrantChange("cs_life", PURCHASE, grant=True, status="paid", price_id="price_life")


def test_a_subscription_ending_leaves_a_lifetime_purchase_its_access() -> None:
    lifetime = apply(None, LIFETIME, 1).entitlement
    subscribed = apply(None, sub(True, "active"), 2).entitlement
    ended = apply(subscribed, sub(False, "canceled", ended_at=1_700_000_003), 3)
    assert ended.outcome == REVOKED
    assert ended.entitlement.ended_at == at(3)
    assert has_access([lifetime, ended.entitlement])
    assert not has_access([ended.entitlement])


def test_a_refund_ends_only_its_own_purchase() -> None:
    first = apply(None, LIFETIME, 1).entitlement
    other = apply(None, GrantChange("cs_two", PURCHASE, grant=True, status="paid"), 2).entitlement
    refunded = apply(first, refund_change("cs_life"), 3).entitlement
    assert (refunded.active, refunded.status) == (False, "refunded")
    assert other.active
    assert has_access([refunded, other])


def test_an_older_change_to_the_same_grant_is_stale_whatever_the_others() -> None:
    ended = apply(None, sub(False, "canceled"), 10).entitlement
    late = apply(ended, sub(True, "active"), 5)
    assert (late.outcome, late.applied, late.entitlement) == (STALE, False, ended)


def test_an_end_after_an_end_is_not_announced_again() -> None:
    unpaid = apply(apply(None, sub(True, "active"), 1).entitlement, sub(False, "unpaid"), 2)
    assert unpaid.ended_now
    deleted = apply(unpaid.entitlement, sub(False, "canceled"), 3)
    assert (deleted.outcome, deleted.ended_now) == (ENDED_ALREADY, False)
    assert deleted.entitlement.status == "canceled"


def test_a_tie_asks_stripe_and_stripe_decides() -> None:
    active = apply(None, sub(True, "active"), 1).entitlement
    with pytest.raises(StatusNeededAtTie) as needed:
        apply(active, sub(False, "canceled"), 1)
    assert needed.value.subscription_id == "sub_1"
    settled = apply(active, sub(False, "canceled"), 1, sub_1="active")
    assert (settled.outcome, settled.entitlement.active, settled.entitlement.status) == (
        GRANTED,
        True,
        "active",
    )
    # A purchase has nothing newer to ask about: the change at a tie stands.
    bought = apply(None, LIFETIME, 1).entitlement
    assert apply(bought, refund_change("cs_life"), 1).outcome == REVOKED


def test_facts_a_change_does_not_carry_are_kept() -> None:
    trial = apply(
        None, sub(True, "trialing", trial_end=1_700_086_400, cancel_at_period_end=True), 1
    )
    renewed = apply(trial.entitlement, sub(True, "active", current_period_end=1_702_592_000), 2)
    assert renewed.entitlement.trial_end == datetime.fromtimestamp(1_700_086_400, tz=UTC)
    assert renewed.entitlement.cancel_at_period_end is True
    assert renewed.entitlement.current_period_end == datetime.fromtimestamp(1_702_592_000, tz=UTC)
    assert renewed.entitlement.status == "active"


def test_a_change_finds_its_own_grant_only() -> None:
    bought = apply(None, LIFETIME, 1).entitlement
    subscribed = apply(None, sub(True, "active"), 2).entitlement
    held = [bought, subscribed]
    assert find(held, sub(False, "canceled")) == subscribed
    assert find(held, refund_change("cs_life")) == bought
    assert find(held, refund_change("cs_other")) is None


def test_a_paid_checkout_grants_its_subscription_or_its_purchase() -> None:
    base = dict(
        user_id=None, email=None, name=None, customer_id="cus_1", price_id="price_x",
        amount_total=100, currency="usd", paid=True,
    )  # fmt: skip
    subscription = checkout_change(Checkout(session_id="cs_1", subscription_id="sub_9", **base))  # type: ignore[arg-type]
    purchase = checkout_change(Checkout(session_id="cs_1", subscription_id=None, **base))  # type: ignore[arg-type]
    assert (subscription.source_id, subscription.kind) == ("sub_9", SUBSCRIPTION)
    assert (purchase.source_id, purchase.kind, purchase.status) == ("cs_1", PURCHASE, "paid")


def test_a_grant_is_still_held_until_it_has_ended() -> None:
    trialing = apply(None, sub(True, "trialing"), 1).entitlement
    ended = apply(trialing, sub(False, "canceled"), 2).entitlement
    assert still_held([trialing], "sub_1")
    assert still_held([], "sub_1")  # its checkout may still be on the way
    assert not still_held([ended], "sub_1")


def test_two_plans_in_one_second_take_the_one_stripe_holds_whatever_their_order() -> None:
    basic = sub(True, "active", price_id="price_basic")
    pro = sub(True, "active", price_id="price_pro")
    for first, second in ((basic, pro), (pro, basic)):
        held = apply(None, first, 1).entitlement
        with pytest.raises(StatusNeededAtTie):
            step(held, second, account_id=ACCOUNT, created=at(1), event_id="evt_b",
                 tie_statuses={}, tie_prices={})  # fmt: skip
        settled = step(
            held,
            second,
            account_id=ACCOUNT,
            created=at(1),
            event_id="evt_b",
            tie_statuses={"sub_1": "active"},
            tie_prices={"sub_1": "price_pro"},
        )
        assert settled.entitlement.price_id == "price_pro"
