"""An admin's resend on the Pub/Sub design, as production runs it: the api (production's
settings, no Resend key) claims it and publishes it on the real emulator; the emails target
(`functions-framework --target=emails`, which holds the Resend key) reads the copy back from
Resend (the fake) and sends it once, a provider failure by Pub/Sub's redelivery, and a
redelivered request sends nothing twice."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.bus.topology import ensure_topology
from adapters.db.pool import Database
from core.app_events import EMAIL_RESEND_REQUESTED
from core.events import app_event
from dev import pubsub_emulator
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from runtime.consumers import MESSAGE_FILTERS
from tests.conftest import PRODUCTION_SECRETS, Api, serving
from tests.fakes.resend import FakeResend
from tests.helpers import create_user, stripe_signature, wait_for
from tests.pubsub_fixtures import (
    BIN,
    PROJECT,
    TEST_POLICY,
    TOPIC,
    PubSub,
    Service,
    access_target_fixture,
    pubsub_fixture,
    service_env_fixture,
    spawn,
)
from tests.support.test_routes import bearer, make_admin, token

__all__ = ["access_target_fixture", "pubsub_fixture", "service_env_fixture"]

ADA = "ada@example.com"
SITE = "https://shop.acme.dev"
KIND = "purchase-confirmation"


@pytest.fixture(scope="module", name="resend_api")
def resend_api_fixture() -> Iterator[FakeResend]:
    """Resend (the fake), for as long as the emails target that sends through it runs."""
    yield from serving(FakeResend())


@pytest.fixture(scope="module", name="emails")
def emails_fixture(
    service_env: dict[str, str],
    resend_api: FakeResend,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Service]:
    """The emails target as deployed: it holds the Resend key (the fake's)."""
    port = pubsub_emulator.free_port()
    command = [
        str(BIN / "functions-framework"),
        *("--target=emails", "--source=main.py", "--signature-type=cloudevent"),
        *("--host=127.0.0.1", f"--port={port}"),
    ]
    env = service_env | {
        "RESEND_API_KEY": PRODUCTION_SECRETS["resend_api_key"],
        "RESEND_API_URL": resend_api.server.url,
    }
    log = tmp_path_factory.mktemp("emails") / "emails.log"
    service = spawn(command, env=env, port=port, log=log)
    yield service
    service.stop()


@pytest.fixture(name="api")
def api_fixture(
    production_api: Callable[..., Api],
    pubsub: PubSub,
    access_target: Service,
    emails: Service,
    resend_api: FakeResend,
    db: Database,
) -> Api:
    """The api with production's settings and no Resend key, publishing to the emulator,
    whose push subscriptions feed the access and emails targets (more attempts than the other
    Pub/Sub tests give: a test sees a delivery fail before Resend takes it)."""
    pubsub.ensure_running()
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=PROJECT,
        topic=TOPIC,
        push_endpoints={"access": access_target.url + "/", "emails": emails.url + "/"},
        policy=replace(TEST_POLICY, max_delivery_attempts=50),
        emulator_host=pubsub.host,
    )
    seed_demo_products(db)
    resend_api.reset()
    return production_api(resend_api_key=None, pubsub_emulator_host=pubsub.host)


def confirmed(api: Api, stripe: StripeStandIn, db: Database) -> str:
    """Ada buys through the route and Stripe's page (the stand-in); the access target grants
    it and the emails target sends her purchase confirmation through Resend. Its event id."""
    user = create_user(db, ADA, name="Ada Lovelace")
    headers = {"Authorization": f"Bearer {api.token(sub=user, email=ADA)}"}
    made = api.post(
        "/api/payments/create-checkout",
        json={
            "priceId": "price_demo_team_monthly",
            "mode": "subscription",
            "successUrl": f"{SITE}/thanks",
            "cancelUrl": f"{SITE}/no",
        },
        headers=headers,
    )
    assert made.status_code == 200, made.text
    for event in stripe.complete(list(stripe.sessions)[-1], email=ADA):
        body = json.dumps(event).encode()
        signature = stripe_signature(body, secret=PRODUCTION_SECRETS["stripe_webhook_secret"])
        answered = api.post(
            "/api/webhook/payments",
            data=body,
            headers={"Stripe-Signature": signature, "Content-Type": "application/json"},
        )
        assert answered.status_code == 200, answered.text
    [row] = wait_for(
        lambda: db.fetch_all(
            "select event_id from public.sent_emails where kind = %s and provider_id is not null",
            (KIND,),
        )
    )
    return str(row["event_id"])


def founder(api: Api, db: Database) -> dict[str, str]:
    """An admin's headers, after a second factor (production asks for one)."""
    return bearer(token(api, make_admin(db), "founder@example.com"))


def resend_of(api: Api, founder: dict[str, str], event_id: str) -> Any:
    return api.post(
        f"/api/admin/emails/{event_id}:{KIND}/resend",
        json={"reason": "Ada lost the receipt"},
        headers=founder,
    )


def sends(resend_api: FakeResend) -> int:
    """POST /emails requests Resend received (its idempotency keys would hide a second)."""
    return len(resend_api.server.calls("POST", "/emails"))


def delivered(resend_api: FakeResend, key: str) -> list[dict[str, Any]]:
    """The messages Resend delivered under this idempotency key."""
    pairs = zip(resend_api.delivered, resend_api.delivered_keys, strict=True)
    return [message for message, k in pairs if k == key]


