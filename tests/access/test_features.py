"""Stripe's summary of a customer's active entitlements, read and compared with ours."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from access.features import SUMMARY_UPDATED, Disagreement, Summary, disagreement, summary_from
from core.events import Event


def event(obj: dict[str, Any]) -> Event:
    return Event(
        id="evt_1", type=SUMMARY_UPDATED, created=datetime.now(UTC), livemode=False, object=obj
    )


def listing(*items: dict[str, Any], has_more: bool = False) -> dict[str, Any]:
    return {"object": "list", "data": list(items), "has_more": has_more, "url": "/v1/x"}


def test_the_lookup_keys_are_read_with_the_feature_expanded_or_not() -> None:
    obj = {
        "object": "entitlements.active_entitlement_summary",
        "customer": "cus_1",
        "livemode": False,
        "entitlements": listing(
            {"object": "entitlements.active_entitlement", "feature": "feat_1", "lookup_key": "pro"},
            {
                "object": "entitlements.active_entitlement",
                "feature": {"id": "feat_2", "lookup_key": "api"},
                "lookup_key": "api",
            },
            {"object": "entitlements.active_entitlement", "lookup_key": None},
        ),
    }
    assert summary_from(event(obj)) == Summary("cus_1", frozenset({"pro", "api"}), True)


def test_a_list_cut_short_or_missing_is_not_complete() -> None:
    cut = {"customer": {"id": "cus_1"}, "entitlements": listing(has_more=True)}
    assert summary_from(event(cut)) == Summary("cus_1", frozenset(), False)
    assert summary_from(event({"customer": "cus_1"})).complete is False


def test_ours_are_compared_without_the_repository_features() -> None:
    stripe = Summary("cus_1", frozenset({"pro"}), True)
    assert disagreement(stripe, ["pro", "github:acme/kit"]) is None
    assert disagreement(stripe, ["pro", "api"]) == Disagreement("cus_1", ["pro"], ["api", "pro"])
    assert disagreement(stripe, []) == Disagreement("cus_1", ["pro"], [])


def test_nothing_is_compared_without_a_customer_a_whole_list_or_any_feature_in_stripe() -> None:
    assert disagreement(Summary(None, frozenset({"pro"}), True), []) is None
    assert disagreement(Summary("cus_1", frozenset({"pro"}), False), []) is None
    assert disagreement(Summary("cus_1", frozenset(), True), ["pro"]) is None
