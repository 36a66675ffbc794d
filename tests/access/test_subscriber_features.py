"""Features end to end: signed Stripe events through the webhook, then what each place says
(GET /api/me, a guarded route of the founder's, the access token hook and the tokens `users
token` mints, row-level security), and Stripe's own summary compared with ours."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import jwt
import pytest
from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from access.guards import requires_feature
from adapters.db.pool import Database
from config import Settings
from dev import local_users
from main import create_app
from runtime.container import Container
from tests.access.lifecycle_helpers import post_event, session, settle, subscription
from tests.adapters.db.test_schema import as_role
from tests.conftest import Api
from tests.fakes.http import serve
from tests.fakes.supabase import JWT_SECRET
from tests.helpers import create_user, stripe_event

PRO_MONTHLY = "price_feat_pro_monthly"
LIFETIME = "price_feat_reports_lifetime"
T0 = 1_790_000_000


def add_products(db: Database) -> None:
    """A subscription granting `pro` and `api`, a lifetime purchase granting `reports`."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " billing_interval, features) values"
            " ('Pro', 19, %s, 'link', 'subscription', 'month', '{pro,api}'),"
            " ('Reports for life', 99, %s, 'link', 'one_time', null, '{reports}')",
            (PRO_MONTHLY, LIFETIME),
        )


guarded = Blueprint("guarded", __name__)


@guarded.get("/api/reports")
@requires_feature("pro")
def reports() -> ResponseReturnValue:
    return jsonify(reports=["q3"])


@pytest.fixture
def app_with_a_guarded_route(
    settings_factory: Callable[..., Settings], db: Database
) -> Iterator[Api]:
    """The real app over HTTP with a founder's route added, as a fork adds one."""
    container = Container(settings_factory())
    app = create_app(container=container)
    app.register_blueprint(guarded)
    server = serve(app)
    yield Api(url=next(server), container=container)
    container.close()
    server.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def hook(db: Database, user_id: str) -> dict[str, Any]:
    """The claims the hook returns, called as Supabase Auth calls it."""
    event = {
        "user_id": user_id,
        "claims": {"sub": user_id, "role": "authenticated", "aal": "aal1"},
        "authentication_method": "password",
    }
    with db.transaction() as conn:
        conn.execute("set local role supabase_auth_admin")
        row = conn.execute(
            "select public.custom_access_token_hook(%s::jsonb) as answer", (json.dumps(event),)
        ).fetchone()
    assert row is not None
    claims: dict[str, Any] = row["answer"]["claims"]
    return claims


@pytest.fixture
def pro_notes(db: Database) -> Iterator[None]:
    """A founder's table behind `has_feature('pro')`, with one row."""
    with db.transaction() as conn:
        conn.execute("create table public.pro_notes (id serial primary key, body text)")
        conn.execute("alter table public.pro_notes enable row level security")
        conn.execute(
            "create policy pro_only on public.pro_notes for select to authenticated"
            " using ((select public.has_feature('pro')))"
        )
        conn.execute("grant select on public.pro_notes to authenticated")
        conn.execute("insert into public.pro_notes (body) values ('only for pro')")
    yield
    with db.transaction() as conn:
        conn.execute("drop table public.pro_notes")


def rows_seen(db: Database, user_id: str) -> list[str]:
    """The founder's table read as the user, as the Data API reads it."""
    with as_role(db, "authenticated", user_id) as conn:
        return [r["body"] for r in conn.execute("select body from public.pro_notes").fetchall()]


def local_token(db: Database, settings: Settings, email: str) -> tuple[str, dict[str, Any]]:
    """A token as `users token` mints it, and its claims."""
    token = local_users.token(email=email, ttl=600, db=db, settings=settings)
    claims = jwt.decode(token, JWT_SECRET, algorithms=["HS256"], audience="authenticated")
    return token, claims


@pytest.mark.usefixtures("pro_notes")
def test_a_feature_bought_is_held_everywhere_and_its_end_takes_it_away(
    app_with_a_guarded_route: Api, db: Database
) -> None:
    api = app_with_a_guarded_route
    settings = api.container.settings
    add_products(db)
    ada = create_user(db, "ada@example.com")
    bob = create_user(db, "bob@example.com")
    post_event(api, stripe_event("checkout.session.completed", session(ada, price=LIFETIME)))
    pro = subscription(price=PRO_MONTHLY)
    post_event(api, stripe_event("customer.subscription.created", pro, created=T0))
    settle(api)

    me = api.get("/api/me", headers=bearer(api.token(sub=ada, email="ada@example.com"))).json()
    assert me["features"] == ["api", "pro", "reports"]
    claims = hook(db, ada)
    assert claims["aal"] == "aal1"  # every claim Supabase Auth sent is kept
    assert (claims["has_access"], claims["features"]) == (True, ["api", "pro", "reports"])
    assert hook(db, bob)["features"] == []
    assert rows_seen(db, ada) == ["only for pro"]
    assert rows_seen(db, bob) == []
    # A token `users token` mints carries the hook's claims, and the API takes it.
    token, before = local_token(db, settings, "ada@example.com")
    assert (before["has_access"], before["features"]) == (True, ["api", "pro", "reports"])
    assert before["role"] == "authenticated"
    allowed = api.get("/api/reports", headers=bearer(token))
    assert (allowed.status_code, allowed.json()) == (200, {"reports": ["q3"]})
    bob_token = api.token(sub=bob, email="bob@example.com")
    denied = api.get("/api/reports", headers=bearer(bob_token))
    assert (denied.status_code, denied.json()) == (403, {"error": "This needs the pro feature"})

    ended = subscription(price=PRO_MONTHLY, status="canceled", ended_at=T0 + 60)
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=T0 + 60))
    settle(api)

    me = api.get("/api/me", headers=bearer(api.token(sub=ada, email="ada@example.com"))).json()
    assert (me["hasAccess"], me["features"]) == (True, ["reports"])  # the lifetime purchase
    assert hook(db, ada)["features"] == ["reports"]
    assert rows_seen(db, ada) == []
    assert (
        api.get(
            "/api/reports", headers=bearer(api.token(sub=ada, email="ada@example.com"))
        ).status_code
        == 403
    )
    # A token issued before keeps its claims until it is refreshed; a new one has lost `pro`.
    assert "pro" in before["features"]
    assert local_token(db, settings, "ada@example.com")[1]["features"] == ["reports"]


