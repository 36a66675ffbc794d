"""POST /api/payments/create-checkout and create-portal: what the Stripe SDK actually sent."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from adapters.db.pool import Database
from adapters.supabase_auth import encode_value, storage_key
from core.stripe_objects import CURRENT_VERSION
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.conftest import Api
from tests.helpers import create_user

ONE_TIME = "price_demo_starter_one_time"
MONTHLY = "price_demo_team_monthly"
URLS = {"successUrl": "https://app.example.com/ok", "cancelUrl": "https://app.example.com/no"}
# The original spec's sentences, before the fields they need.
MODE_REQUIRED = "Mode is required (mode: either 'payment' or 'subscription')"
SPEC_MESSAGES = {"Price ID is required", "Success and cancel URLs are required", "Mode is required"}


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, AuthStandIn], db: Database) -> StripeStandIn:
    seed_demo_products(db)
    return fakes[0]


def checkout(api: Api, body: dict[str, Any], token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return api.post("/api/payments/create-checkout", json=body, headers=headers)


def signed_in(
    api: Api, db: Database, email: str = "buyer@example.com", customer: str | None = None
) -> tuple[str, str]:
    user_id = create_user(db, email)
    if customer:
        with db.transaction() as conn:
            conn.execute(
                "update public.profiles set customer_id = %s where id = %s", (customer, user_id)
            )
    return user_id, api.token(sub=user_id, email=email)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Price ID is required (priceId)"),
        ({"mode": "payment", **URLS}, "Price ID is required (priceId)"),
        ({"priceId": "", "mode": "payment", **URLS}, "Price ID is required (priceId)"),
        ({"priceId": ONE_TIME}, "Success and cancel URLs are required (successUrl, cancelUrl)"),
        (
            {"priceId": ONE_TIME, "mode": "payment", "successUrl": URLS["successUrl"]},
            "Success and cancel URLs are required (successUrl, cancelUrl)",
        ),
        ({"priceId": ONE_TIME, **URLS}, MODE_REQUIRED),
        (
            {"priceId": ONE_TIME, "mode": "setup", **URLS},
            MODE_REQUIRED,
        ),
    ],
)
def test_validation_follows_the_spec_order(
    api: Api, stripe: StripeStandIn, body: dict[str, Any], message: str
) -> None:
    response = checkout(api, body)
    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert stripe.checkout_params() == []
    # The original spec's sentence stays readable at the start: frontends match on it.
    spec = message.split(" (")[0]
    assert spec in SPEC_MESSAGES


@pytest.mark.parametrize("url", ["/relative", "javascript:alert(1)", "ftp://x.com/a", "https://"])
def test_urls_must_be_absolute_http(api: Api, stripe: StripeStandIn, url: str) -> None:
    response = checkout(
        api,
        {"priceId": ONE_TIME, "mode": "payment", "successUrl": url, "cancelUrl": URLS["cancelUrl"]},
    )
    assert response.status_code == 400
    assert response.json() == {"error": "successUrl must be an absolute http(s) URL"}
    assert stripe.checkout_params() == []


def test_urls_must_be_on_the_site_when_it_is_configured(
    api_factory: Any, stripe: StripeStandIn
) -> None:
    api = api_factory(site_url="https://app.example.com")
    bad = checkout(
        api,
        {"priceId": ONE_TIME, "mode": "payment", **URLS, "cancelUrl": "https://evil.example.net/"},
    )
    assert bad.status_code == 400
    assert bad.json() == {"error": "cancelUrl must be on https://app.example.com"}
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}).status_code == 200


def test_price_must_belong_to_an_active_product(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    unknown = checkout(api, {"priceId": "price_unknown", "mode": "payment", **URLS})
    assert unknown.status_code == 400
    assert unknown.json() == {"error": "Unknown or inactive price ID (priceId)"}
    with db.transaction() as conn:
        conn.execute(
            "update public.products set is_active = false where stripe_price_id = %s", (ONE_TIME,)
        )
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}).status_code == 400
    assert stripe.checkout_params() == []


@pytest.mark.parametrize(("price", "mode"), [(ONE_TIME, "subscription"), (MONTHLY, "payment")])
def test_mode_must_match_billing_type(
    api: Api, stripe: StripeStandIn, price: str, mode: str
) -> None:
    response = checkout(api, {"priceId": price, "mode": mode, **URLS})
    assert response.status_code == 400
    assert "does not match" in response.json()["error"]
    assert "(mode)" in response.json()["error"]
    assert stripe.checkout_params() == []


def test_guest_one_time_checkout(api: Api, stripe: StripeStandIn) -> None:
    response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS})
    assert response.status_code == 200
    assert response.json()["url"].startswith(f"{stripe.url}/pay/cs_test_")
    [sent] = stripe.checkout_params()
    # A guest's completion token: in the success URL, its digest in the session's metadata.
    token = sent["success_url"].rpartition("&checkout_token=")[2]
    assert len(token) >= 40
    assert sent == {
        "mode": "payment",
        "line_items": [{"price": ONE_TIME, "quantity": "1"}],
        "success_url": URLS["successUrl"]
        + "?session_id={CHECKOUT_SESSION_ID}&checkout_token="
        + token,
        "cancel_url": URLS["cancelUrl"],
        "metadata": {
            "price_id": ONE_TIME,
            "completion_token_sha256": hashlib.sha256(token.encode()).hexdigest(),
        },
        "allow_promotion_codes": "true",
        "tax_id_collection": {"enabled": "true"},
        "customer_creation": "always",
        "payment_intent_data": {"setup_future_usage": "on_session"},
        "after_expiration": {"recovery": {"enabled": "true"}},
    }
    request = stripe.calls("POST", "/v1/checkout/sessions")[0]
    assert request.headers["Stripe-Version"] == CURRENT_VERSION
    assert request.headers["Authorization"] == "Bearer sk_test_fake"


def test_the_calls_go_out_at_the_configured_version(
    api_factory: Any, stripe: StripeStandIn, db: Database
) -> None:
    api = api_factory(stripe_api_version="2023-08-16")
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}).status_code == 200
    [request] = stripe.calls("POST", "/v1/checkout/sessions")
    assert request.headers["Stripe-Version"] == "2023-08-16"


def test_a_version_stripe_does_not_know_is_refused_by_stripe(
    api_factory: Any, stripe: StripeStandIn
) -> None:
    api = api_factory(stripe_api_version="2019-13-45.nothing")
    response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS})
    assert response.status_code == 200
    assert response.json() == {"url": None}  # Stripe refused: the route's answer


def test_signed_in_new_customer_payment(api: Api, stripe: StripeStandIn, db: Database) -> None:
    user_id, token = signed_in(api, db)
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}, token).status_code == 200
    [sent] = stripe.checkout_params()
    assert sent["client_reference_id"] == user_id
    assert sent["metadata"] == {"price_id": ONE_TIME, "user_id": user_id}
    assert sent["customer_email"] == "buyer@example.com"
    assert sent["customer_creation"] == "always"
    assert sent["payment_intent_data"] == {"setup_future_usage": "on_session"}
    assert sent["tax_id_collection"] == {"enabled": "true"}
    assert "customer" not in sent


def test_signed_in_new_customer_subscription(api: Api, stripe: StripeStandIn, db: Database) -> None:
    user_id, token = signed_in(api, db)
    assert (
        checkout(api, {"priceId": MONTHLY, "mode": "subscription", **URLS}, token).status_code
        == 200
    )
    [sent] = stripe.checkout_params()
    assert sent["mode"] == "subscription"
    assert sent["line_items"] == [{"price": MONTHLY, "quantity": "1"}]
    assert sent["client_reference_id"] == user_id
    assert sent["customer_email"] == "buyer@example.com"
    assert sent["tax_id_collection"] == {"enabled": "true"}
    # Rule 8: only one-time payments force customer creation and save the card.
    assert "customer_creation" not in sent
    assert "payment_intent_data" not in sent


@pytest.mark.parametrize(("price", "mode"), [(ONE_TIME, "payment"), (MONTHLY, "subscription")])
def test_existing_customer_is_reused_and_nothing_else_added(
    api: Api, stripe: StripeStandIn, db: Database, price: str, mode: str
) -> None:
    user_id, token = signed_in(api, db, customer="cus_existing")
    assert checkout(api, {"priceId": price, "mode": mode, **URLS}, token).status_code == 200
    [sent] = stripe.checkout_params()
    assert sent == {
        "mode": mode,
        "line_items": [{"price": price, "quantity": "1"}],
        "success_url": URLS["successUrl"] + "?session_id={CHECKOUT_SESSION_ID}",
        "cancel_url": URLS["cancelUrl"],
        "metadata": {"price_id": price, "user_id": user_id},
        "client_reference_id": user_id,
        "allow_promotion_codes": "true",
        "customer": "cus_existing",
        "after_expiration": {"recovery": {"enabled": "true"}},
    }


def test_guest_subscription_has_no_customer_email(api: Api, stripe: StripeStandIn) -> None:
    assert checkout(api, {"priceId": MONTHLY, "mode": "subscription", **URLS}).status_code == 200
    [sent] = stripe.checkout_params()
    assert "customer_email" not in sent
    assert "client_reference_id" not in sent
    assert sent["tax_id_collection"] == {"enabled": "true"}


def test_session_cookie_identifies_the_user(
    api: Api, stripe: StripeStandIn, db: Database, fakes: tuple[StripeStandIn, AuthStandIn]
) -> None:
    user_id, token = signed_in(api, db)
    cookie = {storage_key(fakes[1].url): encode_value({"access_token": token})}
    response = api.post(
        "/api/payments/create-checkout",
        cookies=cookie,
        json={"priceId": ONE_TIME, "mode": "payment", **URLS},
    )
    assert response.status_code == 200
    assert stripe.checkout_params()[0]["client_reference_id"] == user_id


USER = "5f0c7f2e-8a51-4f8e-9d7e-2b0b8e3f4a10"


@pytest.mark.parametrize(
    "claims",
    [
        None,
        {"exp_in": -60},
        {"exp_in": -15},
        {"secret": "another-secret-of-32-characters!!"},
        {"issuer": "https://another-project.supabase.co/auth/v1"},
        {"sub": "not-a-uuid"},
        {"sub": "1 or 1=1"},
    ],
)
def test_bad_or_expired_token_is_401(
    api: Api, stripe: StripeStandIn, claims: dict[str, Any] | None
) -> None:
    token = "garbage" if claims is None else api.token(**{"sub": USER, "email": "a@b.c", **claims})
    response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}, token)
    assert response.status_code == 401
    assert response.json()["error"].startswith("Invalid or expired access token")
    assert stripe.checkout_params() == []


def test_tokens_are_checked_against_jwks_without_a_jwt_secret(
    api_factory: Any,
    stripe: StripeStandIn,
    db: Database,
    fakes: tuple[StripeStandIn, AuthStandIn],
) -> None:
    api = api_factory(supabase_jwt_secret=None)
    user_id = create_user(db, "jwks@example.com")
    good = fakes[1].es256_token(sub=user_id, email="jwks@example.com")
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}, good).status_code == 200
    assert stripe.checkout_params()[0]["client_reference_id"] == user_id
    assert (
        checkout(
            api,
            {"priceId": ONE_TIME, "mode": "payment", **URLS},
            api.token(sub=user_id, email="x@y.z"),
        ).status_code
        == 401
    )
    assert fakes[1].calls("GET", "/auth/v1/.well-known/jwks.json")


def test_provider_failure_answers_null_url(api: Api, stripe: StripeStandIn) -> None:
    stripe.refuse_checkout = True
    response = checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS})
    assert response.status_code == 200
    assert response.json() == {"url": None}


def test_portal_needs_a_signed_in_customer(api: Api, stripe: StripeStandIn, db: Database) -> None:
    body = {"returnUrl": "https://app.example.com/dashboard"}
    assert api.post("/api/payments/create-portal", json={}).json() == {
        "error": "Return URL is required (returnUrl)"
    }
    assert api.post("/api/payments/create-portal", json=body).status_code == 401
    _, token = signed_in(api, db, email="nocustomer@example.com")
    response = api.post(
        "/api/payments/create-portal", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400
    assert stripe.calls("POST", "/v1/billing_portal/sessions") == []


def test_portal_url_for_a_customer(api: Api, stripe: StripeStandIn, db: Database) -> None:
    _, token = signed_in(api, db, customer="cus_portal")
    response = api.post(
        "/api/payments/create-portal",
        json={"returnUrl": "https://app.example.com/dashboard"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200
    assert response.json()["url"].startswith(f"{stripe.url}/portal/bps_")
    [call] = stripe.calls("POST", "/v1/billing_portal/sessions")
    assert call.form() == {
        "customer": "cus_portal",
        "return_url": "https://app.example.com/dashboard",
    }


def test_a_product_with_a_trial_offers_it_and_asks_for_no_card(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.products set trial_days = 14 where stripe_price_id = %s", (MONTHLY,)
        )
    assert checkout(api, {"priceId": MONTHLY, "mode": "subscription", **URLS}).status_code == 200
    [sent] = stripe.checkout_params()
    assert sent["subscription_data"] == {
        "trial_period_days": "14",
        "trial_settings": {"end_behavior": {"missing_payment_method": "cancel"}},
    }
    assert sent["payment_method_collection"] == "if_required"


def test_no_trial_without_one_on_the_product_nor_for_a_one_time_price(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    with db.transaction() as conn:
        conn.execute(
            "update public.products set trial_days = 7 where stripe_price_id = %s", (ONE_TIME,)
        )
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}).status_code == 200
    assert checkout(api, {"priceId": MONTHLY, "mode": "subscription", **URLS}).status_code == 200
    for sent in stripe.checkout_params():
        assert "subscription_data" not in sent
        assert "payment_method_collection" not in sent


def test_recovery_and_consent_follow_the_settings(
    api_factory: Callable[..., Api], stripe: StripeStandIn
) -> None:
    api = api_factory(checkout_recovery=False, checkout_promotions_consent=True)
    assert checkout(api, {"priceId": ONE_TIME, "mode": "payment", **URLS}).status_code == 200
    [sent] = stripe.checkout_params()
    assert "after_expiration" not in sent
    assert sent["consent_collection"] == {"promotions": "auto"}
