"""No secret reaches a log line or an answer, on any error path.

Distinctive values are planted as every secret of a production configuration; then the app is
driven through bad signatures, bad tokens, provider failures and a database that is down, and
everything it said (answers, headers, every log record at every level) is searched for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import requests

from adapters.db.pool import Database
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.conftest import PRODUCTION_SECRETS, Api
from tests.fakes.resend import FakeResend
from tests.helpers import create_user, stripe_event, stripe_signature

STRIPE_KEY = "sk_test_planted_7d3f9a2c5e8b1d4f6a0c"
DATABASE_PASSWORD = "planted-db-password-3e9c1a7f"
PLANTED = {**PRODUCTION_SECRETS, "stripe_secret_key": STRIPE_KEY}


def leaked(said: list[str], caplog: pytest.LogCaptureFixture) -> list[str]:
    text = "\n".join([*said, caplog.text, *(str(r.args) for r in caplog.records)])
    values = [*PLANTED.values(), DATABASE_PASSWORD]
    return [v for v in values if v in text or v[-12:] in text]


def record(said: list[str], response: requests.Response) -> requests.Response:
    said.append(f"{response.status_code} {dict(response.headers)} {response.text}")
    return response


def webhook_paths(api: Api, said: list[str]) -> None:
    body = stripe_event("invoice.paid", {"customer": "cus_1"})
    for header in (
        "garbage",
        stripe_signature(body, secret="whsec_attacker"),
        stripe_signature(body, secret=PLANTED["stripe_webhook_secret"], timestamp=1),
    ):
        answer = record(
            said, api.post("/api/webhook/payments", data=body, headers={"Stripe-Signature": header})
        )
        assert answer.status_code == 400


def token_paths(api: Api, said: list[str], user: str) -> None:
    for claims in (
        {"secret": "another-secret-of-at-least-32-characters"},
        {"issuer": "https://evil.example/auth/v1"},
        {"sub": "not-a-user"},
        {"exp_in": -3600},
    ):
        token = api.token(**{"sub": user, "email": "a@example.com", **claims})
        answer = api.post(
            "/api/payments/create-portal",
            json={"returnUrl": "https://shop.acme.dev/x"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert record(said, answer).status_code == 401


def provider_paths(
    api: Api, said: list[str], user: str, stripe: StripeStandIn, resend: FakeResend
) -> None:
    headers = {"Authorization": f"Bearer {api.token(sub=user, email='admin@example.com')}"}
    stripe.refuse_checkout = True
    checkout = {
        "priceId": "price_demo_starter_one_time",
        "mode": "payment",
        "successUrl": "https://shop.acme.dev/ok",
        "cancelUrl": "https://shop.acme.dev/no",
    }
    record(said, api.post("/api/payments/create-checkout", json=checkout, headers=headers))
    resend.failures_left = 100
    record(said, api.get("/api/test-email?type=new-signup", headers=headers))
    record(said, api.post("/api/github/access", json={"username": "octocat"}, headers=headers))
    # Both providers were asked, with the planted keys, and failed.
    assert stripe.requests
    assert resend.server.requests
    assert '"success":false' in said[-2].replace(" ", "")


def test_no_secret_in_logs_or_answers(
    production_api: Callable[..., Api],
    db: Database,
    fakes: tuple[StripeStandIn, AuthStandIn],
    resend: FakeResend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    seed_demo_products(db)
    user = create_user(db, "admin@example.com")
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = true where id = %s", (user,))
    said: list[str] = []
    with caplog.at_level(logging.DEBUG):
        api = production_api(enable_test_email=True, stripe_secret_key=STRIPE_KEY)
        webhook_paths(api, said)
        token_paths(api, said, user)
        provider_paths(api, said, user, fakes[0], resend)
        down = production_api(
            database_url=f"postgresql://app:{DATABASE_PASSWORD}@127.0.0.1:9/postgres",
            stripe_secret_key=STRIPE_KEY,
        )
        record(said, down.post("/api/lead", json={"email": "x@example.com"}))
        token = down.token(sub=user, email="admin@example.com")
        portal = down.post(
            "/api/payments/create-portal",
            json={"returnUrl": "https://shop.acme.dev/x"},
            headers={"Authorization": f"Bearer {token}"},
        )
        record(said, portal)
    assert said[-1].startswith(("500 ", "503 "))
    assert "database" in caplog.text.lower() or "connection" in caplog.text.lower()
    assert leaked(said, caplog) == []


def test_the_search_would_find_a_leak(caplog: pytest.LogCaptureFixture) -> None:
    # The check above is only as good as its search: a planted value in a log line is found.
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("anything").warning("oops %s", PLANTED["resend_api_key"])
    assert leaked([], caplog) == [PLANTED["resend_api_key"]]
