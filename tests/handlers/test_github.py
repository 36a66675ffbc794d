"""POST /api/github/access: a buyer of a `github` product is invited to its repository."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.db.pool import Database
from adapters.db.products import seed_demo_products
from tests.conftest import Api, serving
from tests.fakes.github import FakeGitHub
from tests.helpers import create_user

REPO = "example-org/saas-starter-pro"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    yield from serving(FakeGitHub())


@pytest.fixture
def gh_api(api_factory: Callable[..., Api], github: FakeGitHub) -> Api:
    return api_factory(github_token="ghp_test", github_api_url=github.server.url)


def buyer(db: Database, *, product: str = "price_demo_pro_github") -> str:
    seed_demo_products(db)
    user = create_user(db, "ada@example.com", name="Ada Lovelace")
    with db.transaction() as conn:
        conn.execute(
            "insert into public.purchases (user_id, product_id, stripe_checkout_session_id)"
            " select %s, id, 'cs_gh' from public.products where stripe_price_id = %s",
            (user, product),
        )
    return user


def request_access(api: Api, user: str | None, username: Any) -> Any:
    headers = (
        {"Authorization": f"Bearer {api.token(sub=user, email='ada@example.com')}"} if user else {}
    )
    return api.post("/api/github/access", json={"username": username}, headers=headers)


def test_a_buyer_is_invited_once_and_told_once(
    gh_api: Api, github: FakeGitHub, db: Database
) -> None:
    user = buyer(db)
    for _ in range(2):
        response = request_access(gh_api, user, "@octocat")
        assert response.status_code == 200
        assert response.json() == {"success": True, "repositories": [REPO]}
    calls = github.server.calls("PUT", f"/repos/{REPO}/collaborators/octocat")
    assert calls[0].json() == {"permission": "pull"}
    assert calls[0].headers["Authorization"] == "token ghp_test"
    assert (REPO, "octocat") in github.collaborators
    assert db.fetch_all("select github_username from public.purchases") == [
        {"github_username": "octocat"}
    ]
    assert gh_api.container.bus.wait_idle()  # type: ignore[attr-defined]
    mails = list(Path(gh_api.container.settings.email_outbox_dir).glob("*.eml"))
    assert len(mails) == 1
    text = mails[0].read_text()
    assert "git clone https://github.com/example-org/saas-starter-pro.git" in text


def test_signed_in_user_required(gh_api: Api) -> None:
    assert request_access(gh_api, None, "octocat").status_code == 401


def test_without_a_repository_purchase_is_403(
    gh_api: Api, github: FakeGitHub, db: Database
) -> None:
    user = buyer(db, product="price_demo_starter_one_time")
    response = request_access(gh_api, user, "octocat")
    assert response.status_code == 403
    assert github.server.requests == []


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (None, "GitHub username is required"),
        ("bad name", "GitHub username is not valid"),
        ("-dash", "GitHub username is not valid"),
        ("x" * 40, "GitHub username is not valid"),
    ],
)
def test_username_is_validated(
    gh_api: Api, github: FakeGitHub, db: Database, name: Any, message: str
) -> None:
    response = request_access(gh_api, buyer(db), name)
    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert github.server.requests == []


def test_an_unknown_github_account_is_400(gh_api: Api, db: Database) -> None:
    response = request_access(gh_api, buyer(db), "nobody-here")
    assert response.status_code == 400
    assert response.json() == {"error": "GitHub has no user 'nobody-here'"}
    assert db.fetch_all("select github_username from public.purchases") == [
        {"github_username": None}
    ]


def test_without_a_github_token_is_503(api: Api, db: Database) -> None:
    response = request_access(api, buyer(db), "octocat")
    assert response.status_code == 503
    assert "GITHUB_TOKEN" in response.json()["error"]
