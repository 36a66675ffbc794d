"""The subscriber targets through Functions Framework, with real push envelopes."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import functions_framework
import pytest
from flask.testing import FlaskClient

from adapters.db.pool import Database
from config import Settings
from dev.processes import environment
from dev.samples.catalogue import seed_demo_products
from tests.helpers import create_user, stripe_event

SOURCE = "main.py"


@pytest.fixture
def access_client(
    settings_factory: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, db: Database
) -> FlaskClient:
    for name, value in environment(settings_factory()).items():
        monkeypatch.setenv(name, value)
    app = functions_framework.create_app(target="access", source=SOURCE)  # type: ignore[no-untyped-call]
    client: FlaskClient = app.test_client()
    return client


def push_envelope(body: bytes, *, message_id: str = "1") -> dict[str, Any]:
    """What a Pub/Sub push subscription POSTs."""
    event = json.loads(body)
    return {
        "message": {
            "data": base64.b64encode(body).decode(),
            "attributes": {"event_id": event["id"], "event_type": event["type"]},
            "messageId": message_id,
            "publishTime": "2026-11-21T10:00:00.000Z",
        },
        "subscription": "projects/local-project/subscriptions/access-push",
    }


def eventarc_headers(message_id: str = "1") -> dict[str, str]:
    return {
        "ce-id": message_id,
        "ce-specversion": "1.0",
        "ce-source": "//pubsub.googleapis.com/projects/local-project/topics/payment-events",
        "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        "Content-Type": "application/json",
    }


def profile_access(db: Database, user_id: str) -> bool:
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (user_id,))
    return bool(row["has_access"])


def completed_body(user_id: str, event_id: str = "evt_push_1", customer: str = "cus_push") -> bytes:
    return stripe_event(
        "checkout.session.completed",
        {
            "id": f"cs_{event_id}",
            "client_reference_id": user_id,
            "customer": customer,
            "metadata": {"price_id": "price_demo_team_monthly"},
            "payment_status": "paid",
        },
        event_id=event_id,
    )


def test_raw_push_request_is_applied(access_client: FlaskClient, db: Database) -> None:
    seed_demo_products(db)
    user = create_user(db, "push@example.com")
    response = access_client.post("/", json=push_envelope(completed_body(user)))
    assert response.status_code == 200
    assert profile_access(db, user)


def test_eventarc_cloud_event_is_applied(access_client: FlaskClient, db: Database) -> None:
    user = create_user(db, "eventarc@example.com")
    envelope = push_envelope(completed_body(user, "evt_arc"))
    response = access_client.post("/", json=envelope, headers=eventarc_headers())
    assert response.status_code == 200
    assert profile_access(db, user)


def test_redelivery_changes_nothing_more(access_client: FlaskClient, db: Database) -> None:
    user = create_user(db, "twice@example.com")
    for message_id in ("1", "2", "3"):
        assert (
            access_client.post(
                "/", json=push_envelope(completed_body(user), message_id=message_id)
            ).status_code
            == 200
        )
    assert db.fetch_all("select outcome from public.processed_events") == [{"outcome": "granted"}]
    assert len(db.fetch_all("select id from public.purchases")) == 1


@pytest.mark.parametrize("data", ["bm90IGpzb24=", "!!!", base64.b64encode(b'{"id": 1}').decode()])
def test_a_message_that_is_not_an_event_is_acknowledged(
    access_client: FlaskClient, db: Database, data: str, caplog: pytest.LogCaptureFixture
) -> None:
    envelope = {"message": {"data": data, "messageId": "9"}, "subscription": "s"}
    response = access_client.post("/", json=envelope)
    assert response.status_code == 200
    assert any(r.levelname == "ERROR" and "not an event" in r.getMessage() for r in caplog.records)
    assert db.fetch_all("select * from public.processed_events") == []


def test_an_unlinked_customer_fails_the_push_so_it_is_retried(
    access_client: FlaskClient, db: Database
) -> None:
    body = stripe_event(
        "invoice.paid", {"id": "in_1", "customer": "cus_nobody", "subscription": "sub_1"}
    )
    response = access_client.post("/", json=push_envelope(body))
    assert response.status_code == 500
    assert db.fetch_all("select * from public.processed_events") == []


def test_pushes_in_flight_at_once_each_answer_for_their_own_event(
    access_client: FlaskClient, db: Database
) -> None:
    """Pushes that arrive together share the access cycle's batches: each answers for its own
    event, so only the one that failed comes back."""
    seed_demo_products(db)
    users = [create_user(db, f"together{n}@example.com") for n in range(8)]
    bodies = [
        stripe_event(
            "checkout.session.completed",
            {
                "id": f"cs_together_{n}",
                "client_reference_id": user,
                "customer": f"cus_together_{n}",
                "metadata": {"price_id": "price_demo_team_monthly"},
                "payment_status": "paid",
            },
            event_id=f"evt_together_{n}",
        )
        for n, user in enumerate(users)
    ]
    unlinked = stripe_event(
        "invoice.paid",
        {"id": "in_2", "customer": "cus_nobody", "subscription": "sub_2"},
        event_id="evt_unlinked",
    )

    def push(body: bytes) -> int:
        return access_client.post("/", json=push_envelope(body)).status_code

    with ThreadPoolExecutor(max_workers=9) as pool:
        statuses = list(pool.map(push, [*bodies, unlinked]))
    assert statuses == [200] * 8 + [500]
    assert all(profile_access(db, user) for user in users)
    outcomes = db.fetch_all("select event_id, outcome from public.processed_events")
    assert {row["event_id"]: row["outcome"] for row in outcomes} == {
        f"evt_together_{n}": "granted" for n in range(8)
    }


def test_a_message_carrying_several_events_applies_each(
    access_client: FlaskClient, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """The api publishes the events of one type that come together as one message, a JSON
    array of them: each is applied; what in it is not an event is dropped, loudly."""
    seed_demo_products(db)
    users = [create_user(db, f"carried{n}@example.com") for n in range(3)]
    bodies = [
        completed_body(user, f"evt_carried_{n}", f"cus_carried_{n}") for n, user in enumerate(users)
    ]
    data = b"[" + b",".join([*bodies, b'{"id": 1}']) + b"]"
    envelope = push_envelope(bodies[0])
    envelope["message"]["data"] = base64.b64encode(data).decode()
    response = access_client.post("/", json=envelope)
    assert response.status_code == 200
    assert all(profile_access(db, user) for user in users)
    outcomes = db.fetch_all("select event_id, outcome from public.processed_events")
    assert {row["event_id"]: row["outcome"] for row in outcomes} == {
        f"evt_carried_{n}": "granted" for n in range(3)
    }
    assert any(r.levelname == "ERROR" and "not an event" in r.getMessage() for r in caplog.records)


def test_a_message_with_one_failing_event_comes_back_whole_and_lands_once(
    access_client: FlaskClient, db: Database
) -> None:
    seed_demo_products(db)
    user = create_user(db, "partly@example.com")
    unlinked = stripe_event(
        "invoice.paid",
        {"id": "in_3", "customer": "cus_nobody", "subscription": "sub_3"},
        event_id="evt_unlinked_3",
    )
    envelope = push_envelope(completed_body(user, "evt_partly"))
    data = b"[" + completed_body(user, "evt_partly") + b"," + unlinked + b"]"
    envelope["message"]["data"] = base64.b64encode(data).decode()
    assert access_client.post("/", json=envelope).status_code == 500
    assert profile_access(db, user)  # its other event went through: Pub/Sub redelivers both
    assert access_client.post("/", json=envelope).status_code == 500
    outcomes = db.fetch_all("select event_id, outcome from public.processed_events")
    assert outcomes == [{"event_id": "evt_partly", "outcome": "granted"}]
    assert len(db.fetch_all("select id from public.purchases")) == 1