def copies(resend_api: FakeResend, event_id: str) -> list[dict[str, Any]]:
    """The messages Resend delivered under the resend's key."""
    return delivered(resend_api, f"resend/{event_id}/{KIND}")


def test_the_api_claims_the_resend_and_the_emails_target_sends_it_once(
    api: Api,
    emails: Service,
    fakes: tuple[StripeStandIn, Any],
    resend_api: FakeResend,
    db: Database,
) -> None:
    stripe, _ = fakes
    event_id = confirmed(api, stripe, db)
    [first] = delivered(resend_api, f"{event_id}/{KIND}")

    admin = founder(api, db)
    answer = resend_of(api, admin, event_id)

    assert answer.status_code == 202, answer.text
    assert answer.json() == {"sentEmailId": f"{event_id}:{KIND}", "kind": KIND, "recipient": ADA}
    # The api built no mailer: it holds no Resend key, and sends nothing itself.
    assert "mailer" not in api.container.__dict__
    request_id = f"email_resend_{event_id}:{KIND}"
    wait_for(lambda: f"{request_id} -> resent {KIND}" in emails.output())
    assert copies(resend_api, event_id) == [first]  # the same message, to the same address
    [claim] = db.fetch_all("select provider_id from public.email_resends")
    assert claim["provider_id"] is not None
    again = resend_of(api, admin, event_id)
    assert again.status_code == 409
    assert "only once" in again.json()["error"]

    # Delivered again (its acknowledgement lost): acknowledged, nothing sent twice.
    before = sends(resend_api)
    event, data = app_event(
        EMAIL_RESEND_REQUESTED,
        event_id=request_id,
        obj={"event_id": event_id, "kind": KIND},
        created=datetime.now(UTC),
    )
    api.container.bus.publish(event, data)
    wait_for(lambda: f"{request_id} -> duplicate" in emails.output())
    assert sends(resend_api) == before
    assert len(copies(resend_api, event_id)) == 1


def test_a_provider_failure_is_sent_by_the_redelivery(
    api: Api,
    emails: Service,
    fakes: tuple[StripeStandIn, Any],
    resend_api: FakeResend,
    db: Database,
) -> None:
    stripe, _ = fakes
    event_id = confirmed(api, stripe, db)
    failed = emails.output().count("Resend error")
    resend_api.fail_next(10_000)  # Resend down until the test says otherwise
    admin = founder(api, db)

    assert resend_of(api, admin, event_id).status_code == 202

    wait_for(lambda: emails.output().count("Resend error") > failed)
    # Meanwhile the admin is told it is on its way, not that it was sent.
    user = db.fetch_all("select id::text from public.profiles where email = %s", (ADA,))[0]["id"]
    [mail] = [
        e
        for e in api.get(f"/api/admin/customers/{user}", headers=admin).json()["emails"]
        if e["kind"] == KIND
    ]
    assert mail["resentAt"] is None
    # Asked again meanwhile (as after its delivery dead-lettered): the same request again.
    assert resend_of(api, admin, event_id).status_code == 202
    resend_api.recover()
    request_id = f"email_resend_{event_id}:{KIND}"
    # Both deliveries acknowledged (the second finding it sent, or sending it under the same
    # key, which Resend answers with the first send); one copy went out.
    wait_for(lambda: emails.output().count(f"{request_id} -> ") >= 2)
    assert f"{request_id} -> resent {KIND}" in emails.output()
    assert len(copies(resend_api, event_id)) == 1
    [claim] = db.fetch_all("select provider_id from public.email_resends")
    assert claim["provider_id"] is not None


def _emails_pushed_to(endpoint: str | None, pubsub: PubSub, access_target: Service) -> None:
    """The emails subscription pushing to `endpoint`, or held (a pull subscription nobody
    pulls: its messages wait), as the api fixture sets it up otherwise."""
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=PROJECT,
        topic=TOPIC,
        push_endpoints={"access": access_target.url + "/", "emails": endpoint},
        policy=replace(TEST_POLICY, max_delivery_attempts=50),
        emulator_host=pubsub.host,
    )


def test_a_resend_asked_before_a_deletion_sends_nothing_after_it(
    api: Api,
    emails: Service,
    access_target: Service,
    pubsub: PubSub,
    fakes: tuple[StripeStandIn, Any],
    resend_api: FakeResend,
    db: Database,
) -> None:
    """Handed to the emails target, which has not taken it yet when Ada's deletion erases
    her address: Resend still keeps the copy, address and all, and nothing is sent to it."""
    from accounts import leaving_store as leaving

    stripe, _ = fakes
    event_id = confirmed(api, stripe, db)
    _emails_pushed_to(None, pubsub, access_target)
    try:
        assert resend_of(api, founder(api, db), event_id).status_code == 202
        [ada] = db.fetch_all("select id::text from public.profiles where email = %s", (ADA,))
        # The deletion's erasing step, as the access target runs it.
        leaving.erase_personal_data(db, ada["id"], ADA, [])
    finally:
        _emails_pushed_to(emails.url + "/", pubsub, access_target)

    request_id = f"email_resend_{event_id}:{KIND}"
    wait_for(lambda: f"{request_id} -> erased" in emails.output())
    assert copies(resend_api, event_id) == []
    assert db.fetch_all("select 1 from public.email_resends") == []
