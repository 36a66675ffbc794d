"""GET /api/test-email in production: an admin's token, and only to that admin or SUPPORT_EMAIL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from adapters.db.pool import Database
from tests.conftest import Api
from tests.fakes.resend import FakeResend
from tests.helpers import create_user

ADMIN = "admin@example.com"


@pytest.fixture
def prod(production_api: Callable[..., Api]) -> Api:
    return production_api(enable_test_email=True)


def user(db: Database, email: str, *, admin: bool) -> str:
    user_id = create_user(db, email)
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = %s where id = %s", (admin, user_id))
    return user_id


def ask(api: Api, query: str, user_id: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {api.token(sub=user_id, email='x')}"} if user_id else {}
    return api.get(f"/api/test-email?type=new-signup{query}", headers=headers)


def test_a_stranger_cannot_send(prod: Api, resend: FakeResend) -> None:
    # ENABLE_TEST_EMAIL=true in production once let anyone mail any address.
    response = ask(prod, "&email=victim@example.net")
    assert response.status_code == 401
    assert resend.delivered == []


def test_a_user_who_is_not_admin_cannot_send(prod: Api, db: Database, resend: FakeResend) -> None:
    member = user(db, "member@example.com", admin=False)
    response = ask(prod, "&email=member@example.com", member)
    assert response.status_code == 403
    assert response.json() == {"error": "Test e-mails are for admins"}
    assert resend.delivered == []


@pytest.mark.parametrize("query", ["", "&email=support@example.com", f"&email={ADMIN.upper()}"])
def test_an_admin_sends_to_themselves_or_support(
    prod: Api, db: Database, resend: FakeResend, query: str
) -> None:
    response = ask(prod, query, user(db, ADMIN, admin=True))
    assert response.status_code == 200
    assert response.json()["success"] is True
    [sent] = resend.delivered
    assert sent["to"][0].lower() in {"support@example.com", ADMIN}


def test_an_admin_cannot_mail_a_third_party(prod: Api, db: Database, resend: FakeResend) -> None:
    response = ask(prod, "&email=victim@example.net", user(db, ADMIN, admin=True))
    assert response.status_code == 403
    assert response.json() == {"error": "Test e-mails go only to your own address or SUPPORT_EMAIL"}
    assert resend.delivered == []


def test_the_route_is_limited_in_production_too(
    production_api: Callable[..., Api], db: Database
) -> None:
    prod = production_api(enable_test_email=True, rate_limit_test_email="1/hour")
    admin = user(db, ADMIN, admin=True)
    assert ask(prod, "", admin).status_code == 200
    assert ask(prod, "", admin).status_code == 429
