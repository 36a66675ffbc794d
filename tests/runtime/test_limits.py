"""Per-client limits: 429 with Retry-After and a JSON error, keyed by the address Cloud Run saw."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from adapters.db.pool import Database
from config import Settings
from main import create_app
from runtime.limits import ROUTE_LIMITS
from runtime.openapi import document
from tests.conftest import Api

# One request to each limited route; what it answers below the limit does not matter here.
REQUESTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "rate_limit_lead": ("POST", "/api/lead", {"json": {"email": "x@example.com"}}),
    "rate_limit_sign_in": ("GET", "/api/auth/callback", {}),
    "rate_limit_checkout": ("POST", "/api/payments/create-checkout", {"json": {}}),
    "rate_limit_portal": ("POST", "/api/payments/create-portal", {"json": {}}),
    "rate_limit_github_access": ("POST", "/api/github/access", {"json": {}}),
    "rate_limit_me": ("GET", "/api/me", {}),
    "rate_limit_complete_checkout": ("POST", "/api/payments/complete-checkout", {"json": {}}),
    "rate_limit_test_email": ("GET", "/api/test-email", {"params": {"type": "nope"}}),
    "rate_limit_teams": ("POST", "/api/teams", {"json": {}}),
    # The path as the document names it: any id reaches the route, and the limit counts first.
    "rate_limit_invitations": ("POST", "/api/teams/{teamId}/invitations", {"json": {}}),
}
# Routes that share the limit of one above (runtime/limits.py), as the document names them.
SHARING = {
    "/api/invitations/accept": "rate_limit_teams",
    "/api/invitations/lookup": "rate_limit_teams",
    "/api/me/export": "rate_limit_me",
    "/api/me/credits/top-up": "rate_limit_me",
    "/api/leads/remove": "rate_limit_lead",
    "/api/teams/{teamId}/invitations/{invitationId}/resend": "rate_limit_invitations",
    "/api/teams/{teamId}/seats": "rate_limit_checkout",
    "/api/payments/preview-change": "rate_limit_checkout",
    "/api/payments/change-plan": "rate_limit_checkout",
    "/api/payments/cancel": "rate_limit_checkout",
    "/api/payments/resume": "rate_limit_checkout",
}


def send(api: Api, setting: str, **kwargs: Any) -> Any:
    method, path, extra = REQUESTS[setting]
    call = api.post if method == "POST" else api.get
    return call(path, **extra, **kwargs)


def assert_limited(response: Any) -> None:
    assert response.status_code == 429
    assert response.json() == {"error": "Too many requests; try again later"}
    assert 1 <= int(response.headers["Retry-After"]) <= 60


def test_every_abusable_route_is_covered() -> None:
    assert set(REQUESTS) == set(ROUTE_LIMITS.values())
    assert set(SHARING.values()) <= set(REQUESTS)


@pytest.mark.parametrize("setting", sorted(REQUESTS))
def test_each_route_answers_429_past_its_limit(
    api_factory: Callable[..., Api], setting: str
) -> None:
    api = api_factory(**{setting: "2/minute"})
    for _ in range(2):
        assert send(api, setting).status_code != 429
    assert_limited(send(api, setting))
    # Other routes keep their own count.
    other = next(s for s in sorted(REQUESTS) if s != setting)
    assert send(api, other).status_code != 429


def test_limited_leads_are_not_stored(api_factory: Callable[..., Api], db: Database) -> None:
    # 500 leads once went in within 1.3 s.
    api = api_factory(rate_limit_lead="3/minute")
    codes = [
        api.post("/api/lead", json={"email": f"lead{n}@example.com"}).status_code for n in range(10)
    ]
    assert codes == [200] * 3 + [429] * 7
    assert len(db.fetch_all("select 1 from public.leads")) == 3


def forwarded(chain: str) -> dict[str, str]:
    return {"X-Forwarded-For": chain}


def test_the_client_is_the_address_cloud_run_appended(api_factory: Callable[..., Api]) -> None:
    api = api_factory(rate_limit_lead="2/minute", trusted_proxy_hops=1)
    lead = {"email": "x@example.com"}
    # Whatever the client writes first, Cloud Run appends the address it saw last.
    for spoof in ("198.51.100.1", "198.51.100.2"):
        headers = forwarded(f"{spoof}, 203.0.113.7")
        assert api.post("/api/lead", json=lead, headers=headers).status_code == 200
    assert_limited(api.post("/api/lead", json=lead, headers=forwarded("1.1.1.1, 203.0.113.7")))
    assert_limited(api.post("/api/lead", json=lead, headers=forwarded("203.0.113.7")))
    # Another client, and the direct connection, have counts of their own.
    assert api.post("/api/lead", json=lead, headers=forwarded("203.0.113.8")).status_code == 200
    assert api.post("/api/lead", json=lead).status_code == 200


def test_without_trusted_hops_the_header_is_ignored(api_factory: Callable[..., Api]) -> None:
    api = api_factory(rate_limit_lead="1/minute", trusted_proxy_hops=0)
    lead = {"email": "x@example.com"}
    assert api.post("/api/lead", json=lead, headers=forwarded("203.0.113.1")).status_code == 200
    assert_limited(api.post("/api/lead", json=lead, headers=forwarded("203.0.113.2")))


def test_the_document_names_429_on_each_limited_route() -> None:
    paths = document(create_app(Settings(enable_test_email=True, app_env="development")))["paths"]
    limited = {
        path for path, ops in paths.items() for op in ops.values() if "429" in op["responses"]
    }
    assert limited == {path for _, path, _ in REQUESTS.values()} | set(SHARING)
