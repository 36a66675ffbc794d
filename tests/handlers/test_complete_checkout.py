"""POST /api/payments/complete-checkout: the success page applies its paid checkout at once,
through the same access cycle as Stripe's webhook, and the buyer is told once whichever comes
first."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest

from adapters.db.pool import Database
from core.checkout import TOKEN_DIGEST_KEY, completion_url
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.conftest import Api
from tests.fakes.supabase import FakeSupabaseAuth
from tests.helpers import create_user, stripe_event
from tests.subscribers.test_access import completed, post_event

PATH = "/api/payments/complete-checkout"
ONE_TIME = "price_demo_starter_one_time"


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, FakeSupabaseAuth], db: Database) -> StripeStandIn:
    seed_demo_products(db)
    return fakes[0]


def paid_session(
    stripe: StripeStandIn, user_id: str | None, *, session: str = "cs_test_1", **fields: Any
) -> dict[str, Any]:
    """A completed session as Stripe keeps it (and as the webhook's event carries it)."""
    found = {
        **completed(user_id, session=session),
        "status": "complete",
        "created": int(time.time()) - 60,
        **fields,
    }
    if user_id:
        found["metadata"] = {**found["metadata"], "user_id": user_id}
    stripe.sessions[session] = found
    return found


def complete(api: Api, body: dict[str, Any], token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return api.post(PATH, json=body, headers=headers)


def buyer(api: Api, db: Database, email: str = "buyer@example.com") -> tuple[str, str]:
    user_id = create_user(db, email)
    return user_id, api.token(sub=user_id, email=email)


def confirmations(db: Database) -> list[dict[str, Any]]:
    return db.fetch_all(
        "select event_id, recipient from public.sent_emails where kind = 'purchase-confirmation'"
    )


def grants(db: Database) -> list[dict[str, Any]]:
    return db.fetch_all("select source_id, active from public.entitlements")


def test_the_buyer_sees_access_in_the_first_answer(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    user_id, token = buyer(api, db)
    paid_session(stripe, user_id)
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == user_id
    assert body["hasAccess"] is True
    assert [e["kind"] for e in body["entitlements"]] == ["subscription"]
    assert response.headers["Cache-Control"] == "private, no-store"
    # What GET /api/me answers, now and without waiting for the webhook.
    me = api.get("/api/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json() == body
    [call] = stripe.calls("GET", "/v1/checkout/sessions/cs_test_1")
    assert ("expand[0]", "line_items") in call.query


def test_route_first_then_webhook_grants_and_tells_once(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    user_id, token = buyer(api, db)
    session = paid_session(stripe, user_id)
    assert complete(api, {"sessionId": "cs_test_1"}, token).status_code == 200
    assert complete(api, {"sessionId": "cs_test_1"}, token).status_code == 200  # a reload
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    post_event(api, stripe_event("checkout.session.completed", session, event_id="evt_late"))
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    assert grants(db) == [{"source_id": "sub_1", "active": True}]
    assert confirmations(db) == [
        {"event_id": "granted_cs_test_1", "recipient": "buyer@example.com"}
    ]
    outcomes = dict(
        (r["event_id"], r["outcome"])
        for r in db.fetch_all(
            "select event_id, outcome from public.processed_events where consumer = 'access'"
        )
    )
    assert outcomes == {"completion_cs_test_1": "granted", "evt_late": "granted"}


def test_webhook_first_then_route_changes_nothing_and_tells_once(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    user_id, token = buyer(api, db)
    session = paid_session(stripe, user_id)
    post_event(api, stripe_event("checkout.session.completed", session, event_id="evt_first"))
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 200
    assert response.json()["hasAccess"] is True
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    assert grants(db) == [{"source_id": "sub_1", "active": True}]
    assert confirmations(db) == [
        {"event_id": "granted_cs_test_1", "recipient": "buyer@example.com"}
    ]
    # Older than the webhook's event (dated at the session's creation): stale, nothing written.
    [row] = db.fetch_all(
        "select outcome from public.processed_events where event_id = 'completion_cs_test_1'"
    )
    assert row["outcome"] == "stale"


def test_a_refund_applied_first_is_not_undone(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    user_id, token = buyer(api, db)
    session = paid_session(
        stripe, user_id, subscription=None, mode="payment", payment_intent="pi_1"
    )
    session["metadata"] = {"price_id": ONE_TIME, "user_id": user_id}
    now = int(time.time())
    post_event(api, stripe_event("checkout.session.completed", session, created=now - 30))
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    refund = {"id": "ch_1", "payment_intent": "pi_1", "amount_refunded": 1900, "refunded": True}
    post_event(api, stripe_event("charge.refunded", refund, created=now))
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 200
    assert response.json()["hasAccess"] is False
    assert grants(db) == [{"source_id": "cs_test_1", "active": False}]


def test_another_users_session_is_not_found(api: Api, stripe: StripeStandIn, db: Database) -> None:
    owner, _ = buyer(api, db)
    _, stranger = buyer(api, db, "stranger@example.com")
    paid_session(stripe, owner)
    response = complete(api, {"sessionId": "cs_test_1"}, stranger)
    assert response.status_code == 404
    assert response.json() == {"error": "No checkout session cs_test_1"}
    assert grants(db) == []
    # Nor without signing in, nor with a token that is not the session's.
    assert complete(api, {"sessionId": "cs_test_1"}).status_code == 404
    assert complete(api, {"sessionId": "cs_test_1", "token": "guess"}).status_code == 404
    assert grants(db) == []


def test_an_unknown_session_is_not_found(api: Api, stripe: StripeStandIn, db: Database) -> None:
    _, token = buyer(api, db)
    response = complete(api, {"sessionId": "cs_test_nope"}, token)
    assert response.status_code == 404
    assert response.json() == {"error": "No checkout session cs_test_nope"}


def test_an_unpaid_session_is_a_conflict(api: Api, stripe: StripeStandIn, db: Database) -> None:
    user_id, token = buyer(api, db)
    paid_session(stripe, user_id, payment_status="unpaid")
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 409
    assert "not completed and paid yet (payment status unpaid)" in response.json()["error"]
    assert "poll GET /api/me" in response.json()["error"]
    assert grants(db) == []
    assert db.fetch_all("select 1 from public.processed_events") == []


def test_a_trial_still_open_is_not_applied(api: Api, stripe: StripeStandIn, db: Database) -> None:
    # Stripe may say no payment is required before the buyer has finished the checkout.
    user_id, token = buyer(api, db)
    paid_session(stripe, user_id, status="open", payment_status="no_payment_required")
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 409
    assert "not completed and paid yet" in response.json()["error"]
    assert grants(db) == []


def test_a_free_trial_needs_no_payment(api: Api, stripe: StripeStandIn, db: Database) -> None:
    user_id, token = buyer(api, db)
    paid_session(stripe, user_id, payment_status="no_payment_required")
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 200
    assert response.json()["hasAccess"] is True


BAD_SESSION = "sessionId must be a Stripe Checkout Session id (cs_...)"
BAD_TOKEN = "token must be the checkout_token of the success URL"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, BAD_SESSION),
        ({"sessionId": "evt_1"}, BAD_SESSION),
        ({"sessionId": "cs_1/../x"}, BAD_SESSION),
        ({"sessionId": 7}, BAD_SESSION),
        ({"sessionId": "cs_1", "token": "a b"}, BAD_TOKEN),
        ({"sessionId": "cs_1", "extra": 1}, "Unknown field 'extra'"),
    ],
)
def test_bad_input_names_the_field(
    api: Api, stripe: StripeStandIn, body: dict[str, Any], message: str
) -> None:
    response = complete(api, body)
    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert stripe.calls("GET", "/v1/checkout/sessions/cs_1") == []


def test_a_guest_completes_with_the_token_of_their_success_url(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    created = api.post(
        "/api/payments/create-checkout",
        json={
            "priceId": ONE_TIME,
            "mode": "payment",
            "successUrl": "https://app.example.com/thanks?x=1",
            "cancelUrl": "https://app.example.com/no",
        },
    )
    assert created.status_code == 200
    [params] = stripe.checkout_params()
    success = params["success_url"]
    assert success.startswith("https://app.example.com/thanks?x=1&session_id={CHECKOUT_SESSION_ID}")
    token = success.split("checkout_token=")[1]
    digest = params["metadata"][TOKEN_DIGEST_KEY]
    assert token not in digest
    session = paid_session(
        stripe,
        None,
        subscription=None,
        mode="payment",
        customer_details={"email": "guest@example.com", "name": "Grace"},
    )
    session["metadata"] = {"price_id": ONE_TIME, TOKEN_DIGEST_KEY: digest}
    assert complete(api, {"sessionId": "cs_test_1", "token": token[:-1] + "x"}).status_code == 404
    response = complete(api, {"sessionId": "cs_test_1", "token": token})
    assert response.status_code == 200
    assert response.json()["email"] == "guest@example.com"
    assert response.json()["hasAccess"] is True
    post_event(api, stripe_event("checkout.session.completed", session))
    assert api.container.bus.wait_idle(15)  # type: ignore[attr-defined]
    assert confirmations(db) == [
        {"event_id": "granted_cs_test_1", "recipient": "guest@example.com"}
    ]
    invites = db.fetch_all("select event_id from public.sent_emails where kind = 'signin-link'")
    assert invites == [{"event_id": "invited_cs_test_1"}]


def test_the_success_url_carries_the_session_template_once() -> None:
    given = "https://app.example.com/done?s={CHECKOUT_SESSION_ID}#top"
    assert completion_url(given) == given
    assert (
        completion_url("https://app.example.com/done#top", guest_token="t0k")
        == "https://app.example.com/done?session_id={CHECKOUT_SESSION_ID}&checkout_token=t0k#top"
    )


def test_on_pub_sub_the_api_makes_no_guest_account(
    production_api: Any, stripe: StripeStandIn, db: Database
) -> None:
    # The api holds no service-role key there: a new guest's account is left to the access
    # target, and the page is told so; nothing is written.
    api = production_api(supabase_secret_key=None)
    session = paid_session(stripe, None, subscription=None, mode="payment")
    digest = hashlib.sha256(b"t0k").hexdigest()
    session["metadata"] = {"price_id": ONE_TIME, TOKEN_DIGEST_KEY: digest}
    response = complete(api, {"sessionId": "cs_test_1", "token": "t0k"})
    assert response.status_code == 409
    assert response.json() == {
        "error": "Checkout session cs_test_1 is paid; the buyer's account is being made:"
        " the sign-in link comes by e-mail"
    }
    assert grants(db) == []
    assert db.fetch_all("select 1 from auth.users") == []
