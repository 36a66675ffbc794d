"""Supabase as it is today: `sb_` API keys, ES256 signing keys with a standby and rotation, and
a project part-way through the move from the legacy JWT secret (both kinds of tokens live).

Through the API over HTTP (a signed-in checkout names its buyer; a bad token is 401), against
the Supabase Auth stand-in (dev/auth_stand_in.py), which behaves as today's gateway does."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Callable
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization

from adapters.db.pool import Database
from adapters.supabase_auth import encode_value, read_session, storage_key
from config import SUPABASE_LOCAL_KEYS, Settings, SettingsError, supabase_key_role
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.test_subscriber import completed, post_event
from tests.billing.test_payments import ONE_TIME, URLS, checkout
from tests.conftest import Api
from tests.fakes.supabase import (
    JWT_SECRET,
    PUBLISHABLE_KEY,
    SECRET_KEY,
    hs256_token,
)
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for
from tests.test_config import PRODUCTION

PURCHASE = {"priceId": ONE_TIME, "mode": "payment", **URLS}


@pytest.fixture
def supabase(fakes: tuple[StripeStandIn, AuthStandIn]) -> AuthStandIn:
    return fakes[1]


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, AuthStandIn], db: Database) -> StripeStandIn:
    """Stripe's stand-in, with products to buy."""
    seed_demo_products(db)
    return fakes[0]


def signed_in_as(api: Api, stripe: StripeStandIn, token: str) -> str | None:
    """Who the checkout says bought, or None when the token was refused (401)."""
    before = len(stripe.checkout_params())
    response = checkout(api, PURCHASE, token)
    if response.status_code == 401:
        return None
    assert response.status_code == 200, response.text
    buyer: str | None = stripe.checkout_params()[before].get("client_reference_id")
    return buyer


def test_mid_migration_both_kinds_of_tokens_are_accepted(
    api_factory: Callable[..., Api],
    supabase: AuthStandIn,
    db: Database,
    stripe: StripeStandIn,
) -> None:
    api = api_factory(supabase_jwt_secret=JWT_SECRET)  # legacy secret still set
    user = create_user(db, "both@example.com")
    legacy = hs256_token(sub=user, email="both@example.com", issuer=supabase.issuer)
    signed = supabase.es256_token(sub=user, email="both@example.com")

    assert signed_in_as(api, stripe, legacy) == user
    assert signed_in_as(api, stripe, signed) == user


def test_after_the_migration_hs256_tokens_are_refused(
    api_factory: Callable[..., Api],
    supabase: AuthStandIn,
    db: Database,
    stripe: StripeStandIn,
) -> None:
    api = api_factory(supabase_jwt_secret=None)  # the secret removed
    user = create_user(db, "after@example.com")
    legacy = hs256_token(sub=user, email="after@example.com", issuer=supabase.issuer)

    assert signed_in_as(api, stripe, legacy) is None
    assert signed_in_as(api, stripe, supabase.es256_token(sub=user, email="a@b.c")) == user


def test_a_rotated_key_is_accepted_without_a_restart(
    api_factory: Callable[..., Api],
    supabase: AuthStandIn,
    db: Database,
    stripe: StripeStandIn,
) -> None:
    api = api_factory(supabase_jwt_secret=None)
    user = create_user(db, "rotate@example.com")
    assert signed_in_as(api, stripe, supabase.es256_token(sub=user, email="r@e.c")) == user

    # The standby key was already published: the first rotation needs no new fetch.
    fetches = len(supabase.calls("GET", "/auth/v1/.well-known/jwks.json"))
    supabase.rotate()
    assert signed_in_as(api, stripe, supabase.es256_token(sub=user, email="r@e.c")) == user
    assert len(supabase.calls("GET", "/auth/v1/.well-known/jwks.json")) == fetches

    # A second rotation: a key the service has never seen is fetched, within seconds.
    supabase.rotate()
    fresh = supabase.es256_token(sub=user, email="r@e.c")
    wait_for(lambda: signed_in_as(api, stripe, fresh) == user, interval=1)


def test_unknown_key_ids_cannot_make_a_fetch_per_request(
    api_factory: Callable[..., Api],
    supabase: AuthStandIn,
    db: Database,
    stripe: StripeStandIn,
) -> None:
    api = api_factory(supabase_jwt_secret=None)
    user = create_user(db, "flood@example.com")
    assert signed_in_as(api, stripe, supabase.es256_token(sub=user, email="f@e.c")) == user
    before = len(supabase.calls("GET", "/auth/v1/.well-known/jwks.json"))
    claims = jwt.decode(
        supabase.es256_token(sub=user, email="f@e.c"), options={"verify_signature": False}
    )
    for _ in range(20):
        forged = jwt.encode(
            claims, supabase.signing_key, algorithm="ES256", headers={"kid": uuid.uuid4().hex}
        )
        assert signed_in_as(api, stripe, forged) is None
    assert len(supabase.calls("GET", "/auth/v1/.well-known/jwks.json")) - before <= 1


def test_no_algorithm_confusion_and_no_none(
    api_factory: Callable[..., Api],
    supabase: AuthStandIn,
    db: Database,
    stripe: StripeStandIn,
) -> None:
    api = api_factory(supabase_jwt_secret=None)
    user = create_user(db, "confused@example.com")
    claims = jwt.decode(
        supabase.es256_token(sub=user, email="c@e.c"), options={"verify_signature": False}
    )
    public_pem = supabase.signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # HMAC "signed" with the published public key as its secret.
    header = {"alg": "HS256", "kid": supabase.kid, "typ": "JWT"}
    confused = _hmac(claims, public_pem, header)
    unsigned = f"{_part({'alg': 'none', 'typ': 'JWT'})}.{_part(claims)}."
    assert signed_in_as(api, stripe, confused) is None
    assert signed_in_as(api, stripe, unsigned) is None
    # The same with the legacy secret still set.
    mid = api_factory(supabase_jwt_secret=JWT_SECRET)
    assert signed_in_as(mid, stripe, confused) is None


