"""`@consumes` and `reserved_credits` on a founder's own routes, over HTTP on the real app:
credits taken when the view succeeds, given back when it fails, 402 when short, once per
Idempotency-Key; a reservation consumes what the work took."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import requests
from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from adapters.db.pool import Database
from config import Settings
from handlers.guards import consumes, reserved_credits
from main import create_app
from runtime.container import Container
from tests.conftest import Api
from tests.fakes.http import serve
from tests.handlers.test_usage import PLAN, deliver, invoice
from tests.helpers import HANG_GUARD, create_user
from tests.subscribers.lifecycle_helpers import link

bp = Blueprint("generate", __name__)


@bp.post("/api/generate")
@consumes("generations", amount=2)
def generate() -> ResponseReturnValue:
    if request.args.get("fail"):
        return jsonify(error="the model is down"), 503
    return jsonify(image="done")


@bp.post("/api/write")
def write() -> ResponseReturnValue:
    with reserved_credits("generations", up_to=10) as reservation:
        reservation.took(int(request.args["took"]))
    return jsonify(written=True)


@pytest.fixture
def app(settings_factory: Callable[..., Settings], db: Database) -> Iterator[Api]:
    container = Container(settings_factory())
    flask_app = create_app(container=container)
    flask_app.register_blueprint(bp)
    server = serve(flask_app)
    yield Api(url=next(server), container=container)
    container.close()
    server.close()


@pytest.fixture
def ada(app: Api, db: Database) -> str:
    """Ada, paying as cus_ada for a monthly plan of 11 generations, its first period paid."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, credits, credits_period) values ('Gen', 19, %s, 'link',"
            " 'subscription', 'month', '{\"generations\": 11}', 'period')",
            (PLAN,),
        )
    user = create_user(db, "ada@example.com")
    link(db, user, "cus_ada")
    deliver(app, "invoice.paid", invoice(1, int(time.time())))
    return user


def call(app: Api, user: str, path: str, **headers: str) -> requests.Response:
    token = app.token(sub=user, email="ada@example.com")
    return requests.post(
        app.url + path, headers={"Authorization": f"Bearer {token}", **headers}, timeout=HANG_GUARD
    )


def balance(db: Database) -> int:
    [row] = db.fetch_all("select sum(amount - used) as left from public.credit_grants")
    return int(row["left"])


def test_a_route_that_consumes(app: Api, db: Database, ada: str) -> None:
    assert requests.post(app.url + "/api/generate", timeout=HANG_GUARD).status_code == 401
    assert call(app, ada, "/api/generate").status_code == 200
    assert balance(db) == 9
    assert call(app, ada, "/api/generate?fail=1").status_code == 503
    assert balance(db) == 9  # the failed work's credits given back
    for _ in range(2):  # a retry with the same key consumes once
        assert call(app, ada, "/api/generate", **{"Idempotency-Key": "req-1"}).status_code == 200
    assert balance(db) == 7
    for _ in range(3):
        call(app, ada, "/api/generate")
    assert balance(db) == 1
    short = call(app, ada, "/api/generate")
    assert (short.status_code, short.json()) == (
        402, {"error": "Not enough generations credits", "balance": 1},
    )  # fmt: skip


def test_a_reservation_consumes_what_the_work_took(app: Api, db: Database, ada: str) -> None:
    assert call(app, ada, "/api/write?took=3").status_code == 200
    assert balance(db) == 8
    assert call(app, ada, "/api/write?took=3").status_code == 402  # 10 are not left
    assert balance(db) == 8
