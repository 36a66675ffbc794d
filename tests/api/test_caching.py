"""What a shared cache in front of the API may keep: with CORS on, every answer varies by Origin
(allowed, refused or absent alike); an answer that read who is calling is never kept."""

from __future__ import annotations

from collections.abc import Callable

import requests
from werkzeug.http import parse_cache_control_header, parse_set_header

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.conftest import Api
from tests.helpers import create_user

FRONTEND = "https://app.example.com"
STRANGER = "https://evil.example.net"


def varies_by(response: requests.Response) -> set[str]:
    return {v.lower() for v in parse_set_header(response.headers.get("Vary"))}


def never_kept(response: requests.Response) -> bool:
    control = parse_cache_control_header(response.headers.get("Cache-Control"))
    return bool(control.no_store)


def test_every_answer_varies_by_origin_with_one_allowed_origin(
    api_factory: Callable[..., Api], db: Database
) -> None:
    # One origin is the case flask-cors leaves without `Vary`: its ACAO is always that origin,
    # but a refused or absent origin's answer carries none.
    seed_demo_products(db)
    api = api_factory(cors_origins=FRONTEND)
    token = api.token(sub=create_user(db, "cors@example.com"), email="cors@example.com")
    asks: list[Callable[[dict[str, str]], requests.Response]] = [
        lambda h: api.get("/api/products/public", headers=h),
        lambda h: api.get("/api/me", headers={**h, "Authorization": f"Bearer {token}"}),
        lambda h: api.get("/api/me", headers=h),
        lambda h: api.post("/api/lead", json={"email": "not an address"}, headers=h),
        lambda h: api.get("/api/no-such-route", headers=h),
        lambda h: api.get("/api/openapi.json", headers=h),
        lambda h: api.options("/api/me", headers={**h, "Access-Control-Request-Method": "GET"}),
    ]
    for ask in asks:
        for origin in (FRONTEND, STRANGER, None):
            response = ask({"Origin": origin} if origin else {})
            where = f"{response.request.method} {response.url} from {origin}"
            assert "origin" in varies_by(response), where
            allowed = response.headers.get("Access-Control-Allow-Origin")
            if origin is not None:  # without one, flask-cors names the one origin anyway
                assert allowed == (FRONTEND if origin == FRONTEND else None), where


def test_the_public_products_are_kept_a_minute_per_origin(
    api_factory: Callable[..., Api], db: Database
) -> None:
    seed_demo_products(db)
    api = api_factory(cors_origins=f"{FRONTEND}, https://admin.example.com")
    for origin in (FRONTEND, STRANGER):
        response = api.get("/api/products/public", headers={"Origin": origin})
        assert response.status_code == 200
        assert response.headers["Cache-Control"] == "public, max-age=60"
        # flask-cors names Origin itself for several origins: named once, not twice.
        assert response.raw.headers.getlist("Vary") == ["Origin"]
        # The same for every caller: no Cookie or Authorization in what it varies by.
        assert varies_by(response) == {"origin"}


def test_without_cors_nothing_varies_by_origin(api: Api, db: Database) -> None:
    seed_demo_products(db)
    response = api.get("/api/products/public", headers={"Origin": FRONTEND})
    assert "origin" not in varies_by(response)
    assert "Access-Control-Allow-Origin" not in response.headers


def test_an_answer_that_read_the_caller_is_never_kept(api: Api, db: Database) -> None:
    user = create_user(db, "me@example.com")
    signed_in = {"Authorization": f"Bearer {api.token(sub=user, email='me@example.com')}"}
    bad = {"Authorization": "Bearer not-a-token"}
    answers = {
        "me, signed in": api.get("/api/me", headers=signed_in),
        "me, a guest": api.get("/api/me"),
        "me, a bad token": api.get("/api/me", headers=bad),
        "portal, a guest": api.post(
            "/api/payments/create-portal", json={"returnUrl": "https://shop.example.com/a"}
        ),
        "github, a bad token": api.post(
            "/api/github/access", json={"username": "octocat"}, headers=bad
        ),
        "checkout, signed in": api.post(
            "/api/payments/create-checkout",
            json={
                "priceId": "price_missing",
                "successUrl": "https://shop.example.com/ok",
                "cancelUrl": "https://shop.example.com/no",
                "mode": "payment",
            },
            headers=signed_in,
        ),
        "sample e-mails": api.get("/api/test-email?type=new-signup"),
        "sign-in callback": api.get("/api/auth/callback"),
    }
    for name, response in answers.items():
        assert response.status_code < 500, name
        assert never_kept(response), f"{name}: {response.headers.get('Cache-Control')}"


def test_answers_that_read_no_caller_keep_their_own_caching(api: Api, db: Database) -> None:
    seed_demo_products(db)
    signed_in = {"Authorization": "Bearer whatever", "Cookie": "sb-x-auth-token=whatever"}
    response = api.get("/api/products/public", headers=signed_in)
    assert response.headers["Cache-Control"] == "public, max-age=60"
    assert "Cache-Control" not in api.get("/healthz", headers=signed_in).headers
