"""POST /api/payments/complete-checkout: the success page applies its paid checkout at once,
through the same access cycle as Stripe's webhook, and the buyer is told once whichever comes
first."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest

from adapters.db.pool import Database
from billing.rules import TOKEN_DIGEST_KEY, completion_url
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, stripe_event

PATH = "/api/payments/complete-checkout"
ONE_TIME = "price_demo_starter_one_time"


@pytest.fixture
def stripe(fakes: tuple[StripeStandIn, AuthStandIn], db: Database) -> StripeStandIn:
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
    return stripe.hold_session(found)  # the session held: what changes it changes Stripe's


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
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    post_event(api, stripe_event("checkout.session.completed", session, event_id="evt_late"))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
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
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    response = complete(api, {"sessionId": "cs_test_1"}, token)
    assert response.status_code == 200
    assert response.json()["hasAccess"] is True
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
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
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    refund = {"id": "ch_1", "payment_intent": "pi_1", "amount_refunded": 1900, "refunded": True}
    post_event(api, stripe_event("charge.refunded", refund, created=now))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
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


def guest_checkout(api: Api, stripe: StripeStandIn, price: str, mode: str) -> tuple[str, str]:
    """A guest's checkout created through the route: the success URL's token and the digest
    it puts into the session's metadata."""
    created = api.post(
        "/api/payments/create-checkout",
        json={
            "priceId": price,
            "mode": mode,
            "successUrl": "https://app.example.com/thanks?x=1",
            "cancelUrl": "https://app.example.com/no",
        },
    )
    assert created.status_code == 200
    params = stripe.checkout_params()[-1]
    success = params["success_url"]
    assert success.startswith("https://app.example.com/thanks?x=1&session_id={CHECKOUT_SESSION_ID}")
    token = success.split("checkout_token=")[1]
    digest = params["metadata"][TOKEN_DIGEST_KEY]
    assert token not in digest
    return token, digest


