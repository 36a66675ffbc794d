"""The demo catalogue, as Stripe's API returns it: the Stripe stand-in serves these products,
prices and features, and `make run`/`make demo` load them through `products sync` as a deployed
service loads Stripe's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.db.pool import Database
from catalogue import writes as store
from catalogue.events import CatalogueWrite
from catalogue.rules import catalogue_of
from core.stripe_objects import display_names, lookup_keys
from dev import stripe_shapes as shapes

CREATED = 1_764_547_200  # 2025-12-01, a fixed time: the objects are the same on every run


# Stripe Tax's code for electronically supplied services: what each demo product is, so Stripe
# Tax and Managed Payments can classify it (a founder picks the closest code for each product).
TAX_CODE = "txcd_10000000"


def product(
    product_id: str, name: str, description: str, metadata: dict[str, str]
) -> dict[str, Any]:
    """A `product` object as Stripe returns it, every field."""
    made = shapes.product(product_id, name, description, metadata, created=CREATED)
    return made | {"tax_code": TAX_CODE}


def price(
    price_id: str, product_id: str, unit_amount: int, interval: str | None = None
) -> dict[str, Any]:
    """A `price` object as Stripe returns it: per unit, one-time or recurring every interval."""
    return shapes.price(price_id, product_id, unit_amount, interval, created=CREATED)


def product_feature(lookup_key: str, name: str) -> dict[str, Any]:
    """A `product_feature` object: a Stripe Entitlements feature attached to a product."""
    return shapes.product_feature(lookup_key, name)


PRODUCTS: tuple[dict[str, Any], ...] = (
    product(
        "prod_demo_starter",
        "Starter Kit",
        "The starter's source as a download, with lifetime updates.",
        {"type": "link", "download_url": "https://example.com/downloads/starter-kit.zip"},
    ),
    product(
        "prod_demo_pro",
        "Pro Repository",
        "Access to the private GitHub repository, with every future commit.",
        {"type": "github", "github_repo": "example-org/saas-starter-pro", "featured": "true"},
    ),
    product(
        "prod_demo_team",
        "Team Monthly",
        "Everything in Pro, support and new templates each month.",
        {
            "type": "link",
            "download_url": "https://example.com/dashboard",
            "features": "templates,support",
            # Sold per seat: a team buys as many seats as it has members to give them to.
            "per_seat": "true",
        },
    ),
)

PRICES: tuple[dict[str, Any], ...] = (
    price("price_demo_starter_one_time", "prod_demo_starter", 4900),
    price("price_demo_pro_github", "prod_demo_pro", 14900),
    price("price_demo_team_monthly", "prod_demo_team", 1900, "month"),
)

# Entitlements features by product id: the team plan's, whose display names a buyer reads
# (its `features` metadata names the same keys, for a catalogue without Entitlements).
FEATURES: dict[str, list[dict[str, Any]]] = {
    "prod_demo_team": [
        product_feature("templates", "New templates each month"),
        product_feature("support", "Priority support"),
    ],
}


def seed_demo_products(db: Database) -> int:
    """The demo catalogue written as `products sync` would write it from the stand-in, without
    the HTTP (for tests and benchmarks); returns how many rows it added or changed (none the
    second time: the rows hold this state already)."""
    keys = {pid: lookup_keys(found) for pid, found in FEATURES.items()}
    names = {pid: display_names(found) for pid, found in FEATURES.items()}
    read = catalogue_of(PRODUCTS, PRICES, keys, feature_names=names)
    at = datetime.fromtimestamp(CREATED, UTC)
    return store.save(db, CatalogueWrite(at, read.listings))
