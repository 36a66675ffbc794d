"""`@consumes` and `reserved_credits` on a founder's own routes, over HTTP on the real app:
credits taken when the view succeeds, given back when it fails, 402 when short, once per
Idempotency-Key; a reservation consumes what the work took."""

from __future__ import annotations

import io
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from flask import Blueprint, Response, jsonify, request, send_file
from flask.typing import ResponseReturnValue

from access.guards import consumes, reserved_credits
from adapters.db.pool import Database
from config import Settings
from credits import service as credits
from credits.rules import LONGEST_KEPT_ANSWER
from main import create_app
from runtime.container import Container
from tests.access.lifecycle_helpers import link
from tests.conftest import Api
from tests.credits.test_routes import PLAN, deliver, invoice
from tests.fakes.http import serve
from tests.helpers import HANG_GUARD, create_user

bp = Blueprint("generate", __name__)
# How many times each route's work ran (what a replay must never add to).
RUNS: Counter[str] = Counter()
# The slow route's work waits on this (set by the test), and says it started on the other.
RELEASE, STARTED = threading.Event(), threading.Event()


@bp.post("/api/generate")
@consumes("generations", amount=2)
def generate() -> ResponseReturnValue:
    RUNS["generate"] += 1
    if request.args.get("fail"):
        return jsonify(error="the model is down"), 503
    return jsonify(image="done", run=RUNS["generate"])


@bp.post("/api/write")
def write() -> ResponseReturnValue:
    with reserved_credits("generations", up_to=10) as reservation:
        RUNS["write"] += 1
        reservation.took(int(request.args["took"]))
    return jsonify(written=True, run=RUNS["write"])


@bp.post("/api/draw")
@consumes("generations", amount=2)
def draw() -> ResponseReturnValue:
    RUNS["draw"] += 1
    return jsonify(drawing=request.get_json(silent=True), run=RUNS["draw"])


@bp.post("/api/export")
@consumes("generations", amount=2)
def export() -> ResponseReturnValue:
    RUNS["export"] += 1
    if request.args.get("big"):  # an answer beyond what a key keeps
        return Response(b"x" * (LONGEST_KEPT_ANSWER + 1), mimetype="application/octet-stream")
    return send_file(io.BytesIO(b"%PDF-1.7 the report"), mimetype="application/pdf")


@bp.post("/api/session")
@consumes("generations", amount=1)
def session() -> ResponseReturnValue:
    answer = jsonify(started=True)
    answer.set_cookie("session", "the-first-requests-own", httponly=True)
    return answer


@bp.post("/api/write-then-fail")
def write_then_fail() -> ResponseReturnValue:
    with reserved_credits("generations", up_to=10) as reservation:
        RUNS["write"] += 1
        reservation.took(3)
    raise RuntimeError("the answer could not be made")


@bp.post("/api/slow")
@consumes("generations", amount=1)
def slow() -> ResponseReturnValue:
    RUNS["slow"] += 1
    STARTED.set()
    assert RELEASE.wait(30)
    return jsonify(slow="done")


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()
    RELEASE.clear()
    STARTED.clear()


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
    RUNS.clear()
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


def test_a_repeated_key_answers_the_first_answer_and_never_runs_the_work_again(
    app: Api, db: Database, ada: str
) -> None:
    key = {"Idempotency-Key": "gen-once"}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: call(app, ada, "/api/generate", **key), range(20)))
    assert RUNS["generate"] == 1  # the paid work ran once for one consumption
    done = [a for a in answers if a.status_code == 200]
    assert {a.json()["run"] for a in done} == {1}  # every 200 is the first answer itself
    assert {a.status_code for a in answers} <= {200, 409}  # 409: the first was still running
    assert balance(db) == 9
    again = call(app, ada, "/api/generate", **key)
    assert (again.status_code, again.json()) == (200, {"image": "done", "run": 1})
    assert RUNS["generate"] == 1

    failed = {"Idempotency-Key": "gen-fails"}
    first = call(app, ada, "/api/generate?fail=1", **failed)
    assert first.status_code == 503
    replayed = call(app, ada, "/api/generate?fail=1", **failed)  # sent again: the first answer
    assert (replayed.status_code, replayed.json()) == (503, {"error": "the model is down"})
    assert RUNS["generate"] == 2
    assert balance(db) == 9  # the failed work's credits given back, once


def test_a_repeated_key_of_a_reservation_answers_the_first_answer(
    app: Api, db: Database, ada: str
) -> None:
    key = {"Idempotency-Key": "write-once"}
    answers = [call(app, ada, "/api/write?took=3", **key) for _ in range(5)]
    assert RUNS["write"] == 1
    assert [(a.status_code, a.json()) for a in answers] == [(200, {"written": True, "run": 1})] * 5
    assert balance(db) == 8


