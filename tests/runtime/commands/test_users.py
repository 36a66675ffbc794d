"""`flask --app main users ...`: local users, tokens the API accepts, refused in production."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jwt
import pytest
import requests
from click.testing import Result

from adapters.db.pool import Database
from config import Settings
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from tests.conftest import Api
from tests.helpers import HANG_GUARD, stripe_event, stripe_signature, wait_for

CHECKOUT = {
    "priceId": "price_demo_team_monthly",
    "mode": "subscription",
    "successUrl": "https://app.example.com/ok",
    "cancelUrl": "https://app.example.com/",
}
# Locally, without a Supabase project: tokens are signed with the public development secret.
LOCAL = {"app_env": "development", "supabase_url": None, "supabase_jwt_secret": None}


Cli = Callable[..., Result]


@pytest.fixture
def cli(settings_factory: Callable[..., Settings]) -> Callable[..., Cli]:
    def make(**overrides: Any) -> Cli:
        runner = create_app(settings_factory(**overrides)).test_cli_runner()
        return lambda *args: runner.invoke(args=["users", *args])

    return make


def checkout(api: Api, token: str) -> Any:
    return api.post(
        "/api/payments/create-checkout", json=CHECKOUT, headers={"Authorization": f"Bearer {token}"}
    )


def test_created_user_gets_a_token_the_api_accepts(
    cli: Callable[..., Cli],
    api_factory: Callable[..., Api],
    db: Database,
    stripe_fake: StripeStandIn,
) -> None:
    from dev.samples.catalogue import seed_demo_products

    seed_demo_products(db)
    users = cli(**LOCAL)
    created = users("create", "Ada@Example.com", "--name", "Ada")
    assert created.exit_code == 0, created.output
    [row] = db.fetch_all("select id::text, email, name from public.profiles")
    assert created.output == f"created Ada@example.com (id {row['id']})\n"
    assert users("create", "ada@example.com").output.startswith("exists: Ada@example.com")
    assert users("id", "ADA@example.com").output == f"{row['id']}\n"
    assert users("id", "nobody@example.com").exit_code == 1
    token = users("token", "ada@example.com").output.strip()
    # Signed as Supabase Auth signs, with the claims its access token hook adds.
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["sub"], claims["has_access"], claims["features"]) == (row["id"], False, [])
    response = checkout(api_factory(**LOCAL), token)
    assert response.status_code == 200, response.text
    assert stripe_fake.checkout_params()[0]["client_reference_id"] == row["id"]


def test_a_development_token_is_refused_where_a_real_secret_is_configured(
    cli: Callable[..., Cli], api: Api, db: Database, stripe_fake: StripeStandIn
) -> None:
    users = cli(**LOCAL)
    users("create", "ada@example.com")
    response = checkout(api, users("token", "ada@example.com").output.strip())
    assert response.status_code == 401
    assert stripe_fake.checkout_params() == []


def test_show_tells_access_purchases_and_emails(
    cli: Callable[..., Cli], api: Api, db: Database
) -> None:
    users = cli(**LOCAL)
    users("create", "ada@example.com")
    assert "has_access  false" in users("show", "ada@example.com").output
    session = {
        "id": "cs_show",
        "object": "checkout.session",
        "customer": "cus_show",
        "metadata": {"price_id": "price_demo_team_monthly"},
        "payment_status": "paid",
        "amount_total": 1900,
        "currency": "usd",
        "customer_details": {"email": "ada@example.com", "name": None},
    }
    body = stripe_event("checkout.session.completed", session, event_id="evt_show")
    api.post(
        "/api/webhook/payments", data=body, headers={"Stripe-Signature": stripe_signature(body)}
    )
    # Both mails: the confirmation, and the sign-in link the account's invitation calls for.
    wait_for(lambda: len(db.fetch_all("select 1 from public.sent_emails")) == 2)
    shown = users("show", "ada@example.com").output
    assert "has_access  true" in shown
    assert "customer    cus_show" in shown
    assert "purchases   1" in shown
    assert "cs_show" in shown
    # A checkout made signed out: the confirmation, and a link to sign in to the account.
    assert "e-mails     2" in shown
    # Each names what it was about in plain words: the checkout, not the key it was sent under.
    assert "purchase-confirmation for checkout cs_show" in shown
    assert "signin-link for checkout cs_show" in shown
    assert "granted_" not in shown


def test_show_names_the_checkout_paid_on_stripes_page_that_each_mail_was_for(
    cli: Callable[..., Cli], api_factory: Callable[..., Api], db: Database
) -> None:
    from dev import stack as local_stack
    from dev import stripe_stand_in
    from dev.samples.catalogue import seed_demo_products

    seed_demo_products(db)
    users = cli(**LOCAL)
    users("create", "grace@example.com")
    with stripe_stand_in.running() as stand_in:
        api = api_factory(stripe_secret_key=stripe_stand_in.API_KEY, stripe_api_base=stand_in.url)
        local_stack.pay_through(stand_in, api.container, api.url)
        # A guest checkout, made as the frontend makes it, paid on the stand-in's page.
        made = api.post("/api/payments/create-checkout", json=CHECKOUT)
        assert made.status_code == 200, made.text
        session = made.json()["url"].rsplit("/", 1)[-1]
        paid = requests.post(
            f"{stand_in.url}/pay/{session}", data={"email": "grace@example.com"}, timeout=HANG_GUARD
        )
        assert paid.status_code == 200, paid.text
        assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    shown = users("show", "grace@example.com").output
    assert "has_access  true" in shown
    assert f"purchase-confirmation for checkout {session}" in shown
    assert f"signin-link for checkout {session}" in shown


def test_unknown_user_and_bad_address_are_one_line_errors(
    cli: Callable[..., Cli], db: Database
) -> None:
    users = cli(**LOCAL)
    missing = users("token", "nobody@example.com")
    assert missing.exit_code == 1
    assert "no user with e-mail nobody@example.com" in missing.output
    bad = users("create", "not-an-address")
    assert bad.exit_code == 1
    assert "not an e-mail address" in bad.output
    assert db.fetch_all("select 1 from auth.users") == []


def test_users_are_refused_in_production(cli: Callable[..., Cli], db: Database) -> None:
    users = cli(
        app_env="production",
        event_bus="pubsub",
        site_url="https://shop.acme.dev",
        supabase_jwt_secret=None,  # the tests' is Supabase's public local one
        supabase_secret_key="service",
        stripe_publishable_key="pk_test_x",
        stripe_webhook_secret="whsec_prod",
        resend_api_key="re_x",
    )
    for args in (["create", "ada@example.com"], ["token", "ada@example.com"]):
        refused = users(*args)
        assert refused.exit_code == 1
        assert "refused with APP_ENV=production" in refused.output
    assert db.fetch_all("select 1 from auth.users") == []
