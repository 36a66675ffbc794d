"""Product and price events through the verified webhook keep the catalogue current, through
the access cycle's ordering and ledger: an archived price stops selling at once, an older state
never overwrites a newer one, a redelivery changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import price, product
from dev.stripe_stand_in import StripeStandIn
from tests.access.test_subscriber import post_event
from tests.conftest import Api
from tests.helpers import HANG_GUARD, stripe_event

T0 = 1_800_000_000
URLS = {"successUrl": "https://app.example.com/ok", "cancelUrl": "https://app.example.com/no"}


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, Any]) -> StripeStandIn:
    """Stripe holding one product with a one-time price (the events below change it)."""
    fake = fakes[0]
    fake.products["prod_kit"] = product("prod_kit", "Kit", "The kit", {"type": "link"})
    fake.prices["price_kit"] = price("price_kit", "prod_kit", 4900)
    return fake


def deliver(api: Api, event_type: str, obj: dict[str, Any], created: int, event_id: str) -> None:
    body = stripe_event(event_type, obj, created=created, event_id=event_id)
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]


def row(db: Database, price_id: str = "price_kit") -> dict[str, Any]:
    [found] = db.fetch_all(
        "select name, price, is_active, synced_at, updated_at from public.products"
        " where stripe_price_id = %s",
        (price_id,),
    )
    return found


def outcome(db: Database, event_id: str) -> str:
    [found] = db.fetch_all(
        "select outcome from public.processed_events where consumer = 'access' and event_id = %s",
        (event_id,),
    )
    return str(found["outcome"])


def checkout(api: Api, price_id: str = "price_kit") -> Any:
    body = {"priceId": price_id, "mode": "payment", **URLS}
    return api.post("/api/payments/create-checkout", json=body)


def test_a_new_price_is_sold_and_an_archived_one_is_refused_at_once(
    api: Api, db: Database, stripe: StripeStandIn
) -> None:
    assert checkout(api).status_code == 400  # not in the catalogue yet
    deliver(api, "price.created", stripe.prices["price_kit"], T0, "evt_created")
    assert (row(db)["name"], str(row(db)["price"]), row(db)["is_active"]) == ("Kit", "49.00", True)
    assert checkout(api).status_code == 200
    stripe.prices["price_kit"]["active"] = False  # archived in the Dashboard
    deliver(api, "price.updated", stripe.prices["price_kit"], T0 + 1, "evt_archived")
    assert row(db)["is_active"] is False
    refused = checkout(api)
    assert (refused.status_code, refused.json()) == (
        400,
        {"error": "Unknown or inactive price ID (priceId)"},
    )
    assert len(stripe.checkout_params()) == 1


def test_an_older_price_update_after_a_newer_one_changes_nothing(
    api: Api, db: Database, stripe: StripeStandIn
) -> None:
    active = dict(stripe.prices["price_kit"])
    archived = {**active, "active": False}
    stripe.prices["price_kit"] = archived
    deliver(api, "price.updated", archived, T0 + 10, "evt_newer")
    assert row(db)["is_active"] is False
    deliver(api, "price.updated", active, T0 + 5, "evt_older")  # late: it was sent first
    assert row(db)["is_active"] is False
    assert row(db)["synced_at"].timestamp() == T0 + 10
    assert checkout(api).status_code == 400


def test_a_redelivered_event_is_a_no_op(api: Api, db: Database, stripe: StripeStandIn) -> None:
    deliver(api, "product.created", stripe.products["prod_kit"], T0, "evt_once")
    first = row(db)
    assert outcome(db, "evt_once") == "catalogue: 1 price(s) of prod_kit sold"
    stripe.products["prod_kit"]["name"] = "Kit, renamed since"
    deliver(api, "product.created", stripe.products["prod_kit"], T0, "evt_once")
    assert row(db) == first  # neither written nor touched
    ledger = db.fetch_all("select 1 from public.processed_events where event_id = 'evt_once'")
    assert len(ledger) == 1


def test_a_product_update_reaches_every_price_and_unreadable_metadata_stops_selling(
    api: Api, db: Database, stripe: StripeStandIn
) -> None:
    stripe.prices["price_kit_yearly"] = price("price_kit_yearly", "prod_kit", 9900, "year")
    deliver(api, "product.created", stripe.products["prod_kit"], T0, "evt_product")
    assert row(db, "price_kit_yearly")["is_active"] is True
    stripe.products["prod_kit"]["metadata"] = {"type": "github"}  # no repository
    deliver(api, "product.updated", stripe.products["prod_kit"], T0 + 1, "evt_broken")
    assert outcome(db, "evt_broken").startswith(
        "product prod_kit not sold: metadata github_repo is None, not owner/name"
    )
    assert [row(db, p)["is_active"] for p in ("price_kit", "price_kit_yearly")] == [False, False]
    assert checkout(api).status_code == 400
    stripe.products["prod_kit"]["metadata"] = {"type": "link"}  # fixed
    stripe.products["prod_kit"]["name"] = "Kit 2"
    deliver(api, "product.updated", stripe.products["prod_kit"], T0 + 2, "evt_fixed")
    assert (row(db)["name"], row(db)["is_active"]) == ("Kit 2", True)
    assert checkout(api).status_code == 200


def test_a_deleted_product_stops_selling_and_its_rows_stay(
    api: Api, db: Database, stripe: StripeStandIn
) -> None:
    deliver(api, "price.created", stripe.prices["price_kit"], T0, "evt_price")
    gone = stripe.products.pop("prod_kit")
    deliver(api, "product.deleted", {**gone, "active": False}, T0 + 1, "evt_deleted")
    assert row(db)["is_active"] is False  # kept: purchases refer to it
    assert outcome(db, "evt_deleted") == "product retired"
    assert checkout(api).status_code == 400


def test_a_change_of_a_product_stripe_no_longer_has_retires_it_at_once(
    api: Api, db: Database, stripe: StripeStandIn
) -> None:
    """An update that arrives after the product was deleted in Stripe: asked for it, Stripe
    answers 404, so the product stops selling; the event is applied, not retried."""
    deliver(api, "price.created", stripe.prices["price_kit"], T0, "evt_price")
    gone = stripe.products.pop("prod_kit")
    deliver(api, "product.updated", {**gone, "name": "Kit, renamed"}, T0 + 1, "evt_late")
    assert outcome(db, "evt_late") == "product retired"
    assert row(db)["is_active"] is False  # kept: purchases refer to it
    assert checkout(api).status_code == 400
    deliver(api, "price.updated", stripe.prices["price_kit"], T0 + 2, "evt_price_late")
    assert outcome(db, "evt_price_late") == "product retired"
    assert row(db)["is_active"] is False


def test_a_products_credits_are_stored_with_it_and_bad_ones_stop_selling(
    api: Api, db: Database, stripe: StripeStandIn
) -> None:
    meta = {"type": "link", "credits": "generations:500", "credits_period": "once"}
    stripe.products["prod_kit"]["metadata"] = {**meta, "credits_expire_days": "30"}
    deliver(api, "product.updated", stripe.products["prod_kit"], T0, "evt_credits")
    [found] = db.fetch_all(
        "select credits, credits_period, credits_expire_days, is_active from public.products"
        " where stripe_price_id = 'price_kit'"
    )
    assert found == {
        "credits": {"generations": 500},
        "credits_period": "once",
        "credits_expire_days": 30,
        "is_active": True,
    }
    stripe.products["prod_kit"]["metadata"] = {"type": "link", "credits": "generations:lots"}
    deliver(api, "product.updated", stripe.products["prod_kit"], T0 + 1, "evt_bad_credits")
    assert row(db)["is_active"] is False
    assert outcome(db, "evt_bad_credits") == (
        "product prod_kit not sold: metadata credits has 'generations:lots', not <feature>:<amount>"
    )
