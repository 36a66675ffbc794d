"""The Stripe stand-in's catalogue: the demo products paged as Stripe pages them, and a product
a founder creates or archives there reaching the table through the same sync as Stripe's."""

from __future__ import annotations

from typing import Any

import requests

from adapters.db.pool import Database
from adapters.stripe_api import StripeGateway
from core.stripe_objects import CURRENT_VERSION
from dev import stripe_stand_in
from dev.samples import catalogue
from services.catalogue import sync


def active(db: Database) -> set[str]:
    rows = db.fetch_all("select stripe_price_id from public.products where is_active")
    return {r["stripe_price_id"] for r in rows}


def test_the_demo_catalogue_is_paged_as_stripe_pages_it() -> None:
    with stripe_stand_in.running() as stand_in:
        seen: list[str] = []
        after: dict[str, Any] = {}
        while True:
            page = requests.get(
                f"{stand_in.url}/v1/prices", params={"limit": 2, **after}, timeout=5
            ).json()
            seen += [p["id"] for p in page["data"]]
            if not page["has_more"]:
                break
            after = {"starting_after": seen[-1]}
    assert seen == [p["id"] for p in catalogue.PRICES]


def test_a_product_created_and_archived_in_the_stand_in_is_synced(db: Database) -> None:
    with stripe_stand_in.running() as stand_in:
        gateway = StripeGateway(
            api_key=stripe_stand_in.API_KEY,
            api_base=stand_in.url,
            api_version=CURRENT_VERSION,
            timeout=5,
        )
        assert sync(db, gateway).sold == len(catalogue.PRICES)
        form = {"name": "Course", "metadata[type]": "link", "metadata[features]": "videos"}
        made = requests.post(f"{stand_in.url}/v1/products", data=form, timeout=5).json()
        price = requests.post(
            f"{stand_in.url}/v1/prices",
            data={"product": made["id"], "unit_amount": 2900, "currency": "usd"},
            timeout=5,
        ).json()
        sync(db, gateway)
        assert price["id"] in active(db)
        [row] = db.fetch_all(
            "select name, price, features from public.products where stripe_price_id = %s",
            (price["id"],),
        )
        assert (row["name"], str(row["price"]), row["features"]) == ("Course", "29.00", ["videos"])
        requests.post(
            f"{stand_in.url}/v1/prices/{price['id']}", data={"active": "false"}, timeout=5
        )
        sync(db, gateway)
        assert price["id"] not in active(db)
        assert active(db) == {p["id"] for p in catalogue.PRICES}
