"""GET /api/me over HTTP: what a user has, read by a frontend on another origin, with the
sign-in cookies set for a shared parent domain."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from adapters.db.pool import Database
from adapters.supabase_auth import encode_value
from config import Settings, SettingsError
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from tests.access.lifecycle_helpers import MONTHLY, post_event, session, settle, subscription
from tests.conftest import Api
from tests.helpers import create_user, stripe_event

FRONTEND = "https://app.example.com"
T0 = 1_790_000_000


def me(api: Api, token: str | None, **headers: str) -> Any:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return api.get("/api/me", headers=headers)


def test_a_guest_or_a_bad_token_gets_401(api: Api) -> None:
    assert me(api, None).status_code == 401
    assert me(api, None).json() == {"error": "Sign in required"}
    assert me(api, "not-a-token").status_code == 401


def test_a_new_user_has_nothing_yet(api: Api, db: Database) -> None:
    user = create_user(db, "new@example.com", name="Nell")
    answer = me(api, api.token(sub=user, email="new@example.com"))
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "private, no-store"
    assert answer.json() == {
        "id": user,
        "email": "new@example.com",
        "name": "Nell",
        "hasAccess": False,
        "portalAvailable": False,
        "entitlements": [],
        "features": [],
        "teams": [],
        "credits": [],
    }


def test_a_lifetime_purchase_and_an_ended_subscription(api: Api, db: Database) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    post_event(api, stripe_event("checkout.session.completed", session(ada), created=T0))
    trialing = subscription(status="trialing", trial_end=T0 + 14 * 86400, cancel_at_period_end=True)
    post_event(api, stripe_event("customer.subscription.created", trialing, created=T0 + 5))
    settle(api)

    body = me(api, api.token(sub=ada, email="ada@example.com")).json()
    assert body["hasAccess"] is True
    assert body["portalAvailable"] is True
    by_kind = {e["kind"]: e for e in body["entitlements"]}
    assert by_kind["purchase"]["product"]["name"] == "Starter Kit"
    assert by_kind["purchase"]["status"] == "paid"
    assert by_kind["purchase"]["active"] is True
    trial = by_kind["subscription"]
    assert (trial["status"], trial["active"], trial["cancelAtPeriodEnd"]) == (
        "trialing",
        True,
        True,
    )
    assert trial["priceId"] == MONTHLY
    assert trial["trialEnd"].startswith("2026-10-05")
    assert trial["currentPeriodEnd"].startswith("2026-12-31")
    # Told as a trial a buyer cancelled, not as a renewing payment; the purchase as kept.
    assert trial["label"] == "Free trial"
    assert trial["summary"] == (
        "A free trial until Oct 5, 2026, cancelled: it ends then and nothing is charged."
    )
    assert by_kind["purchase"]["summary"] == "A one-time purchase: yours to keep, nothing renews."

    ended = subscription(status="canceled", ended_at=T0 + 99)
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=T0 + 99))
    settle(api)
    body = me(api, api.token(sub=ada, email="ada@example.com")).json()
    assert body["hasAccess"] is True  # the lifetime purchase
    sub = next(e for e in body["entitlements"] if e["kind"] == "subscription")
    assert (sub["status"], sub["active"]) == ("canceled", False)
    assert sub["endedAt"] is not None
    assert sub["summary"] == "A subscription, ended on Sep 21, 2026."


def test_a_download_link_reaches_its_holder_through_the_api_alone(api: Api, db: Database) -> None:
    """The catalogue is public through the Data API, its download links are not: a guest, a
    signed-in stranger and the holder herself are refused the column there; `GET /api/me`
    gives the holder the link of what she holds."""
    import psycopg

    from tests.adapters.db.test_schema import as_role

    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    eve = create_user(db, "eve@example.com")
    post_event(api, stripe_event("checkout.session.completed", session(ada), created=T0))
    settle(api)

    body = me(api, api.token(sub=ada, email="ada@example.com")).json()
    [held] = body["entitlements"]
    assert held["product"]["downloadUrl"] == "https://example.com/downloads/starter-kit.zip"
    assert me(api, api.token(sub=eve, email="eve@example.com")).json()["entitlements"] == []
    for role, user in (("anon", None), ("authenticated", eve), ("authenticated", ada)):
        with as_role(db, role, user) as conn:
            names = conn.execute("select name from public.products where is_active").fetchall()
            assert "Starter Kit" in {r["name"] for r in names}
        with (
            as_role(db, role, user) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="products"),
        ):
            conn.execute("select download_url from public.products")
        with (
            as_role(db, role, user) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="products"),
        ):
            conn.execute("select * from public.products")  # what `select=*` asks for


def test_me_is_in_the_openapi_document(api: Api) -> None:
    document = api.get("/api/openapi.json").json()
    operation = document["paths"]["/api/me"]["get"]
    assert set(operation["responses"]) >= {"200", "401"}
    schema = document["components"]["schemas"]["MeAnswer"]
    assert set(schema["required"]) >= {"hasAccess", "entitlements", "portalAvailable", "features"}
    assert schema["properties"]["features"]["items"] == {"type": "string"}


def test_a_configured_origin_reads_me_with_credentials(
    api_factory: Callable[..., Api], db: Database
) -> None:
    api = api_factory(cors_origins=f"{FRONTEND}, https://admin.example.com")
    user = create_user(db, "cors@example.com")
    preflight = api.options(
        "/api/me",
        headers={
            "Origin": FRONTEND,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == FRONTEND
    assert preflight.headers["Access-Control-Allow-Credentials"] == "true"
    assert "authorization" in preflight.headers["Access-Control-Allow-Headers"].lower()

    answer = me(api, api.token(sub=user, email="cors@example.com"), Origin=FRONTEND)
    assert answer.status_code == 200
    assert answer.headers["Access-Control-Allow-Origin"] == FRONTEND
    assert answer.headers["Access-Control-Allow-Credentials"] == "true"
    assert "Origin" in answer.headers["Vary"]

    stranger = me(api, None, Origin="https://evil.example.net")
    assert "Access-Control-Allow-Origin" not in stranger.headers


def test_no_origin_is_allowed_by_default(api: Api) -> None:
    answer = api.options(
        "/api/me", headers={"Origin": FRONTEND, "Access-Control-Request-Method": "GET"}
    )
    assert "Access-Control-Allow-Origin" not in answer.headers


@pytest.mark.parametrize(
    "origins", ["*", "https://*.example.com", "https://app.example.com/path", "app.example.com"]
)
def test_only_exact_origins_are_accepted(
    settings_factory: Callable[..., Settings], origins: str
) -> None:
    with pytest.raises(SettingsError, match="CORS_ORIGINS"):
        settings_factory(cors_origins=origins)


def test_sign_in_cookies_go_to_the_shared_parent_domain(
    api_factory: Callable[..., Api], fakes: Any
) -> None:
    api = api_factory(cookie_domain=".Example.com")
    supabase: AuthStandIn = fakes[1]
    code = supabase.issue_code(
        verifier="v-1", user_id="9b0f3c1e-1f5a-4c55-9f8e-2f1a7d5e6c01", email="ada@example.com"
    )
    key = api.container.supabase_auth.cookie_name
    response = api.get(
        f"/api/auth/callback?code={code}",
        cookies={f"{key}-code-verifier": encode_value("v-1")},
    )
    assert response.status_code == 302
    set_cookies = response.raw.headers.getlist("Set-Cookie")
    assert set_cookies
    assert all("Domain=example.com" in header for header in set_cookies), set_cookies


def test_a_cookie_domain_must_be_a_domain(settings_factory: Callable[..., Settings]) -> None:
    with pytest.raises(SettingsError, match="COOKIE_DOMAIN"):
        settings_factory(cookie_domain="https://example.com/")
