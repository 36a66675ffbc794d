"""A lead removes itself by the signed link a mail to it carries: a GET shows a page asking to
confirm and removes nothing (link scanners prefetch); the confirming POST, or a mail client's
RFC 8058 one-click POST, removes it."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest

from accounts.leads import ONE_CLICK, removal_link, removal_token, unsubscribe_headers
from adapters.db.pool import Database
from config.site import DEV_LEAD_LINK_SECRET
from tests.conftest import Api

LEAD = "lead@example.com"


def leads(db: Database) -> list[str]:
    return [r["email"] for r in db.fetch_all("select email from public.leads order by email")]


def link_path(email: str = LEAD, key: str = DEV_LEAD_LINK_SECRET) -> str:
    parts = urlsplit(removal_link("https://shop.example.com", key, email))
    return f"{parts.path}?{parts.query}"


@pytest.fixture
def listed(api: Api, db: Database) -> Api:
    for email in (LEAD, "other@example.com"):
        assert api.post("/api/lead", json={"email": email}).status_code == 200
    return api


def test_a_get_shows_a_confirmation_and_removes_nothing(listed: Api, db: Database) -> None:
    page = listed.get(link_path())
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert "Remove lead@example.com from our list?" in page.text
    assert '<form method="post">' in page.text
    assert leads(db) == ["lead@example.com", "other@example.com"]


def test_the_confirming_post_removes_that_lead_alone(listed: Api, db: Database) -> None:
    done = listed.post(link_path())
    assert done.status_code == 200
    assert "lead@example.com is off our list" in done.text
    assert leads(db) == ["other@example.com"]
    # Again (a second click): still 200, nothing else goes; the page says it is not listed.
    assert listed.post(link_path()).status_code == 200
    assert "is not on our list" in listed.get(link_path()).text
    assert leads(db) == ["other@example.com"]


def test_a_mail_clients_one_click_post_removes_it(listed: Api, db: Database) -> None:
    link = removal_link("https://shop.example.com", DEV_LEAD_LINK_SECRET, LEAD)
    headers = unsubscribe_headers(link)
    assert headers == {"List-Unsubscribe": f"<{link}>", "List-Unsubscribe-Post": ONE_CLICK}
    response = listed.post(
        link_path(), data=ONE_CLICK, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 200
    assert leads(db) == ["other@example.com"]


def test_the_address_is_matched_ignoring_case(listed: Api, db: Database) -> None:
    assert listed.post(link_path("Lead@Example.com")).status_code == 200
    assert leads(db) == ["other@example.com"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        # Another address under this address's token, a token of another key, a cut token.
        (
            lambda: f"email=other@example.com&token={removal_token(DEV_LEAD_LINK_SECRET, LEAD)}",
            "This removal link is not valid (token)",
        ),
        (
            lambda: f"email={LEAD}&token={removal_token('another-key', LEAD)}",
            "This removal link is not valid (token)",
        ),
        (
            lambda: f"email={LEAD}&token={removal_token(DEV_LEAD_LINK_SECRET, LEAD)[:-1]}",
            "This removal link is not valid (token)",
        ),
        (lambda: f"email={LEAD}", "The link's token is required (token)"),
        (lambda: f"token={removal_token(DEV_LEAD_LINK_SECRET, LEAD)}", "Email is required (email)"),
    ],
)
def test_a_link_we_did_not_sign_removes_nothing(
    listed: Api, db: Database, query: Callable[[], str], message: str
) -> None:
    for call in (listed.get, listed.post):
        response = call(f"/api/leads/remove?{query()}")
        assert response.status_code == 400
        assert response.json() == {"error": message}
    assert leads(db) == ["lead@example.com", "other@example.com"]


def test_production_without_a_key_makes_and_takes_no_link(
    production_api: Callable[..., Api], db: Database
) -> None:
    api = production_api()
    assert api.container.settings.lead_link_key is None
    assert api.post(link_path()).status_code == 503


def test_a_link_under_the_configured_key(api_factory: Callable[..., Api], db: Database) -> None:
    api = api_factory(lead_link_secret="a-real-secret-of-this-deployment-0123456789")
    api.post("/api/lead", json={"email": LEAD})
    assert api.post(link_path()).status_code == 400  # the development key's link: refused
    key = "a-real-secret-of-this-deployment-0123456789"
    assert api.post(link_path(key=key)).status_code == 200
    assert leads(db) == []


def test_the_link_carries_the_address_and_its_token() -> None:
    query = parse_qs(
        urlsplit(removal_link("https://s.example.com/", "k", " Lead@Example.com")).query
    )
    assert query == {"email": [LEAD], "token": [removal_token("k", LEAD)]}
