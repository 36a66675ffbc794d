"""`flask --app main products sync` (and `seed`, the same sync) against the Stripe fake and
Postgres: every page read, one row per price, metadata errors logged and not sold."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import Result

from adapters.db.pool import Database
from config import Settings
from dev.samples.catalogue import price, product, product_feature
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from runtime.container import Container


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, Any]) -> StripeStandIn:
    return fakes[0]


@pytest.fixture
def cli(settings_factory: Callable[..., Settings]) -> Iterator[Callable[..., Result]]:
    containers: list[Container] = []

    def run(*args: str) -> Result:
        container = Container(settings_factory())
        containers.append(container)
        return create_app(container=container).test_cli_runner().invoke(args=list(args))

    yield run
    for container in containers:
        container.close()


def offer(stripe: StripeStandIn, prod: dict[str, Any], *prices: dict[str, Any]) -> None:
    stripe.products[prod["id"]] = prod
    for p in prices:
        stripe.prices[p["id"]] = p


def rows(db: Database) -> dict[str, dict[str, Any]]:
    found = db.fetch_all(
        "select stripe_price_id, stripe_product_id, name, price, type, billing_type,"
        " billing_interval, is_active, is_featured, github_repo, features, per_seat, trial_days"
        " from public.products"
    )
    return {r.pop("stripe_price_id"): r for r in found}


def test_every_page_of_products_and_prices_is_synced(
    cli: Callable[..., Result], stripe: StripeStandIn, db: Database
) -> None:
    # Stripe lists at most 100 a page: 120 products with a price each take two pages of each.
    for n in range(120):
        offer(
            stripe,
            product(f"prod_{n:03}", f"Product {n}", "", {"type": "link"}),
            price(f"price_{n:03}", f"prod_{n:03}", 100 + n, "month" if n % 2 else None),
        )
    result = cli("products", "sync")
    assert result.exit_code == 0, result.output
    assert "catalogue synced from Stripe: 120 price(s)" in result.output
    found = rows(db)
    assert len(found) == 120
    assert found["price_007"]["billing_type"] == "subscription"
    assert found["price_008"]["billing_interval"] is None
    assert str(found["price_119"]["price"]) == "2.19"
    pages = stripe.calls("GET", "/v1/prices")
    assert [dict(r.query).get("starting_after") for r in pages] == [None, "price_099"]


def test_metadata_errors_are_logged_with_the_id_and_not_sold(
    cli: Callable[..., Result],
    stripe: StripeStandIn,
    db: Database,
    caplog: pytest.LogCaptureFixture,
) -> None:
    offer(stripe, product("prod_ok", "Ok", "", {"type": "link"}), price("price_ok", "prod_ok", 500))
    offer(
        stripe,
        product("prod_repo", "Repo", "", {"type": "github", "github_repo": "not a repo"}),
        price("price_repo", "prod_repo", 900),
    )
    offer(
        stripe,
        product("prod_feat", "Feat", "", {"type": "link", "features": "Bad Name"}),
        price("price_feat", "prod_feat", 900),
    )
    offer(
        stripe,
        product("prod_week", "Weekly", "", {"type": "link"}),
        price("price_week", "prod_week", 900, "week"),
    )
    with caplog.at_level(logging.WARNING, logger="catalogue.service"):
        result = cli("products", "sync")
    assert result.exit_code == 0, result.output
    assert set(rows(db)) == {"price_ok"}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "product prod_repo is not sold: metadata github_repo is 'not a repo'" in logged
    assert "product prod_feat is not sold: feature 'Bad Name' is not a lowercase slug" in logged
    assert "price price_week of product prod_week is not sold: billed every 1 week" in logged
    assert "not sold: product prod_repo" in result.output


def test_entitlements_features_are_preferred_and_metadata_read(
    cli: Callable[..., Result], stripe: StripeStandIn, db: Database
) -> None:
    meta = {
        "type": "github",
        "github_repo": "acme/source",
        "features": "from-metadata",
        "per_seat": "true",
        "trial_days": "14",
        "featured": "true",
    }
    offer(
        stripe, product("prod_pro", "Pro", "", meta), price("price_pro", "prod_pro", 1900, "year")
    )
    stripe.features["prod_pro"] = [product_feature("sso", "SSO"), product_feature("audit", "Audit")]
    assert cli("products", "sync").exit_code == 0
    row = rows(db)["price_pro"]
    assert row["features"] == ["sso", "audit"]
    assert (row["type"], row["github_repo"], row["per_seat"]) == ("github", "acme/source", True)
    assert (row["trial_days"], row["is_featured"], row["billing_interval"]) == (14, True, "year")
    assert row["stripe_product_id"] == "prod_pro"


def test_what_stripe_no_longer_sells_becomes_inactive_and_stays(
    cli: Callable[..., Result], stripe: StripeStandIn, db: Database
) -> None:
    offer(
        stripe,
        product("prod_a", "A", "", {"type": "link"}),
        price("price_a1", "prod_a", 100),
        price("price_a2", "prod_a", 200, "month"),
    )
    offer(stripe, product("prod_b", "B", "", {"type": "link"}), price("price_b", "prod_b", 300))
    assert cli("seed").exit_code == 0  # `seed` is the same sync
    assert {k: r["is_active"] for k, r in rows(db).items()} == {
        "price_a1": True,
        "price_a2": True,
        "price_b": True,
    }
    stripe.prices["price_a2"]["active"] = False  # a price archived
    stripe.products["prod_b"]["active"] = False  # a product archived
    result = cli("products", "sync")
    assert result.exit_code == 0, result.output
    assert "1 price(s)" in result.output
    assert {k: r["is_active"] for k, r in rows(db).items()} == {
        "price_a1": True,
        "price_a2": False,
        "price_b": False,
    }
