"""POST /api/github/access: a buyer of a `github` product is invited to its repository."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.conftest import Api
from tests.fakes.github import FakeGitHub
from tests.helpers import HANG_GUARD, create_user

REPO = "example-org/saas-starter-pro"


def buyer(
    db: Database,
    *,
    product: str = "price_demo_pro_github",
    paid: bool = True,
    refunded: bool = False,
    email: str = "ada@example.com",
) -> str:
    seed_demo_products(db)
    user = create_user(db, email, name="Ada Lovelace")
    with db.transaction() as conn:
        conn.execute(  # as the access cycle records it: the buyer, and their own account
            "insert into public.purchases"
            " (user_id, account_id, product_id, stripe_checkout_session_id, paid, refunded_at)"
            " select %s, a.id, pr.id, %s, %s, case when %s then now() end"
            " from public.products pr, public.accounts a"
            " where pr.stripe_price_id = %s and a.owner_id = %s and a.kind = 'personal'",
            (user, f"cs_{user}", paid, refunded, product, user),
        )
    return user


def grants(db: Database) -> list[tuple[str, str]]:
    rows = db.fetch_all("select user_id::text, github_username from public.github_grants")
    return [(r["user_id"], r["github_username"]) for r in rows]


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
    assert grants(db) == [(user, "octocat")]
    assert gh_api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
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
        (None, "GitHub username is required (username)"),
        ("bad name", "GitHub username is not valid (username)"),
        ("-dash", "GitHub username is not valid (username)"),
        ("x" * 40, "GitHub username is not valid (username)"),
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
    assert response.json() == {"error": "GitHub has no user 'nobody-here' (username)"}
    assert grants(db) == []


@pytest.mark.parametrize(
    "purchase", [{"paid": False}, {"refunded": True}, {"product": "price_demo_starter_one_time"}]
)
def test_only_a_paid_unrefunded_repository_purchase_entitles(
    gh_api: Api, github: FakeGitHub, db: Database, purchase: dict[str, Any]
) -> None:
    # An `unpaid` checkout (a bank debit that may never arrive) once sufficed.
    response = request_access(gh_api, buyer(db, **purchase), "octocat")
    assert response.status_code == 403
    assert response.json() == {"error": "No paid repository purchase found for this account"}
    assert github.server.requests == []
    assert grants(db) == []


def test_one_purchase_one_github_account(gh_api: Api, github: FakeGitHub, db: Database) -> None:
    user = buyer(db)
    assert request_access(gh_api, user, "octocat").status_code == 200
    for other in ("hubot", "mallory"):
        response = request_access(gh_api, user, other)
        assert response.status_code == 409
        assert response.json() == {
            "error": "Repository access for this purchase was granted to GitHub user 'octocat'"
        }
    assert request_access(gh_api, user, "OctoCat").status_code == 200
    invited = {r.path.rsplit("/", 1)[-1] for r in github.server.requests if r.method == "PUT"}
    assert invited == {"octocat", "OctoCat"}
    assert grants(db) == [(user, "octocat")]


def test_racing_requests_for_two_accounts_grant_one(
    gh_api: Api, github: FakeGitHub, db: Database
) -> None:
    user = buyer(db)
    names = [f"user{n}" for n in range(8)]
    github.known_users |= set(names)
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda name: request_access(gh_api, user, name).status_code, names))
    assert sorted(codes) == [200] + [409] * 7
    [(_, winner)] = grants(db)
    assert [r.path for r in github.server.requests if r.method == "PUT"] == [
        f"/repos/{REPO}/collaborators/{winner}"
    ]


def test_a_failed_invitation_leaves_the_purchase_free(gh_api: Api, db: Database) -> None:
    user = buyer(db)
    assert request_access(gh_api, user, "nobody-here").status_code == 400
    assert request_access(gh_api, user, "octocat").status_code == 200
    assert grants(db) == [(user, "octocat")]


def test_without_a_github_token_is_503(api: Api, db: Database) -> None:
    response = request_access(api, buyer(db), "octocat")
    assert response.status_code == 503
    assert "GITHUB_TOKEN" in response.json()["error"]


def test_a_teams_repository_reaches_each_seated_member_and_leaves_with_them(
    gh_api: Api, github: FakeGitHub, db: Database
) -> None:
    from tests.teams.test_routes import Person, join, new_team

    seed_demo_products(db)
    ada = Person(gh_api, db, "ada@example.com", "Ada")
    team = new_team(ada)
    grace, eve = Person(gh_api, db, "grace@example.com"), Person(gh_api, db, "eve@example.com")
    join(gh_api, team, ada, grace)
    github.known_users |= {"ada-gh", "grace-gh", "someone-else", "eve"}
    with db.transaction() as conn:
        conn.execute(
            "insert into public.purchases (user_id, account_id, product_id,"
            " stripe_checkout_session_id, paid) select %s, %s, id, 'cs_team_repo', true"
            " from public.products where stripe_price_id = 'price_demo_pro_github'",
            (ada.id, team),
        )

    for person, login in ((ada, "ada-gh"), (grace, "grace-gh")):
        answer = person.call("POST", "/api/github/access", {"username": login, "teamId": team})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"success": True, "repositories": [REPO]}
    assert {(REPO, "ada-gh"), (REPO, "grace-gh")} <= github.collaborators
    # Without teamId the route finds the seat's repository too; one GitHub account per seat.
    again = grace.call("POST", "/api/github/access", {"username": "grace-gh"})
    assert again.status_code == 200
    other = grace.call("POST", "/api/github/access", {"username": "someone-else", "teamId": team})
    assert other.status_code == 409
    assert (
        eve.call("POST", "/api/github/access", {"username": "eve", "teamId": team}).status_code
        == 404
    )
    assert eve.call("POST", "/api/github/access", {"username": "eve"}).status_code == 403

    assert grace.call("DELETE", f"/api/teams/{team}/members/{grace.id}").status_code == 204
    assert (REPO, "grace-gh") not in github.collaborators
    assert (REPO, "ada-gh") in github.collaborators
    assert github.server.calls("DELETE", f"/repos/{REPO}/collaborators/grace-gh")
    assert db.fetch_all("select user_id::text from public.team_github_grants") == [
        {"user_id": ada.id}
    ]
