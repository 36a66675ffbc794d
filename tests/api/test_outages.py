"""Dependencies that fail: Postgres restarted or down, Stripe down or stuck. The answer is a
retryable 503 with Retry-After, or a recovery, never a 500."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from adapters.db.pool import Database
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.billing.test_payments import ONE_TIME, URLS, checkout, signed_in
from tests.conftest import Api
from tests.fakes.http import hanging_server

PORTAL = {"returnUrl": "https://app.example.com/dashboard"}


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, AuthStandIn], db: Database) -> StripeStandIn:
    seed_demo_products(db)
    return fakes[0]


def terminate_other_connections(db: Database) -> int:
    """What a Postgres restart does to every pooled connection: it dies."""
    with db.transaction() as conn:
        rows = conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where datname = current_database() and pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_requests_after_a_postgres_restart_succeed(api: Api, db: Database) -> None:
    assert api.get("/api/products/public").status_code == 200  # the pool holds a connection now
    assert terminate_other_connections(db) >= 1
    for _ in range(3):
        response = api.get("/api/products/public")
        assert response.status_code == 200, response.text


def assert_503(response: object) -> None:
    assert response.status_code == 503  # type: ignore[attr-defined]
    assert response.headers["Retry-After"]  # type: ignore[attr-defined]
    assert set(response.json()) == {"error"}  # type: ignore[attr-defined]


def test_stripe_failing_on_its_side_is_503_on_checkout_and_portal(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    stripe.outage = True
    _, token = signed_in(api, db, customer="cus_outage")
    assert_503(checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}))
    headers = {"Authorization": f"Bearer {token}"}
    assert_503(api.post("/api/payments/create-portal", json=PORTAL, headers=headers))


def test_a_stuck_stripe_is_abandoned_at_the_deadline_with_503(
    api_factory: Callable[..., Api], stripe: StripeStandIn
) -> None:
    with hanging_server() as url:
        api = api_factory(stripe_api_base=url, outbound_timeout_seconds=0.3)
        response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS})
    assert_503(response)


def test_a_portal_refusal_answers_null_url_like_checkout(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    stripe.refuse_portal = True
    _, token = signed_in(api, db, customer="cus_no_portal")
    response = api.post(
        "/api/payments/create-portal", json=PORTAL, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200
    assert response.json() == {"url": None}
