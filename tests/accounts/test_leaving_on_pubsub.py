"""Account deletion on the Pub/Sub design, as production runs it: the api (production's
settings, no Supabase secret key) records the deletion and publishes it on the real emulator;
the access target (`functions-framework --target=access`, which holds the secret key) runs its
steps from the push, a failing step is finished by Pub/Sub's redelivery, and a delivery that
finds the deletion running elsewhere comes back later instead of being acknowledged."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from accounts.leaving_rules import STEPS
from adapters.bus.topology import ensure_topology
from adapters.db.pool import Database
from core.app_events import ACCOUNT_DELETION_REQUESTED
from core.events import app_event
from dev import pubsub_emulator
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from runtime.consumers import MESSAGE_FILTERS
from tests.conftest import PRODUCTION_SECRETS, Api
from tests.fakes.supabase import SECRET_KEY
from tests.helpers import HANG_GUARD, create_user, stripe_signature, wait_for
from tests.pubsub_fixtures import (
    BIN,
    PROJECT,
    TEST_POLICY,
    TOPIC,
    PubSub,
    Service,
    pubsub_fixture,
    service_env_fixture,
    spawn,
)

__all__ = ["pubsub_fixture", "service_env_fixture"]

ADA = "ada@example.com"
SITE = "https://shop.acme.dev"


@pytest.fixture(scope="module", name="access")
def access_fixture(
    service_env: dict[str, str],
    supabase_fake: AuthStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Service]:
    """The access target as deployed: it holds Supabase's secret key (the Auth stand-in's)."""
    port = pubsub_emulator.free_port()
    command = [
        str(BIN / "functions-framework"),
        *("--target=access", "--source=main.py", "--signature-type=cloudevent"),
        *("--host=127.0.0.1", f"--port={port}"),
    ]
    env = service_env | {"SUPABASE_URL": supabase_fake.url, "SUPABASE_SECRET_KEY": SECRET_KEY}
    log = tmp_path_factory.mktemp("access") / "access.log"
    service = spawn(command, env=env, port=port, log=log)
    yield service
    service.stop()


@pytest.fixture(name="api")
def api_fixture(
    production_api: Callable[..., Api], pubsub: PubSub, access: Service, db: Database
) -> Api:
    """The api with production's settings and no Supabase secret key, publishing to the
    emulator, whose push subscription feeds the access target (more attempts than the other
    Pub/Sub tests give: a test clears an outage after seeing a delivery fail)."""
    pubsub.ensure_running()
    ensure_topology(
        filters=MESSAGE_FILTERS,
        project=PROJECT,
        topic=TOPIC,
        push_endpoints={"access": access.url + "/"},
        policy=replace(TEST_POLICY, max_delivery_attempts=50),
        emulator_host=pubsub.host,
    )
    seed_demo_products(db)
    return production_api(supabase_secret_key=None, pubsub_emulator_host=pubsub.host)


def bearer(api: Api, user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token(sub=user_id, email=ADA)}"}


def subscribed(api: Api, stripe: StripeStandIn, db: Database) -> str:
    """Ada, subscribed through the route and Stripe's page (the stand-in), her access
    granted by the access target from the webhook's events; returns her user id."""
    user = create_user(db, ADA, name="Ada Lovelace")
    made = api.post(
        "/api/payments/create-checkout",
        json={
            "priceId": "price_demo_team_monthly",
            "mode": "subscription",
            "successUrl": f"{SITE}/thanks",
            "cancelUrl": f"{SITE}/no",
        },
        headers=bearer(api, user),
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
    wait_for(
        lambda: db.fetch_all(
            "select 1 from public.entitlements where kind = 'subscription' and active"
        )
    )
    return user


def delete(api: Api, user_id: str) -> Any:
    return requests.delete(
        api.url + "/api/me", json={"confirm": ADA}, headers=bearer(api, user_id), timeout=HANG_GUARD
    )


def deletion(db: Database) -> dict[str, Any]:
    [row] = db.fetch_all("select finished_at, last_error, steps_done from public.account_deletions")
    return row


def hold(db: Database) -> bool:
    """Take the deletion's lease as another call would: only while no delivery holds it
    (whose end would give it back)."""
    with db.transaction() as conn:
        taken = conn.execute(
            "update public.account_deletions set running_until = now() + interval '1 minute'"
            " where running_until is null or running_until < now()"
        ).rowcount
    return taken == 1


def assert_deleted(user: str, stripe: StripeStandIn, supabase: AuthStandIn, db: Database) -> None:
    """Finished once: cancelled at Stripe once, the Auth user deleted through the admin API,
    the purchase kept without who bought it."""
    row = wait_for(lambda: (r := deletion(db))["finished_at"] is not None and r)
    assert list(row["steps_done"]) == list(STEPS)
    assert {s["status"] for s in stripe.subscriptions.values()} == {"canceled"}
    assert len(stripe.calls("DELETE", "/v1/subscriptions/")) == 1
    assert supabase.calls("DELETE", f"/auth/v1/admin/users/{user}")
    assert db.fetch_all("select 1 from auth.users where id = %s", (user,)) == []
    purchases = db.fetch_all("select user_id, customer_email from public.purchases")
    assert purchases
    assert all(p["user_id"] is None and p["customer_email"] is None for p in purchases)


def test_the_api_records_the_deletion_and_the_access_target_finishes_it(
    api: Api, access: Service, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    stripe, supabase = fakes
    user = subscribed(api, stripe, db)

    response = delete(api, user)

    assert response.status_code == 202, response.text
    assert response.json() == {"deleted": True, "finished": False, "remaining": list(STEPS)}
    # The api built no Supabase admin client: it holds no secret key, and runs no step.
    assert "accounts" not in api.container.__dict__
    assert_deleted(user, stripe, supabase, db)
    [row] = db.fetch_all("select id::text from public.account_deletions")
    event_id = f"account_deletion_{row['id']}"
    wait_for(lambda: f"{event_id} -> deleted" in access.output())

    # Delivered again (its acknowledgement lost): acknowledged, nothing done twice.
    event, data = app_event(
        ACCOUNT_DELETION_REQUESTED,
        event_id=event_id,
        obj={"deletion_id": row["id"]},
        created=datetime.now(UTC),
    )
    api.container.bus.publish(event, data)
    wait_for(lambda: f"{event_id} -> duplicate" in access.output())
    assert len(stripe.calls("DELETE", "/v1/subscriptions/")) == 1


def test_a_failing_step_is_finished_by_the_redelivery(
    api: Api, access: Service, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    stripe, supabase = fakes
    user = subscribed(api, stripe, db)
    stripe.outage_paths.add("/v1/subscriptions/")

    assert delete(api, user).status_code == 202

    failed = wait_for(lambda: (r := deletion(db))["last_error"] and r)
    assert failed["last_error"].startswith("cancel_subscriptions:")
    assert failed["finished_at"] is None
    stripe.outage_paths.clear()
    assert_deleted(user, stripe, supabase, db)


def test_a_delivery_finding_the_deletion_running_comes_back_later(
    api: Api, access: Service, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    stripe, supabase = fakes
    user = subscribed(api, stripe, db)
    stripe.outage_paths.add("/v1/subscriptions/")
    assert delete(api, user).status_code == 202
    wait_for(lambda: deletion(db)["last_error"])
    wait_for(lambda: hold(db))  # another call (the founder's command) holds it now
    stripe.outage_paths.clear()
    seen = access.output().count("running now")

    # The api refuses a second ask meanwhile; the deliveries find it held and fail.
    again = delete(api, user)
    assert again.status_code == 409
    assert "running now" in again.json()["error"]
    wait_for(lambda: access.output().count("running now") > seen)
    assert deletion(db)["finished_at"] is None
    assert stripe.calls("DELETE", "/v1/subscriptions/") == []

    with db.transaction() as conn:  # that call ended (or its lease ran out)
        conn.execute("update public.account_deletions set running_until = null")
    assert_deleted(user, stripe, supabase, db)
