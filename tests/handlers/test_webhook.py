"""POST /api/webhook/payments: what is refused at the door, before anything is published."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from adapters.db.pool import Database
from adapters.db.products import seed_demo_products
from tests.conftest import Api
from tests.helpers import create_user, stripe_event, stripe_signature
from tests.subscribers.test_access import completed, post_event


@pytest.fixture
def buyer(db: Database) -> str:
    seed_demo_products(db)
    return create_user(db, "buyer@example.com")


def has_access(api: Api, db: Database, user_id: str) -> bool:
    assert api.container.bus.wait_idle()  # type: ignore[attr-defined]
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (user_id,))
    return bool(row["has_access"])


@pytest.mark.parametrize("offset", [310, 3600, 10 * 365 * 86400])
def test_a_signature_dated_in_the_future_is_refused(
    api: Api, db: Database, buyer: str, offset: int
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer))
    response = post_event(api, body, timestamp=int(time.time()) + offset)
    assert response.status_code == 400
    assert response.json() == {"error": "Timestamp outside the tolerance zone"}
    assert not has_access(api, db, buyer)


def test_a_signature_a_little_ahead_is_accepted(api: Api, db: Database, buyer: str) -> None:
    # Stripe's clock and ours differ by a few seconds: the tolerance works both ways.
    body = stripe_event("checkout.session.completed", completed(buyer))
    assert post_event(api, body, timestamp=int(time.time()) + 60).status_code == 200
    assert has_access(api, db, buyer)


@pytest.mark.parametrize(
    ("key", "livemode"), [("sk_test_fake", True), ("sk_live_fake", False), ("rk_live_x", False)]
)
def test_an_event_of_the_other_mode_is_refused_and_logged(
    api_factory: Callable[..., Api],
    db: Database,
    buyer: str,
    caplog: pytest.LogCaptureFixture,
    key: str,
    livemode: bool,
) -> None:
    api = api_factory(stripe_secret_key=key)
    body = stripe_event("checkout.session.completed", completed(buyer), livemode=livemode)
    with caplog.at_level(logging.ERROR, logger="services.webhook"):
        response = api.post(
            "/api/webhook/payments", data=body, headers={"Stripe-Signature": stripe_signature(body)}
        )
    assert response.status_code == 400
    assert response.json() == {
        "error": "Event mode (live or test) does not match this service's Stripe key"
    }
    assert f"livemode={livemode}" in caplog.text
    assert not has_access(api, db, buyer)


def test_an_event_of_the_same_mode_passes(
    api_factory: Callable[..., Api], db: Database, buyer: str
) -> None:
    api = api_factory(stripe_secret_key="sk_live_fake")
    body = stripe_event("checkout.session.completed", completed(buyer), livemode=True)
    assert post_event(api, body).status_code == 200
    assert has_access(api, db, buyer)
