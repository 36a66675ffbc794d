"""The error conventions: JSON errors, never an HTML page or a 500 for bad input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from adapters.db.pool import Database
from tests.conftest import Api
from tests.helpers import empty_database


def assert_json_error(response: object, status: int) -> str:
    assert response.status_code == status  # type: ignore[attr-defined]
    assert response.headers["Content-Type"].startswith("application/json")  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    assert isinstance(body["error"], str)
    assert body["error"]
    return str(body["error"])


@pytest.mark.parametrize(
    "path", ["/api/lead", "/api/payments/create-checkout", "/api/payments/create-portal"]
)
def test_malformed_json_is_400(api: Api, path: str) -> None:
    response = api.post(path, data=b'{"email": ', headers={"Content-Type": "application/json"})
    assert assert_json_error(response, 400) == "Malformed JSON body"


@pytest.mark.parametrize("body", [b"[]", b'"text"', b"42"])
def test_json_that_is_not_an_object_is_400(api: Api, body: bytes) -> None:
    response = api.post("/api/lead", data=body, headers={"Content-Type": "application/json"})
    assert assert_json_error(response, 400) == "JSON body must be an object"


def test_wrong_content_type_is_415(api: Api, db: Database) -> None:
    response = api.post(
        "/api/lead",
        data="email=a@b.com",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert "application/json" in assert_json_error(response, 415)
    assert db.fetch_all("select * from public.leads") == []


JSON_ROUTES = (
    "/api/lead",
    "/api/payments/create-checkout",
    "/api/payments/create-portal",
    "/api/github/access",
)


@pytest.mark.parametrize("path", JSON_ROUTES)
def test_a_small_route_refuses_a_large_body_with_413(api: Api, db: Database, path: str) -> None:
    big = b'{"email": "' + b"a" * (900 * 1024) + b'@example.com"}'
    response = api.post(path, data=big, headers={"Content-Type": "application/json"})
    assert_json_error(response, 413)
    assert db.fetch_all("select * from public.leads") == []


@pytest.mark.parametrize("path", JSON_ROUTES)
def test_deeply_nested_json_is_400_not_500(api: Api, path: str) -> None:
    nested = b'{"email": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = api.post(path, data=nested, headers={"Content-Type": "application/json"})
    assert assert_json_error(response, 400) == "Malformed JSON body"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/lead", {"email": "ada@example.com", "admin": True}),
        (
            "/api/payments/create-checkout",
            {
                "priceId": "price_demo_starter_one_time",
                "mode": "payment",
                "successUrl": "https://a.example/s",
                "cancelUrl": "https://a.example/c",
                "couponId": "FREE",
            },
        ),
        ("/api/payments/create-portal", {"returnUrl": "https://a.example/", "customer": "cus_1"}),
        ("/api/github/access", {"username": "octocat", "repository": "x/y"}),
    ],
)
def test_an_unknown_field_is_refused(
    api: Api, db: Database, path: str, body: dict[str, object]
) -> None:
    extra = next(
        iter(
            set(body)
            - {"email", "priceId", "mode", "successUrl", "cancelUrl", "returnUrl", "username"}
        )
    )
    response = api.post(path, json=body)
    assert assert_json_error(response, 400) == f"Unknown field '{extra}'"
    assert db.fetch_all("select * from public.leads") == []


def test_the_webhook_still_takes_a_large_event(api: Api) -> None:
    body = b'{"id": "evt_1", "padding": "' + b"x" * (200 * 1024) + b'"}'
    response = api.post(
        "/api/webhook/payments", data=body, headers={"Stripe-Signature": "t=1,v1=0"}
    )
    assert "too large" not in assert_json_error(response, 400), "refused for its signature"


def test_unknown_route_is_json_404(api: Api) -> None:
    assert assert_json_error(api.get("/nope"), 404) == "Not found"


def test_wrong_method_is_json_405(api: Api) -> None:
    response = api.get("/api/lead")
    assert assert_json_error(response, 405) == "Method not allowed"
    assert "POST" in response.headers["Allow"]


def test_a_database_that_is_down_is_503_with_retry_after(api_factory: Callable[..., Api]) -> None:
    api = api_factory(database_url="postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    response = api.get("/api/products/public")
    assert assert_json_error(response, 503).startswith("Service temporarily unavailable")
    assert response.headers["Retry-After"] == "5"
    assert "127.0.0.1" not in response.text


def test_unexpected_failure_is_500_without_details(
    api_factory: Callable[..., Api], database_url: str
) -> None:
    # A database without the schema: a fault of ours, not the caller's nor a passing outage.
    with empty_database(database_url) as url:
        api = api_factory(database_url=url)
        response = api.get("/api/products/public")
        api.container.close()
    assert assert_json_error(response, 500) == "Internal server error"
    assert "products" not in response.text


@pytest.mark.parametrize("path", ["/healthz", "/api/health"])
def test_health(api: Api, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
