"""The catalogue read from Stripe's objects, and a product or price event's decision, on plain
data."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from access.changes import key, to_changes
from catalogue.events import CatalogueChange, Retirement, decide
from catalogue.rules import (
    Unreadable,
    catalogue_of,
    listing,
    read_product,
)
from core.events import parse_event
from core.stripe_objects import StripeProduct, display_names, lookup_keys
from dev.samples.catalogue import price, product, product_feature
from tests.helpers import stripe_event

GITHUB = {"type": "github", "github_repo": "acme/source"}


def test_a_github_product_with_its_metadata_is_read() -> None:
    meta = {**GITHUB, "features": "api, exports ,", "per_seat": "true", "trial_days": "14"}
    facts = read_product(product("prod_1", "Pro", "All of it", {**meta, "featured": "true"}))
    assert (facts.type, facts.github_repo, facts.features) == (
        "github",
        "acme/source",
        ("api", "exports"),
    )
    assert (facts.per_seat, facts.trial_days, facts.featured) == (True, 14, True)


def test_entitlements_features_are_preferred_over_the_metadata() -> None:
    keys = lookup_keys([product_feature("sso", "SSO"), product_feature("audit-log", "Audit")])
    facts = read_product(product("prod_1", "Pro", "", {**GITHUB, "features": "api"}), keys)
    assert facts.features == ("sso", "audit-log")


def test_entitlements_features_keep_their_display_names_for_buyers() -> None:
    found = [product_feature("sso", "Single sign-on"), product_feature("audit-log", " ")]
    names = display_names(found)
    assert names == {"sso": "Single sign-on"}  # a blank name: shown by its key
    facts = read_product(
        product("prod_1", "Pro", "", GITHUB), lookup_keys(found), feature_names=names
    )
    assert facts.feature_names == (("sso", "Single sign-on"),)


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({}, "metadata type is '', not one of link, github"),
        ({"type": "course"}, "metadata type is 'course'"),
        ({"type": "github"}, "metadata github_repo is None, not owner/name"),
        ({"type": "github", "github_repo": "acme"}, "metadata github_repo is 'acme'"),
        (
            {"type": "link", "features": "API Access"},
            "feature 'API Access' is not a lowercase slug",
        ),
        ({"type": "link", "trial_days": "0"}, "metadata trial_days is '0'"),
        ({"type": "link", "trial_days": "two"}, "metadata trial_days is 'two'"),
        ({"type": "link", "per_seat": "yes"}, "metadata per_seat is 'yes', not true or false"),
        ({"type": "link", "download_url": "ftp://x"}, "metadata download_url is 'ftp://x'"),
    ],
)
def test_unreadable_metadata_names_what_is_wrong(metadata: dict[str, str], problem: str) -> None:
    with pytest.raises(Unreadable, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_product(product("prod_1", "Pro", "", metadata))


def test_a_price_becomes_a_row_of_the_catalogue() -> None:
    facts = read_product(product("prod_1", "Pro", "", {"type": "link", "trial_days": "7"}))
    monthly = listing(facts, price("price_m", "prod_1", 1999, "month"))
    once = listing(facts, price("price_o", "prod_1", 4900))
    assert (monthly.price, monthly.billing_type, monthly.billing_interval) == (
        Decimal("19.99"), "subscription", "month",
    )  # fmt: skip
    assert monthly.trial_days == 7
    assert (once.billing_type, once.billing_interval, once.trial_days) == ("one_time", None, None)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"recurring": {"interval": "week", "interval_count": 1}}, "billed every 1 week"),
        (
            {"billing_scheme": "tiered", "unit_amount": None},
            "not a fixed amount per unit (tiered or customer-chosen)",
        ),
        ({"recurring": {"interval": "month", "usage_type": "metered"}}, "metered"),
    ],
)
def test_a_price_the_table_cannot_hold_is_left_out(change: dict[str, Any], problem: str) -> None:
    facts = read_product(product("prod_1", "Pro", "", {"type": "link"}))
    read = catalogue_of(
        [product("prod_1", "Pro", "", {"type": "link"})],
        [{**price("price_x", "prod_1", 100), **change}, price("price_ok", "prod_1", 100)],
        {},
    )
    assert [item.stripe_price_id for item in read.listings] == ["price_ok"]
    assert read.problems == (f"price price_x of product prod_1 is not sold: {problem}",)
    with pytest.raises(Unreadable):
        listing(facts, {**price("price_x", "prod_1", 100), **change})


def test_an_unreadable_product_sells_none_of_its_prices() -> None:
    read = catalogue_of(
        [
            product("prod_bad", "Bad", "", {"type": "course"}),
            product("prod_ok", "Ok", "", {"type": "link"}),
        ],
        [price("price_bad", "prod_bad", 100), price("price_ok", "prod_ok", 100)],
        {},
    )
    assert [item.stripe_price_id for item in read.listings] == ["price_ok"]
    assert len(read.problems) == 1
    assert read.problems[0].startswith("product prod_bad is not sold: metadata type is 'course'")


def test_a_row_keeps_its_currency_tax_behaviour_and_tax_code() -> None:
    facts = read_product(product("prod_1", "Pro", "", {"type": "link"}))
    euro = {**price("price_eur", "prod_1", 4900), "currency": "EUR", "tax_behavior": "inclusive"}
    row = listing(facts, euro)
    assert (row.currency, row.tax_behavior, row.tax_code) == ("eur", "inclusive", "txcd_10000000")
    bare = {**product("prod_2", "Bare", "", {"type": "link"}), "tax_code": None}
    plain = listing(read_product(bare), price("price_usd", "prod_2", 900))
    assert (plain.currency, plain.tax_behavior, plain.tax_code) == ("usd", "unspecified", None)


def test_under_managed_payments_a_product_without_a_tax_code_is_not_sold_and_named() -> None:
    bare = {**product("prod_bare", "Bare", "", {"type": "link"}), "tax_code": None}
    coded = product("prod_coded", "Coded", "", {"type": "link"})
    prices = [price("price_bare", "prod_bare", 100), price("price_coded", "prod_coded", 100)]
    read = catalogue_of([bare, coded], prices, {}, needs_tax_code=True)
    assert [item.stripe_price_id for item in read.listings] == ["price_coded"]
    assert read.problems == (
        "product prod_bare is not sold: no tax code: Managed Payments (CHECKOUT_TAX) sells only"
        " products with a tax code eligible for it",
    )
    # Without Managed Payments the same product is sold: Stripe Tax applies its preset.
    assert len(catalogue_of([bare, coded], prices, {}).listings) == 2


def event(event_type: str, obj: dict[str, Any], created: int) -> Any:
    body = stripe_event(event_type, obj, created=created, event_id=f"evt_{created}")
    return parse_event(json.loads(body))


def test_product_and_price_events_are_rows_of_the_table_about_no_account() -> None:
    pro = product("prod_1", "Pro", "", {"type": "link"})
    [of_product] = to_changes(event("product.updated", pro, 1))
    [of_price] = to_changes(event("price.updated", price("price_1", "prod_1", 100), 1))
    assert isinstance(of_product, CatalogueChange)
    assert of_product.product_id == "prod_1"
    assert isinstance(of_price, CatalogueChange)
    assert of_price.product_id == "prod_1"
    assert of_price.needs_stripe
    assert of_product.needs_stripe
    assert key(of_price) == key(of_product) == type(key(of_price))()


def test_a_price_event_writes_its_own_state_and_the_product_as_stripe_holds_it() -> None:
    pro = product("prod_1", "Pro", "", {"type": "link"})
    archived = {**price("price_1", "prod_1", 100), "active": False}
    found = StripeProduct(
        pro, [price("price_1", "prod_1", 100), price("price_2", "prod_1", 200)], []
    )
    e = event("price.updated", archived, 1_800_000_000)
    [change] = to_changes(e)
    write, outcome = decide(e, replace(change, found=found))  # type: ignore[arg-type]
    assert write.at == datetime.fromtimestamp(1_800_000_000, UTC)
    assert {item.stripe_price_id: item.is_active for item in write.listings} == {
        "price_1": False, "price_2": True,
    }  # fmt: skip
    assert write.retire == Retirement("prod_1", keep=("price_1", "price_2"))
    assert outcome == "catalogue: 1 price(s) of prod_1 sold"


def test_deleted_or_unreadable_products_are_retired_whole() -> None:
    pro = product("prod_1", "Pro", "", {"type": "course"})
    e = event("product.updated", pro, 5)
    [change] = to_changes(e)
    write, outcome = decide(e, replace(change, found=StripeProduct(pro, [], [])))  # type: ignore[arg-type]
    assert (write.listings, write.retire) == ((), Retirement("prod_1"))
    assert outcome.startswith("product prod_1 not sold: metadata type is 'course'")
    gone = event("price.deleted", price("price_1", "prod_1", 100), 6)
    [change] = to_changes(gone)
    assert decide(gone, change)[0].retire == Retirement(None, prices=("price_1",))  # type: ignore[arg-type]


def test_an_event_naming_no_product_retires_nothing() -> None:
    e = event("price.updated", {"id": "price_1", "object": "price", "product": None}, 7)
    [change] = to_changes(e)
    write, outcome = decide(e, change)  # type: ignore[arg-type]
    assert (write.listings, write.retire, outcome) == ((), None, "ignored (no product named)")


def test_credits_are_read_with_how_they_are_granted() -> None:
    meta = {"type": "link", "credits": "generations:100, api-calls:5000", "meter": "gen_over"}
    facts = read_product(product("prod_1", "Pro", "", meta))
    assert facts.credits == (("generations", 100), ("api-calls", 5000))
    assert (facts.credits_period, facts.credits_expire_days, facts.meter) == (
        "period", None, "gen_over",
    )  # fmt: skip
    pack = {"type": "link", "credits": "generations:500", "credits_period": "once"}
    facts = read_product(product("prod_2", "Pack", "", {**pack, "credits_expire_days": "365"}))
    row = listing(facts, price("price_p", "prod_2", 900))
    assert (row.credits, row.credits_period, row.credits_expire_days) == (
        (("generations", 500),), "once", 365,
    )  # fmt: skip
    assert read_product(product("prod_3", "Plain", "", {"type": "link"})).credits == ()
    capped = read_product(product("prod_4", "Metered", "", {**meta, "overage_cap": " 500 "}))
    assert listing(capped, price("price_m", "prod_4", 900, "month")).overage_cap == 500
    assert facts.overage_cap is None


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"credits": "generations"}, "metadata credits has 'generations', not <feature>:<amount>"),
        ({"credits": "Gen:5"}, "metadata credits has 'Gen:5', not <feature>:<amount>"),
        ({"credits": "gen:-5"}, "metadata credits has 'gen:-5', not <feature>:<amount>"),
        ({"credits": "gen:0"}, "metadata credits gives gen 0, not 1 to 1000000000"),
        ({"credits": "gen:1,gen:2"}, "metadata credits names gen twice"),
        ({"credits": "gen:1", "credits_period": "monthly"}, "metadata credits_period is 'monthly'"),
        ({"credits_period": "once"}, "metadata credits_period or credits_expire_days is set"),
        (
            {"credits": "gen:1", "credits_period": "once", "credits_expire_days": "0"},
            "metadata credits_expire_days is '0', not a whole number 1 to 3650",
        ),
        (
            {"credits": "gen:1", "credits_expire_days": "30"},
            "metadata credits_expire_days is set but credits_period is not once",
        ),
        ({"meter": "no spaces please"}, "metadata meter is 'no spaces please'"),
        ({"meter": "m", "overage_cap": "0"}, "metadata overage_cap is '0', not a whole number"),
        ({"meter": "m", "overage_cap": "1.5"}, "metadata overage_cap is '1.5', not a whole"),
        ({"meter": "m", "overage_cap": "-3"}, "metadata overage_cap is '-3', not a whole"),
        ({"overage_cap": "50"}, "metadata overage_cap is set without a meter"),
        ({"credits": "gen:1", "top_up": "true"}, "metadata top_up is set on a product that is not"),
        ({"top_up": "true"}, "metadata top_up is set on a product that is not a pack"),
        ({"credits": "gen:1", "credits_period": "once", "top_up": "yes"}, "metadata top_up is"),
    ],
)
def test_unreadable_credits_name_the_key(metadata: dict[str, str], problem: str) -> None:
    with pytest.raises(Unreadable, match=problem):
        read_product(product("prod_1", "Pro", "", {"type": "link", **metadata}))


def test_period_credits_on_a_one_time_price_leave_that_price_out() -> None:
    meta = {"type": "link", "credits": "generations:100"}
    read = catalogue_of(
        [product("prod_1", "Pro", "", meta)],
        [price("price_o", "prod_1", 900), price("price_m", "prod_1", 900, "month")],
        {},
    )
    assert [item.stripe_price_id for item in read.listings] == ["price_m"]
    assert read.problems == (
        "price price_o of product prod_1 is not sold:"
        " credits_period is period on a one-time price (a pack is `once`)",
    )


def test_a_pack_marked_for_top_up_is_read_so_at_its_one_time_price_only() -> None:
    meta = {"type": "link", "credits": "gen:5", "credits_period": "once", "top_up": "true"}
    facts = read_product(product("prod_5", "Pack", "", meta))
    assert facts.top_up
    assert listing(facts, price("price_p", "prod_5", 900)).top_up
    plain = read_product(product("prod_6", "Pack", "", {**meta, "top_up": ""}))
    assert not listing(plain, price("price_q", "prod_6", 900)).top_up