def _part(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _hmac(claims: dict[str, Any], key: bytes, header: dict[str, str]) -> str:
    """What PyJWT refuses to make (a PEM as an HMAC key): built by hand, as an attacker would."""
    signing_input = f"{_part(header)}.{_part(claims)}"
    digest = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_todays_keys_are_read_under_their_names_and_the_legacy_ones_still(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUPABASE_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("SUPABASE_PUBLISHABLE_KEY", PUBLISHABLE_KEY)
    today = Settings()
    assert today.supabase_secret_key is not None
    assert today.supabase_secret_key.get_secret_value() == SECRET_KEY
    monkeypatch.delenv("SUPABASE_SECRET_KEY")
    monkeypatch.delenv("SUPABASE_PUBLISHABLE_KEY")
    monkeypatch.setenv("SUPABASE_SERVICE_ROLE_KEY", "legacy-service-role")
    monkeypatch.setenv("SUPABASE_ANON_KEY", "legacy-anon")
    legacy = Settings()
    assert legacy.supabase_secret_key is not None
    assert legacy.supabase_secret_key.get_secret_value() == "legacy-service-role"
    assert legacy.supabase_publishable_key is not None


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SUPABASE_PUBLISHABLE_KEY", SECRET_KEY),
        # The local stack's service_role JWT, under the legacy anon name.
        (
            "SUPABASE_ANON_KEY",
            next(
                k
                for k in SUPABASE_LOCAL_KEYS
                if k.startswith("eyJ") and supabase_key_role(k) == "secret"
            ),
        ),
        ("SUPABASE_SECRET_KEY", PUBLISHABLE_KEY),
    ],
)
def test_a_key_in_the_wrong_place_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match="holds a"):
        Settings()


@pytest.mark.parametrize("key", sorted(SUPABASE_LOCAL_KEYS))
def test_production_refuses_the_supabase_cli_local_keys(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    role = supabase_key_role(key)
    variable = "SUPABASE_SECRET_KEY" if role == "secret" else "SUPABASE_PUBLISHABLE_KEY"
    for name, value in {**PRODUCTION, variable: key}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"unsafe: {variable}"):
        Settings()


def test_guest_accounts_go_through_supabase_auth_with_a_secret_key(
    api_factory: Callable[..., Api], supabase: AuthStandIn, db: Database
) -> None:
    api = api_factory(supabase_secret_key=SECRET_KEY, supabase_publishable_key=PUBLISHABLE_KEY)
    seed_demo_products(db)
    body = stripe_event(
        "checkout.session.completed", completed(None, email="guest-today@example.com")
    )
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [created] = supabase.calls("POST", "/auth/v1/admin/users")
    assert created.headers["Apikey"] == SECRET_KEY
    assert created.headers["Authorization"] in (f"Bearer {SECRET_KEY}", None)
    assert db.fetch_all("select 1 from auth.users where email = 'guest-today@example.com'"), (
        "the buyer's account is made in Supabase Auth"
    )


def test_the_gateway_refuses_a_bearer_that_is_neither_the_key_nor_a_jwt(
    supabase: AuthStandIn,
) -> None:
    url = supabase.url + "/auth/v1/admin/users"
    wrong = requests.post(
        url,
        json={"email": "x@example.com"},
        headers={"apikey": SECRET_KEY, "Authorization": f"Bearer {PUBLISHABLE_KEY}"},
        timeout=HANG_GUARD,
    )
    assert wrong.status_code == 401
    assert wrong.json() == {"message": "Invalid authorization header"}


def test_a_project_without_its_secret_key_says_where_accounts_go(
    settings_factory: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    from runtime.container import Container

    with caplog.at_level("WARNING"):
        Container(settings_factory(supabase_secret_key=None)).subscriber("access")
    [said] = [r.getMessage() for r in caplog.records if "SUPABASE_SECRET_KEY" in r.getMessage()]
    assert "made in the local database, not in Supabase Auth" in said
    caplog.clear()
    with caplog.at_level("WARNING"):
        Container(settings_factory(supabase_secret_key=SECRET_KEY)).subscriber("access")
    assert not [r for r in caplog.records if "SUPABASE_SECRET_KEY" in r.getMessage()]


def test_the_sign_in_callback_exchanges_its_code_with_a_publishable_key(
    api_factory: Callable[..., Api], supabase: AuthStandIn
) -> None:
    api = api_factory(supabase_publishable_key=PUBLISHABLE_KEY)
    user = str(uuid.uuid4())
    code = supabase.issue_code(verifier="v-today", user_id=user, email="today@example.com")
    key = storage_key(supabase.url)
    response = api.get(
        f"/api/auth/callback?code={code}",
        cookies={f"{key}-code-verifier": encode_value("v-today")},
    )
    assert response.status_code == 302
    session = read_session(key, {c.name: c.value or "" for c in response.cookies})
    assert session is not None
    assert session["user"]["id"] == user
    [call] = supabase.calls("POST", "/auth/v1/token")
    assert call.headers["Apikey"] == PUBLISHABLE_KEY