def test_a_guest_completes_with_the_token_of_their_success_url(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    token, digest = guest_checkout(api, stripe, ONE_TIME, "payment")
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
    # What the session bought, applied; nothing of the account it went to.
    assert response.json() == {
        "sessionId": "cs_test_1",
        "applied": True,
        "hasAccess": True,
        "product": {"name": "Starter Kit", "priceId": ONE_TIME, "kind": "purchase"},
        "features": [],
        # The grant in the words GET /api/me uses.
        "label": "One-time purchase",
        "summary": "A one-time purchase: yours to keep, nothing renews.",
    }
    assert "guest@example.com" not in response.text
    assert response.headers["Cache-Control"] == "private, no-store"
    post_event(api, stripe_event("checkout.session.completed", session))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert confirmations(db) == [
        {"event_id": "granted_cs_test_1", "recipient": "guest@example.com"}
    ]
    invites = db.fetch_all("select event_id from public.sent_emails where kind = 'signin-link'")
    assert invites == [{"event_id": "invited_cs_test_1"}]


def test_a_guest_is_told_the_features_their_purchase_grants(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    # A repository product grants `github:<owner>/<repo>` besides its catalogue features: the
    # guest is told what its buyer then holds, as GET /api/me derives it.
    pro = "price_demo_pro_github"
    token, digest = guest_checkout(api, stripe, pro, "payment")
    session = paid_session(
        stripe,
        None,
        subscription=None,
        mode="payment",
        customer_details={"email": "new@example.com", "name": "Nia"},
    )
    session["metadata"] = {"price_id": pro, TOKEN_DIGEST_KEY: digest}
    response = complete(api, {"sessionId": "cs_test_1", "token": token})
    assert response.status_code == 200
    body = response.json()
    assert body["product"] == {"name": "Pro Repository", "priceId": pro, "kind": "purchase"}
    assert body["features"] == ["github:example-org/saas-starter-pro"]
    [made] = db.fetch_all("select id::text as id from auth.users where email = 'new@example.com'")
    made_token = api.token(sub=made["id"], email="new@example.com")
    me = api.get("/api/me", headers=bearer(made_token))
    assert me.json()["features"] == body["features"]


VICTIM = "victim@example.com"
VICTIM_NAME = "Victoria Vance"
TEAM_NAME = "Vance Private Projects"
TEAM_PRICE = "price_demo_team_monthly"
PRO = "price_demo_pro_github"


def victim_with_a_purchase_and_a_team(
    api: Api, stripe: StripeStandIn, db: Database
) -> dict[str, str]:
    """An existing user with a repository purchase of their own and a team: what a guest must
    never learn. Returns what identifies them."""
    victim = create_user(db, VICTIM, name=VICTIM_NAME)
    token = api.token(sub=victim, email=VICTIM)
    bought = paid_session(
        stripe,
        victim,
        session="cs_test_victim",
        subscription=None,
        mode="payment",
        payment_intent="pi_victim",
        customer="cus_victim",
    )
    bought["metadata"] = {"price_id": PRO, "user_id": victim}
    post_event(api, stripe_event("checkout.session.completed", bought, event_id="evt_victim"))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    team = api.post("/api/teams", json={"name": TEAM_NAME}, headers=bearer(token))
    assert team.status_code == 201
    return {"id": victim, "token": token, "team": team.json()["id"]}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def guest_trial_as(
    api: Api, stripe: StripeStandIn, email: str, **fields: Any
) -> tuple[str, dict[str, Any]]:
    """A guest's free trial of the team plan, paid (nothing to pay) with `email` typed on
    Stripe's page: the success URL's token and the session."""
    token, digest = guest_checkout(api, stripe, TEAM_PRICE, "subscription")
    session = paid_session(
        stripe,
        None,
        session="cs_test_guest",
        subscription="sub_guest",
        customer="cus_guest",
        payment_status="no_payment_required",
        amount_total=0,
        customer_details={"email": email, "name": "Mallory"},
        **fields,
    )
    session["metadata"] = {"price_id": TEAM_PRICE, TOKEN_DIGEST_KEY: digest}
    return token, session


def test_a_guest_paying_with_someone_elses_email_learns_nothing_of_their_account(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    # The address on Stripe's page is nobody's proof: the purchase lands on the account that
    # has it, and the success page's token must open the purchase only, not that account.
    victim = victim_with_a_purchase_and_a_team(api, stripe, db)
    token, _ = guest_trial_as(api, stripe, VICTIM)
    response = complete(api, {"sessionId": "cs_test_guest", "token": token})
    assert response.status_code == 200
    text = response.text
    for secret in (
        victim["id"],
        victim["team"],
        VICTIM,
        VICTIM_NAME,
        TEAM_NAME,
        "Pro Repository",
        PRO,
        "github:",
        "cs_test_victim",
        "cus_",
    ):
        assert secret not in text, secret
    assert response.json() == {
        "sessionId": "cs_test_guest",
        "applied": True,
        "hasAccess": True,
        "product": {"name": "Team Monthly", "priceId": TEAM_PRICE, "kind": "subscription"},
        "features": ["support", "templates"],
        "label": response.json()["label"],
        "summary": response.json()["summary"],
    }
    # Its words say nothing of the account either: no balance, no team, no address.
    assert response.json()["label"] == "Subscription"
    assert "left now" not in response.json()["summary"]
    assert "team" not in response.json()["summary"]
    # Signed in as someone else, the token opens no more.
    _, stranger = buyer(api, db, "stranger@example.com")
    as_stranger = complete(api, {"sessionId": "cs_test_guest", "token": token}, stranger)
    assert as_stranger.status_code == 200
    assert as_stranger.json() == response.json()
    # The attack is real: the trial went to the victim's account, beside what they had.
    me = api.get("/api/me", headers=bearer(victim["token"])).json()
    assert sorted(e["priceId"] for e in me["entitlements"]) == [PRO, TEAM_PRICE]
    assert [t["name"] for t in me["teams"]] == [TEAM_NAME]


def test_a_guest_is_told_their_own_grant_not_the_accounts_access(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    # The session's subscription ended before the page asked; the account it landed on keeps
    # access through its own purchase, which the guest's answer must not reflect.
    victim = victim_with_a_purchase_and_a_team(api, stripe, db)
    token, _ = guest_trial_as(api, stripe, VICTIM)
    assert complete(api, {"sessionId": "cs_test_guest", "token": token}).status_code == 200
    ended = {"id": "sub_guest", "customer": "cus_guest", "status": "canceled"}
    post_event(api, stripe_event("customer.subscription.deleted", ended))
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    response = complete(api, {"sessionId": "cs_test_guest", "token": token})
    assert response.status_code == 200
    assert response.json()["applied"] is True
    assert response.json()["hasAccess"] is False
    assert api.get("/api/me", headers=bearer(victim["token"])).json()["hasAccess"] is True


def test_the_sessions_own_buyer_still_gets_get_api_me_with_a_token_too(
    api: Api, stripe: StripeStandIn, db: Database
) -> None:
    user_id, token = buyer(api, db)
    session = paid_session(stripe, user_id)
    digest = hashlib.sha256(b"t0k").hexdigest()
    session["metadata"] = {**session["metadata"], TOKEN_DIGEST_KEY: digest}
    response = complete(api, {"sessionId": "cs_test_1", "token": "t0k"}, token)
    assert response.status_code == 200
    assert response.json()["id"] == user_id
    assert response.json() == api.get("/api/me", headers=bearer(token)).json()


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
