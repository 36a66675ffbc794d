"""POST /api/usage/check and `credits_check`: whether a consumption would be taken now, and
whether any of it would be overage, answered over HTTP on the real app without taking or writing
anything."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from access.guards import credits_check
from adapters.db.pool import Database
from config import Settings
from main import create_app
from runtime.container import Container
from teams import store as teams
from tests.access.lifecycle_helpers import link
from tests.conftest import Api
from tests.credits.test_routes import DAY, KEY, PLAN, deliver, invoice, usage_api, use
from tests.fakes.http import serve
from tests.helpers import HANG_GUARD, create_user

__all__ = ["usage_api"]  # the fixture, shared with the consumption's own tests


def check(api: Api, body: dict[str, Any], *, key: str = KEY) -> requests.Response:
    return requests.post(
        api.url + "/api/usage/check",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=HANG_GUARD,
    )


def written(db: Database) -> list[Any]:
    """Everything a consumption writes: its row, and what the grants say was used."""
    uses = db.fetch_all("select * from public.credit_uses order by key")
    grants = db.fetch_all("select id, used from public.credit_grants order by id")
    return [uses, grants]


def test_a_check_answers_without_consuming(usage_api: tuple[Api, str], db: Database) -> None:
    api, ada = usage_api
    now = int(time.time())
    deliver(api, "invoice.paid", invoice(1, now - DAY), created=now - DAY)
    before = written(db)
    body = {"userId": ada, "feature": "generations", "amount": 100}
    for _ in range(3):  # asked again and again: the same answer, nothing taken
        r = check(api, body)
        assert (r.status_code, r.json()) == (
            200, {"feature": "generations", "allowed": True, "balance": 100, "overage": False},
        )  # fmt: skip
    over = check(api, {**body, "amount": 101})
    assert over.json() == {
        "feature": "generations", "allowed": False, "balance": 100, "overage": False,
    }  # fmt: skip
    assert written(db) == before
    taken = use(api, {**body, "amount": 60, "key": "k1"})
    assert taken.status_code == 200
    assert check(api, {**body, "amount": 41}).json()["allowed"] is False
    assert check(api, {**body, "amount": 40}).json() == {
        "feature": "generations", "allowed": True, "balance": 40, "overage": False,
    }  # fmt: skip
    assert use(api, {**body, "amount": 40, "key": "k2"}).status_code == 200  # as the check said
    assert check(api, {**body, "amount": 1}).json()["allowed"] is False


def test_a_teams_pool_is_checked_by_its_id_and_for_its_seated_member(
    usage_api: tuple[Api, str], db: Database
) -> None:
    api, ada = usage_api
    owner = create_user(db, "owner@example.com")
    team = teams.create(db, owner_id=owner, name="Pool").id
    with db.transaction() as conn:
        conn.execute(
            "insert into public.credit_grants (account_id, feature, source, kind, amount,"
            " starts_at) values (%s, 'generations', 'cs_team', 'once', 7, now())",
            (team,),
        )
    body = {"teamId": team, "feature": "generations", "amount": 7}
    assert check(api, body).json() == {
        "feature": "generations", "allowed": True, "balance": 7, "overage": False,
    }  # fmt: skip
    mine = check(api, {"userId": owner, "feature": "generations", "amount": 8})
    assert mine.json() == {
        "feature": "generations", "allowed": False, "balance": 7, "overage": False,
    }  # fmt: skip
    # Ada holds no seat: her own pool, empty.
    assert check(api, {"userId": ada, "feature": "generations", "amount": 1}).json()["balance"] == 0
    assert db.fetch_all("select * from public.credit_uses") == []


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"feature": "generations", "amount": 1}, "Give userId or teamId"),
        ({"userId": "x", "feature": "generations", "amount": 1}, "(userId)"),
        ({"userId": "{ada}", "feature": "Gen X", "amount": 1}, "feature must"),
        ({"userId": "{ada}", "feature": "generations", "amount": 0}, "amount must"),
        ({"userId": "{ada}", "feature": "generations", "amount": True}, "amount must"),
        ({"userId": "{ada}", "feature": "generations"}, "amount must"),
        ({"userId": "{ada}", "feature": "generations", "amount": 1, "key": "k"}, "key"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    usage_api: tuple[Api, str], body: dict[str, Any], error: str
) -> None:
    api, ada = usage_api
    body = {k: v.replace("{ada}", ada) if isinstance(v, str) else v for k, v in body.items()}
    r = check(api, body)
    assert r.status_code == 400
    assert error in r.json()["error"]


def test_a_wrong_key_is_401_and_an_unknown_payer_404(usage_api: tuple[Api, str]) -> None:
    api, ada = usage_api
    body = {"userId": ada, "feature": "generations", "amount": 1}
    assert check(api, body, key="wrong").status_code == 401
    bare = requests.post(api.url + "/api/usage/check", json=body, timeout=HANG_GUARD)
    assert bare.status_code == 401
    stranger = "00000000-0000-4000-8000-000000000000"
    assert check(api, {**body, "userId": stranger}).json() == {"error": "No such user (userId)"}
    team = check(api, {**body, "userId": None, "teamId": stranger})
    assert (team.status_code, team.json()) == (404, {"error": "No such team (teamId)"})


def test_without_a_usage_key_the_check_does_not_exist(api: Api) -> None:
    body = {"userId": "00000000-0000-4000-8000-000000000000", "feature": "g", "amount": 1}
    assert check(api, body).status_code == 404


bp = Blueprint("long_job", __name__)


@bp.post("/api/long-job")
def long_job() -> ResponseReturnValue:
    found = credits_check("generations", int(request.args["minutes"]))
    if not found.allowed:
        return jsonify(error="Not enough minutes for this job", balance=found.balance), 402
    return jsonify(start=True, overage=found.overage, balance=found.balance)


@pytest.fixture
def app(settings_factory: Callable[..., Settings], db: Database) -> Iterator[Api]:
    container = Container(settings_factory())
    flask_app = create_app(container=container)
    flask_app.register_blueprint(bp)
    server = serve(flask_app)
    yield Api(url=next(server), container=container)
    container.close()
    server.close()


def test_a_founders_route_checks_before_long_work(app: Api, db: Database) -> None:
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, credits, credits_period) values ('Gen', 19, %s, 'link',"
            " 'subscription', 'month', '{\"generations\": 11}', 'period')",
            (PLAN,),
        )
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    deliver(app, "invoice.paid", invoice(1, int(time.time())))
    token = app.token(sub=ada, email="ada@example.com")

    def job(minutes: int) -> requests.Response:
        return requests.post(
            f"{app.url}/api/long-job?minutes={minutes}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=HANG_GUARD,
        )

    assert requests.post(app.url + "/api/long-job?minutes=1", timeout=HANG_GUARD).status_code == 401
    assert job(11).json() == {"start": True, "overage": False, "balance": 11}
    assert job(12).status_code == 402
    assert db.fetch_all("select * from public.credit_uses") == []