def test_the_guard_answers_401_to_a_guest_and_a_bad_token(app_with_a_guarded_route: Api) -> None:
    api = app_with_a_guarded_route
    assert api.get("/api/reports").status_code == 401
    assert api.get("/api/reports").json() == {"error": "Sign in required"}
    assert api.get("/api/reports", headers=bearer("not-a-token")).status_code == 401


def summary(customer: str, *keys: str, has_more: bool = False) -> dict[str, Any]:
    """Stripe's `entitlements.active_entitlement_summary`, with an expanded feature."""
    return {
        "object": "entitlements.active_entitlement_summary",
        "customer": customer,
        "livemode": False,
        "entitlements": {
            "object": "list",
            "url": "/v1/entitlements/active_entitlements",
            "has_more": has_more,
            "data": [
                {
                    "id": f"ent_test_{key}",
                    "object": "entitlements.active_entitlement",
                    "feature": {
                        "id": f"feat_test_{key}",
                        "object": "entitlements.feature",
                        "active": True,
                        "livemode": False,
                        "lookup_key": key,
                        "metadata": {},
                        "name": key.title(),
                    },
                    "livemode": False,
                    "lookup_key": key,
                }
                for key in keys
            ],
        },
    }


def outcome(db: Database, event_type: str) -> list[str]:
    rows = db.fetch_all(
        "select e.outcome from public.processed_events e where e.consumer = 'access'"
        " and e.event_type = %s",
        (event_type,),
    )
    return [r["outcome"] for r in rows]


def differences(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.ERROR and "features of customer" in r.getMessage()
    ]


def a_buyer_of_both(api: Api, db: Database) -> str:
    """Ada, customer cus_ada, with the lifetime purchase and the Pro subscription."""
    add_products(db)
    ada = create_user(db, "ada@example.com")
    post_event(api, stripe_event("checkout.session.completed", session(ada, price=LIFETIME)))
    post_event(api, stripe_event("customer.subscription.created", subscription(price=PRO_MONTHLY)))
    settle(api)
    return ada


def test_stripes_summary_differing_from_ours_is_logged_with_both_lists(
    api: Api, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    ada = a_buyer_of_both(api, db)

    # The same features as Stripe's (the lifetime `reports` is not Stripe's to know): silent.
    agreeing = summary("cus_ada", "pro", "api")
    post_event(api, stripe_event("entitlements.active_entitlement_summary.updated", agreeing))
    settle(api)
    assert differences(caplog) == []

    # Stripe grants `exports` too: a feature the catalogue has not been told of.
    newer = summary("cus_ada", "pro", "api", "exports")
    post_event(api, stripe_event("entitlements.active_entitlement_summary.updated", newer))
    settle(api)
    assert differences(caplog) == [
        "features of customer cus_ada differ: Stripe's active entitlements"
        " ['api', 'exports', 'pro'], derived here ['api', 'pro']: the catalogue is out of date,"
        " or a subscription event is on its way"
    ]
    # Access itself is not changed by the summary: the ledger knows it arrived.
    assert outcome(db, "entitlements.active_entitlement_summary.updated") == ["ignored"] * 2
    assert api.get("/api/me", headers=bearer(api.token(sub=ada, email="ada@example.com"))).json()[
        "features"
    ] == [
        "api",
        "pro",
        "reports",
    ]


@pytest.mark.parametrize(
    "body",
    [
        summary("cus_ada", "exports", has_more=True),  # a list cut short: nothing to compare
        summary("cus_nobody", "pro"),  # no account pays as this customer
        summary("cus_ada"),  # none in Stripe: a catalogue on product metadata
    ],
)
def test_a_summary_that_cannot_be_compared_logs_no_difference(
    api: Api, db: Database, caplog: pytest.LogCaptureFixture, body: dict[str, Any]
) -> None:
    a_buyer_of_both(api, db)
    post_event(api, stripe_event("entitlements.active_entitlement_summary.updated", body))
    settle(api)
    assert outcome(db, "entitlements.active_entitlement_summary.updated") == ["ignored"]
    assert differences(caplog) == []
