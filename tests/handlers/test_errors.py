"""DESIGN.md's error conventions: JSON errors, never an HTML page or a 500 for bad input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from adapters.db.pool import Database
from tests.conftest import Api


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


def test_oversized_body_is_413(api: Api) -> None:
    big = b'{"email": "' + b"a" * (1024 * 1024 + 10) + b'"}'
    response = api.post("/api/lead", data=big, headers={"Content-Type": "application/json"})
    assert_json_error(response, 413)


def test_unknown_route_is_json_404(api: Api) -> None:
    assert assert_json_error(api.get("/nope"), 404) == "Not found"


def test_wrong_method_is_json_405(api: Api) -> None:
    response = api.get("/api/lead")
    assert assert_json_error(response, 405) == "Method not allowed"
    assert "POST" in response.headers["Allow"]


def test_unexpected_failure_is_500_without_details(api_factory: Callable[..., Api]) -> None:
    # A database that cannot be reached is an unexpected fault, not the caller's.
    api = api_factory(database_url="postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    response = api.get("/api/products/public")
    assert assert_json_error(response, 500) == "Internal server error"
    assert "127.0.0.1" not in response.text


@pytest.mark.parametrize("path", ["/healthz", "/api/health"])
def test_health(api: Api, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