def test_a_key_whose_first_request_still_runs_is_409_and_runs_nothing(
    app: Api, db: Database, ada: str
) -> None:
    key = {"Idempotency-Key": "slow-1"}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(call, app, ada, "/api/slow", **key)
        assert STARTED.wait(30)
        second = call(app, ada, "/api/slow", **key)
        assert second.status_code == 409
        assert "still running" in second.json()["error"]
        RELEASE.set()
        assert first.result().status_code == 200
    assert RUNS["slow"] == 1
    assert balance(db) == 10
    assert call(app, ada, "/api/slow", **key).json() == {"slow": "done"}
    assert RUNS["slow"] == 1


def test_a_key_sent_for_another_amount_is_409(app: Api, db: Database, ada: str) -> None:
    key = {"Idempotency-Key": "mixed"}
    assert call(app, ada, "/api/generate", **key).status_code == 200
    assert call(app, ada, "/api/slow", **key).status_code == 409  # 1 credit, not 2
    assert RUNS == {"generate": 1}
    assert balance(db) == 9


def test_a_key_sent_again_with_another_body_or_to_another_route_is_409_not_the_first_answer(
    app: Api, db: Database, ada: str
) -> None:
    token = app.token(sub=ada, email="ada@example.com")
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "one-request"}

    def send(path: str, body: object) -> requests.Response:
        return requests.post(app.url + path, json=body, headers=headers, timeout=10)

    first = send("/api/draw", {"prompt": "a cat"})
    assert (first.status_code, first.json()) == (200, {"drawing": {"prompt": "a cat"}, "run": 1})
    assert send("/api/draw", {"prompt": "a cat"}).json() == first.json()  # the same request
    other = send("/api/draw", {"prompt": "a dog"})  # another body: not the cat's answer
    assert other.status_code == 409
    assert "another request" in other.json()["error"]
    elsewhere = send("/api/generate", {"prompt": "a cat"})  # same feature and amount
    assert elsewhere.status_code == 409
    assert "another request" in elsewhere.json()["error"]
    assert RUNS == {"draw": 1}
    assert balance(db) == 9


def test_a_reservation_left_by_a_crash_is_given_back_by_the_sweep(
    app: Api, db: Database, ada: str
) -> None:
    key = f"{ada}:crashed"  # what the guard reserves for Idempotency-Key: crashed
    credits.consume(db, credits.Payer(user_id=ada), "generations", 2, key, reserve=True)
    # The instance died here, between the reservation and its settling.
    assert balance(db) == 9
    db.fetch_all(
        "update public.credit_uses set created_at = now() - interval '3 hours'"
        " where key = %s returning key",
        (key,),
    )
    flask_app = create_app(container=app.container)
    result = flask_app.test_cli_runner().invoke(args=["credits", "report"])
    assert result.exit_code == 0, result.output
    assert balance(db) == 11  # the credits it held are back
    again = call(app, ada, "/api/generate", **{"Idempotency-Key": "crashed"})
    assert again.status_code == 409
    assert "send a new key" in again.json()["error"]
    assert RUNS == {}


@pytest.mark.parametrize("path", ["/api/export", "/api/export?big=1"])
def test_an_answer_streamed_or_too_large_to_keep_is_given_and_its_key_is_409_after(
    app: Api, db: Database, ada: str, path: str
) -> None:
    key = {"Idempotency-Key": "export-1"}
    first = call(app, ada, path, **key)
    assert first.status_code == 200
    assert first.content in (b"%PDF-1.7 the report", b"x" * (LONGEST_KEPT_ANSWER + 1))
    assert balance(db) == 9  # consumed once, settled
    again = call(app, ada, path, **key)
    assert again.status_code == 409
    assert "not kept" in again.json()["error"]
    assert RUNS == {"export": 1}
    assert balance(db) == 9


def test_a_replay_is_given_the_first_answers_body_never_its_headers(
    app: Api, db: Database, ada: str
) -> None:
    key = {"Idempotency-Key": "cookie-1"}
    first = call(app, ada, "/api/session", **key)
    assert "the-first-requests-own" in first.headers["Set-Cookie"]
    again = call(app, ada, "/api/session", **key)
    assert (again.status_code, again.json()) == (200, {"started": True})
    assert "Set-Cookie" not in again.headers
    assert balance(db) == 10


def test_a_reservation_whose_route_failed_after_it_answers_its_key_again_without_running(
    app: Api, db: Database, ada: str
) -> None:
    key = {"Idempotency-Key": "write-fail"}
    first = call(app, ada, "/api/write-then-fail", **key)
    assert first.status_code == 500
    again = call(app, ada, "/api/write-then-fail", **key)  # its answer, not "still running"
    assert (again.status_code, again.json()) == (500, first.json())
    assert RUNS == {"write": 1}
    assert balance(db) == 8
