"""The support API over HTTP (/api/admin/...): the founder finds a customer, replays a checkout
that dead-lettered, gives a comp; strangers and admins without a second factor find nothing."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import requests

from accounts import leaving_store as leaving
from adapters.db.pool import Database
from adapters.tokens import access_claims, sign_claims
from config import Settings, SettingsError
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from support import audit_store as audit
from tests.access.lifecycle_helpers import MONTHLY, post_event, session, settle, subscription
from tests.adapters.db.test_schema import as_role
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for

REASON = "Stripe was down when Ada paid; she wrote to support"


def token(api: Api, user: str, email: str, *, aal: str = "aal2") -> str:
    """A token as Supabase Auth signs it, after a second factor (`aal2`) unless told."""
    settings = api.container.settings
    claims = access_claims(user_id=user, email=email, supabase_url=str(settings.supabase_url))
    claims["aal"] = aal
    assert settings.supabase_jwt_secret is not None
    return sign_claims(claims, settings.supabase_jwt_secret.get_secret_value())


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def make_admin(db: Database, email: str = "founder@example.com") -> str:
    user = create_user(db, email)
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = true where id = %s", (user,))
    return user


def call(api: Api, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(
        method, api.url + path, timeout=HANG_GUARD, allow_redirects=False, **kwargs
    )


def admin_routes(api: Api) -> list[tuple[str, str]]:
    """Every (method, path) the app serves under /api/admin, its parameters filled in."""
    app = create_app(container=api.container)
    found = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/admin"):
            continue
        path = rule.rule
        for name in rule.arguments:
            value = "evt_x" if name == "eventId" else str(uuid.uuid4())
            path = path.replace(f"<{name}>", value)
        found += [(method, path) for method in sorted(rule.methods or ())]
    assert len({p for _, p in found}) >= 7
    return found


def assert_all_look_missing(api: Api, headers: dict[str, str]) -> None:
    body = {"reason": REASON, "priceId": MONTHLY, "until": None}
    for method, path in admin_routes(api):
        missing = call(api, method, "/api/no-such-route" + path, json=body)
        found = call(api, method, path, json=body, headers=headers)
        assert found.status_code == 404, (method, path, found.text)
        assert found.content == missing.content, (method, path)
        same = {k: v for k, v in found.headers.items() if k != "Date"}
        assert same == {k: v for k, v in missing.headers.items() if k != "Date"}, (method, path)


# Other spellings of an admin path that a router or proxy might bring to the same route.
SPELLINGS: tuple[Callable[[str], str], ...] = (
    lambda p: p.replace("/api/admin", "/api//admin"),
    lambda p: "/" + p,
    lambda p: p.replace("/api/admin/", "/api/admin//"),
    lambda p: p + "/",
    lambda p: p + "//",
    lambda p: p.replace("/api/admin", "/api/ADMIN"),
    lambda p: p.replace("/api/admin", "/API/Admin"),
    lambda p: p.replace("/api/admin", "/api%2Fadmin"),
    lambda p: p.replace("/api/admin", "/api%2F%2Fadmin"),
    lambda p: p.replace("/api/admin/", "/api/admin%2F"),
    lambda p: p.replace("/api/admin", "/api/%61dmin"),
    lambda p: p.replace("/api/admin", "/api%252Fadmin"),
)
# A method the route has and one it has not (a 405 would name the route's methods).
METHODS = ("GET", "POST", "PUT", "OPTIONS")


def assert_no_spelling_is_found(api: Api, headers: dict[str, str]) -> None:
    """Every spelling of every admin path, by every method, answers as a path that does not
    exist: no redirect to the route, no 405 naming its methods."""
    paths = sorted({p for _, p in admin_routes(api)})
    for path in paths:
        for spelled in (spell(path) for spell in SPELLINGS):
            for method in METHODS:
                missing = call(api, method, "/api/no-such-route" + spelled)
                found = call(api, method, spelled, headers=headers)
                assert found.status_code == 404, (method, spelled, found.status_code)
                assert found.content == missing.content, (method, spelled)
                assert "Location" not in found.headers
                assert "Allow" not in found.headers


def test_every_admin_route_is_missing_for_everyone_but_an_admin(api: Api, db: Database) -> None:
    user = create_user(db, "eve@example.com")
    admin = make_admin(db)
    for headers in (
        {},
        bearer("not-a-token"),
        bearer(token(api, user, "eve@example.com")),
        # ADMIN_MFA defaults to required: an admin signed in with one factor is nobody here.
        bearer(token(api, admin, "founder@example.com", aal="aal1")),
    ):
        assert_all_look_missing(api, headers)
    # The stranger and the nearest to an admin, by every spelling (the same guard for all).
    assert_no_spelling_is_found(api, {})
    assert_no_spelling_is_found(api, bearer(token(api, admin, "founder@example.com", aal="aal1")))
    # Nothing of theirs reached the audit log (rows are never removed: it is read per admin).
    assert db.fetch_all("select * from audit.admin_audit where admin_id = %s", (admin,)) == []
    ok = api.get("/api/admin/metrics", headers=bearer(token(api, admin, "founder@example.com")))
    assert ok.status_code == 200
    assert ok.headers["Cache-Control"] == "private, no-store"


def test_in_production_an_admin_needs_a_second_factor(
    production_api: Callable[..., Api], db: Database
) -> None:
    api = production_api()
    admin = make_admin(db)
    assert_all_look_missing(api, bearer(token(api, admin, "founder@example.com", aal="aal1")))
    ok = api.get("/api/admin/audit", headers=bearer(token(api, admin, "founder@example.com")))
    assert ok.status_code == 200


def test_admin_mfa_off_is_said_at_start_and_refused_in_production(
    settings_factory: Callable[..., Settings],
    api_factory: Callable[..., Api],
    db: Database,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(SettingsError, match="ADMIN_MFA must be `required` in production"):
        settings_factory(app_env="production", admin_mfa="off")
    api = api_factory(admin_mfa="off")
    requests.get(api.url + "/healthz", timeout=HANG_GUARD)
    assert "ADMIN_MFA=off" in caplog.text
    admin = make_admin(db)
    relaxed = api.get(
        "/api/admin/metrics", headers=bearer(token(api, admin, "founder@example.com", aal="aal1"))
    )
    assert relaxed.status_code == 200


def test_no_role_can_change_or_remove_an_audit_row(db: Database) -> None:
    row = audit.record(
        db, audit.Entry(admin_id=str(uuid.uuid4()), admin_email=None, action="t", reason="r")
    )
    # The one way in is `admin_audit_record`, and the database sets the time: no role inserts
    # a row of its own making (a backdated one), nor adds a trigger that would drop or rewrite
    # the rows to come.
    backdated = (
        "insert into audit.admin_audit (admin_id, action, at)"
        " values (gen_random_uuid(), 'forged', now() - interval '1 year')"
    )
    for role in ("authenticated", "anon", "service_role"):
        for statement in (
            backdated,
            "insert into audit.admin_audit (admin_id, action) values (gen_random_uuid(), 'x')",
            "create trigger quiet before insert on audit.admin_audit for each row"
            " execute function public.touch_updated_at()",
            "alter table audit.admin_audit disable trigger admin_audit_append_only",
            "select setval(pg_get_serial_sequence('audit.admin_audit', 'id'), 1)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # noqa: SIM117
                with as_role(db, role) as conn:
                    conn.execute(statement)
    with as_role(db, "service_role") as conn:
        [written] = conn.execute(
            "select audit.admin_audit_record(gen_random_uuid(), null, 'through the function',"
            " null, null, 'r', '{}'::jsonb) as id"
        ).fetchall()
        [kept_at] = conn.execute(
            "select at = now() as now from audit.admin_audit where id = %s", (written["id"],)
        ).fetchall()
        assert kept_at["now"] is True
    for role in ("authenticated", "anon"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), as_role(db, role) as conn:
            conn.execute(
                "select audit.admin_audit_record(gen_random_uuid(), null, 'x', null, null,"
                " null, '{}'::jsonb)"
            )
    for role in ("authenticated", "anon", "service_role"):
        for statement in (
            "update audit.admin_audit set reason = 'changed'",
            "delete from audit.admin_audit",
            "truncate audit.admin_audit",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # noqa: SIM117
                with as_role(db, role) as conn:
                    conn.execute(statement)
    # The owner (the migrations' role) too: the trigger holds where grants do not.
    with pytest.raises(psycopg.errors.InsufficientPrivilege), db.transaction() as conn:
        conn.execute("delete from audit.admin_audit where id = %s", (row,))
    [kept] = db.fetch_all("select reason from audit.admin_audit where id = %s", (row,))
    assert kept["reason"] == "r"


def test_a_checkout_that_dead_lettered_is_found_replayed_and_gives_access(
    api: Api, db: Database, stripe_fake: StripeStandIn
) -> None:
    seed_demo_products(db)
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    # Ada pays signed in, but her profile is not there yet (her sign-up is still on its way):
    # the checkout is retried until the bus gives up on it.
    ada = str(uuid.uuid4())
    body = stripe_event("checkout.session.completed", session(ada))
    event = json.loads(body)
    stripe_fake.events.insert(0, event)  # Stripe keeps the events it sent
    post_event(api, body)
    dead = api.container.bus.dead_letters  # type: ignore[attr-defined]
    wait_for(lambda: any(e.id == event["id"] for _, e in dead))
    with db.transaction() as conn:
        conn.execute(
            "insert into auth.users (id, email, raw_user_meta_data) values (%s, %s, '{}')",
            (ada, "ada@example.com"),
        )
    ada_token = bearer(token(api, ada, "ada@example.com", aal="aal1"))
    assert api.get("/api/me", headers=ada_token).json()["hasAccess"] is False

    found = api.get("/api/admin/customers", params={"q": "ADA@example"}, headers=founder).json()
    assert [p["id"] for p in found["items"]] == [ada]
    # The audit log, kept for good, keeps the searched address as its digest only.
    [searched] = db.fetch_all(
        "select subject, request from audit.admin_audit where admin_id = %s"
        " and action = 'admin.customers'",
        (admin,),
    )
    digest = "sha256:" + hashlib.sha256(b"ada@example").hexdigest()
    assert searched["subject"] == digest
    assert searched["request"]["query"] == f"q={digest}"
    assert "ada@" not in json.dumps(searched).lower()
    seen = api.get(f"/api/admin/customers/{ada}", headers=founder).json()
    assert seen["person"]["email"] == "ada@example.com"
    assert [(d["eventId"], d["type"], d["appliedSince"]) for d in seen["deadLetters"]] == [
        (event["id"], "checkout.session.completed", None)
    ]

    unknown = api.post(
        "/api/admin/events/evt_nowhere/replay", json={"reason": REASON}, headers=founder
    )
    assert unknown.status_code == 404
    assert "Stripe knows no event evt_nowhere" in unknown.json()["error"]
    refused = api.post(f"/api/admin/events/{event['id']}/replay", json={}, headers=founder)
    assert refused.status_code == 400
    assert "reason" in refused.json()["error"]
    replayed = api.post(
        f"/api/admin/events/{event['id']}/replay", json={"reason": REASON}, headers=founder
    )
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["outcome"] == "granted"
    assert replayed.json()["appliedBefore"] is False
    assert replayed.json()["republished"] is True  # the e-mails subscriber gets it too
    assert api.get("/api/me", headers=ada_token).json()["hasAccess"] is True
    again = api.post(
        f"/api/admin/events/{event['id']}/replay", json={"reason": REASON}, headers=founder
    )
    assert again.json()["appliedBefore"] is True
    settle(api)
    ledger = db.fetch_all(
        "select outcome from public.processed_events where event_id = %s", (event["id"],)
    )
    assert [r["outcome"] for r in ledger] == ["granted"]
    after = api.get(f"/api/admin/customers/{ada}", headers=founder).json()
    assert after["deadLetters"][0]["appliedSince"] == "granted"
    assert any(e["id"] == event["id"] for e in after["events"])
    assert [p["checkoutSession"] for p in after["purchases"]] == [event["data"]["object"]["id"]]


def test_a_searched_name_is_kept_as_its_digest_only(api: Api, db: Database) -> None:
    """The log outlives a person's deletion: what an admin typed to find them (a name, an
    address, part of either) is kept as its digest; an id stays as typed."""
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    ada = create_user(db, "ada@example.com", name="Ada Lovelace")
    for q in ("Ada Lovelace", "lovelace", ada):
        found = api.get("/api/admin/customers", params={"q": q, "limit": "5"}, headers=founder)
        assert [p["id"] for p in found.json()["items"]] == [ada], q
    rows = db.fetch_all(
        "select subject, request from audit.admin_audit where admin_id = %s"
        " and action = 'admin.customers' order by id",
        (admin,),
    )
    digests = ["sha256:" + hashlib.sha256(q).hexdigest() for q in (b"ada lovelace", b"lovelace")]
    assert [r["subject"] for r in rows] == [*digests, ada]
    assert [r["request"]["query"] for r in rows] == [f"q={d}&limit=5" for d in [*digests, ada]]
    assert "lovelace" not in json.dumps(rows).lower()


def test_a_name_or_address_typed_as_a_customers_id_is_kept_as_its_digest_only(
    api: Api, db: Database
) -> None:
    """An admin looking a person up by typing their name or address where the id goes (the
    route answers 400) leaves in the log its digest only, in the subject and in the path alike:
    what was typed to find someone outlives their deletion."""
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    create_user(db, "ada@example.com", name="Ada Lovelace")
    for typed in ("Ada Lovelace", "ada@example.com", "Ada%40Example.com"):
        looked_up = api.get(f"/api/admin/customers/{typed}", headers=founder)
        assert looked_up.status_code == 400, typed
    rows = db.fetch_all(
        "select subject, request from audit.admin_audit where admin_id = %s order by id",
        (admin,),
    )
    typed_as = (b"ada lovelace", b"ada@example.com", b"ada@example.com")
    digests = ["sha256:" + hashlib.sha256(t).hexdigest() for t in typed_as]
    assert [r["subject"] for r in rows] == digests
    assert [r["request"]["path"] for r in rows] == [f"/api/admin/customers/{d}" for d in digests]
    kept = json.dumps(rows).lower()
    assert "lovelace" not in kept
    assert "example.com" not in kept


def test_a_comp_for_30_days_shows_in_me_and_in_the_audit_log(api: Api, db: Database) -> None:
    seed_demo_products(db)
    bob = create_user(db, "bob@example.com")
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    until = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    path = f"/api/admin/customers/{bob}/grants"

    unexplained = api.post(
        path, json={"priceId": MONTHLY, "until": until.isoformat()}, headers=founder
    )
    assert unexplained.status_code == 400
    assert "(reason)" in unexplained.json()["error"]
    assert db.fetch_all("select * from public.entitlements") == []

    given = api.post(
        path,
        json={"priceId": MONTHLY, "until": until.isoformat(), "reason": "Beta tester"},
        headers=founder,
    )
    assert given.status_code == 201, given.text
    grant = given.json()
    assert (grant["kind"], grant["active"], grant["cause"]["reason"]) == (
        "comp",
        True,
        "Beta tester",
    )

    me = api.get("/api/me", headers=bearer(token(api, bob, "bob@example.com", aal="aal1"))).json()
    assert me["hasAccess"] is True
    [held] = me["entitlements"]
    assert (held["kind"], held["priceId"], held["active"]) == ("comp", MONTHLY, True)
    assert datetime.fromisoformat(held["currentPeriodEnd"]) == until
    # A comp is told as free until its end, never as a paid renewing plan, nor who gave it.
    assert held["label"] == "Complimentary"
    end = f"{until:%b} {until.day}, {until.year}"
    assert held["summary"] == f"Complimentary access, free until {end}: nothing is charged."
    assert "renew" not in held["summary"]
    assert "founder" not in held["summary"]
    assert me["features"]
    # Through the Data API, Bob reads his grant, never who gave it or why.
    with as_role(db, "authenticated", bob, aal="aal2") as conn:
        [own] = conn.execute("select id, kind, current_period_end from public.entitlements")
        assert (str(own["id"]), own["kind"]) == (grant["id"], "comp")
    for column in ("reason", "granted_by", "*"):
        with (
            as_role(db, "authenticated", bob) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="entitlements"),
        ):
            conn.execute(f"select {column} from public.entitlements")  # noqa: S608 - constants
    [hook] = db.fetch_all(
        "select public.custom_access_token_hook(jsonb_build_object('user_id', %s::text,"
        " 'claims', '{}'::jsonb)) as claims",
        (bob,),
    )
    assert hook["claims"]["claims"]["has_access"] is True

    log = api.get("/api/admin/audit", headers=founder).json()["items"]
    gave = next(r for r in log if r["action"] == "admin.give_comp" and r["adminId"] == admin)
    assert (gave["adminId"], gave["subjectUserId"], gave["reason"]) == (admin, bob, "Beta tester")
    assert gave["request"]["method"] == "POST"
    # What was given: the price and its end, as asked.
    assert gave["request"]["body"] == {"priceId": MONTHLY, "until": until.isoformat()}

    # Past its end, everything that reads access stops counting it, with nothing run.
    with db.transaction() as conn:
        conn.execute(
            "update public.entitlements set current_period_end = now() - interval '1 second'"
            " where id = %s",
            (grant["id"],),
        )
    me = api.get("/api/me", headers=bearer(token(api, bob, "bob@example.com", aal="aal1"))).json()
    assert (me["hasAccess"], me["features"], me["entitlements"][0]["active"]) == (False, [], False)


def test_a_comp_is_ended_by_an_admin_and_a_stripe_grant_is_not(api: Api, db: Database) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    post_event(api, stripe_event("checkout.session.completed", session(ada)))
    settle(api)
    comp = api.post(
        f"/api/admin/customers/{ada}/grants",
        json={"priceId": MONTHLY, "until": None, "reason": "Friend of the house"},
        headers=founder,
    ).json()
    grants = api.get(f"/api/admin/customers/{ada}", headers=founder).json()["grants"]
    stripes = [g for g in grants if g["kind"] != "comp"]
    assert [g["cause"]["kind"] for g in stripes] == ["stripe checkout"]

    paid = call(
        api,
        "DELETE",
        f"/api/admin/grants/{stripes[0]['id']}",
        json={"reason": "x"},
        headers=founder,
    )
    assert paid.status_code == 409
    assert "Stripe" in paid.json()["error"]
    no_reason = call(api, "DELETE", f"/api/admin/grants/{comp['id']}", json={}, headers=founder)
    assert no_reason.status_code == 400
    ended = call(
        api, "DELETE", f"/api/admin/grants/{comp['id']}", json={"reason": "Done"}, headers=founder
    )
    assert ended.status_code == 200
    assert (ended.json()["active"], ended.json()["status"]) == (False, "ended")


def test_metrics_count_the_local_state(api: Api, db: Database, stripe_fake: StripeStandIn) -> None:
    seed_demo_products(db)
    stripe_fake.subscribe("sub_ada", customer="cus_ada", price=MONTHLY)
    stripe_fake.subscribe("sub_bob", customer="cus_bob", price=MONTHLY, status="trialing")
    ada = create_user(db, "ada@example.com")
    bob = create_user(db, "bob@example.com")
    carl = create_user(db, "carl@example.com")
    admin = make_admin(db)
    monthly = {"mode": "subscription", "amount_total": 1900}
    for who, name in ((ada, "ada"), (bob, "bob")):
        checkout = session(
            who, price=MONTHLY, id=f"cs_{name}", customer=f"cus_{name}", **monthly,
            subscription=f"sub_{name}", payment_intent=None,
            customer_details={"email": f"{name}@example.com"},
        )  # fmt: skip
        post_event(api, stripe_event("checkout.session.completed", checkout))
    settle(api)
    assert api.container.bus.dead_letters == []  # type: ignore[attr-defined]
    post_event(api, stripe_event("customer.subscription.created", subscription(customer="cus_ada")))
    trial = subscription(id="sub_bob", customer="cus_bob", status="trialing")
    post_event(api, stripe_event("customer.subscription.created", trial))
    # Carl buys once and is refunded in full.
    post_event(
        api,
        stripe_event(
            "checkout.session.completed",
            session(carl, id="cs_carl", customer="cus_carl", payment_intent="pi_carl"),
        ),
    )
    settle(api)
    refund = charge(id="ch_carl", customer="cus_carl", payment_intent="pi_carl")
    post_event(api, stripe_event("charge.refunded", refund))
    settle(api)

    answer = api.get(
        "/api/admin/metrics", headers=bearer(token(api, admin, "founder@example.com"))
    ).json()
    assert answer["mrr"] == {"usd": "19.00"}  # the trial pays nothing yet
    assert (answer["activeSubscriptions"], answer["trials"]) == (1, 1)
    assert (answer["newLast30Days"], answer["churnedLast30Days"]) == (2, 0)
    assert answer["refundsLast30Days"] == {"usd": {"count": 1, "amount": 4900}}
    computed = datetime.fromisoformat(answer["computedAt"])
    assert abs((datetime.now(UTC) - computed).total_seconds()) < 60
    # The currency is the price's own, as the catalogue keeps it, before any purchase's.
    with db.transaction() as conn:
        conn.execute(
            "update public.products set currency = 'eur' where stripe_price_id = %s", (MONTHLY,)
        )
    again = api.get("/api/admin/metrics", headers=bearer(token(api, admin, "founder@example.com")))
    assert again.json()["mrr"] == {"eur": "19.00"}


def charge(**extra: Any) -> dict[str, Any]:
    return {
        "object": "charge", "amount": 4900, "amount_refunded": 4900, "refunded": True,
        "currency": "usd", "invoice": None, **extra,
    }  # fmt: skip


def test_a_customer_is_found_by_stripe_customer_or_user_id_a_page_at_a_time(
    api: Api, db: Database
) -> None:
    seed_demo_products(db)
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    people = sorted(create_user(db, f"reader{n}@example.com") for n in range(3))
    post_event(
        api, stripe_event("checkout.session.completed", session(people[1], customer="cus_r1"))
    )
    settle(api)

    def search(**query: str) -> Any:
        return api.get("/api/admin/customers", params=query, headers=founder).json()

    assert [p["id"] for p in search(q="cus_r1")["items"]] == [people[1]]
    assert [p["id"] for p in search(q=people[2].upper())["items"]] == [people[2]]
    first = search(q="reader", limit="2")
    assert [p["id"] for p in first["items"]] == people[:2]
    rest = search(q="reader", limit="2", cursor=first["nextCursor"])
    assert ([p["id"] for p in rest["items"]], rest["nextCursor"]) == (people[2:], None)
    assert search(q="100%_")["items"] == []  # no wildcard from the query
    empty = api.get("/api/admin/customers", params={"q": " "}, headers=founder)
    assert empty.status_code == 400
    assert "q is required" in empty.json()["error"]


def test_a_comp_cannot_give_a_repository_or_end_in_the_past(api: Api, db: Database) -> None:
    seed_demo_products(db)
    bob = create_user(db, "bob@example.com")
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    path = f"/api/admin/customers/{bob}/grants"
    repository = api.post(
        path, json={"priceId": "price_demo_pro_github", "until": None, "reason": "x"},
        headers=founder,
    )  # fmt: skip
    assert repository.status_code == 400
    assert "(priceId)" in repository.json()["error"]
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    late = api.post(path, json={"priceId": MONTHLY, "until": past, "reason": "x"}, headers=founder)
    assert late.status_code == 400
    assert "(until)" in late.json()["error"]
    forgot = api.post(path, json={"priceId": MONTHLY, "reason": "x"}, headers=founder)
    assert forgot.status_code == 400
    assert "until" in forgot.json()["error"]
    assert db.fetch_all("select * from public.entitlements") == []


def test_a_sent_email_is_sent_again_once(api: Api, db: Database) -> None:
    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    body = stripe_event("checkout.session.completed", session(ada))
    post_event(api, body)
    settle(api)
    emails = api.get(f"/api/admin/customers/{ada}", headers=founder).json()["emails"]
    confirmation = next(e for e in emails if e["kind"] == "purchase-confirmation")
    assert confirmation["resentAt"] is None
    outbox = api.container.mailer.messages()  # type: ignore[attr-defined]
    path = f"/api/admin/emails/{confirmation['id']}/resend"

    assert api.post(path, json={}, headers=founder).status_code == 400
    again = api.post(path, json={"reason": "Ada lost the receipt"}, headers=founder)
    assert again.status_code == 200, again.text
    assert again.json()["recipient"] == "ada@example.com"
    now = api.container.mailer.messages()  # type: ignore[attr-defined]
    [copy] = [p for p in now if p not in outbox]
    key = f"{confirmation['eventId']}/purchase-confirmation"
    first = api.container.mailer.find(key)  # type: ignore[attr-defined]
    assert _without_headers(copy.read_bytes()) == _without_headers(first.read_bytes())

    twice = api.post(path, json={"reason": "Once more"}, headers=founder)
    assert twice.status_code == 409
    assert len(api.container.mailer.messages()) == len(now)  # type: ignore[attr-defined]
    emails = api.get(f"/api/admin/customers/{ada}", headers=founder).json()["emails"]
    assert next(e for e in emails if e["id"] == confirmation["id"])["resentAt"] is not None


def _without_headers(eml: bytes) -> list[str]:
    """A message's subject, addresses and bodies: what a resend must keep."""
    import email
    import email.policy

    parsed = email.message_from_bytes(eml, policy=email.policy.default)
    parts = [str(p.get_content()) for p in parsed.walk() if not p.is_multipart()]
    return [str(parsed["Subject"]), str(parsed["To"]), str(parsed["From"]), *parts]


def test_a_resend_through_resend_is_the_message_resend_keeps(
    api_factory: Callable[..., Api], db: Database, resend: Any
) -> None:
    """In one process, the api sends it with Resend's key (on the Pub/Sub design, the emails
    target does: tests/emails/test_resend_on_pubsub.py)."""
    from adapters.mail.message import send_email
    from emails import store as sent_emails

    api = api_factory(resend_api_key="re_test_x", resend_api_url=resend.server.url)
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    sent = send_email(
        api.container.mailer,
        to="ada@example.com",
        subject="Your invoice is paid",
        text="Thank you",
        html="<p>Thank you</p>",
        from_="Acme <billing@acme.dev>",
        idempotency_key="evt_paid/invoice-paid",
    )
    sent_emails.record(
        db,
        event_id="evt_paid",
        kind="invoice-paid",
        recipient="ada@example.com",
        provider_id=sent["id"],
    )
    answer = api.post(
        "/api/admin/emails/evt_paid:invoice-paid/resend",
        json={"reason": "Lost it"},
        headers=founder,
    )
    assert answer.status_code == 200, answer.text
    first, copy = resend.delivered
    assert copy == first
    assert resend.delivered_keys == ["evt_paid/invoice-paid", "resend/evt_paid/invoice-paid"]
    sent_emails.record(
        db, event_id="evt_in", kind="signin-link", recipient="ada@example.com", provider_id=None
    )
    stale = api.post(
        "/api/admin/emails/evt_in:signin-link/resend", json={"reason": "x"}, headers=founder
    )
    assert stale.status_code == 409
    assert "may no longer be true" in stale.json()["error"]


def test_a_resend_the_provider_fails_is_503_and_may_be_asked_again(
    api_factory: Callable[..., Api], db: Database, resend: Any
) -> None:
    """In one process: the claim is undone, so the admin's next ask sends it."""
    from adapters.mail.message import send_email
    from emails import store as sent_emails

    api = api_factory(resend_api_key="re_test_x", resend_api_url=resend.server.url)
    founder = bearer(token(api, make_admin(db), "founder@example.com"))
    sent = send_email(
        api.container.mailer,
        to="ada@example.com",
        subject="Your invoice is paid",
        text="Thank you",
        html="<p>Thank you</p>",
        from_="Acme <billing@acme.dev>",
        idempotency_key="evt_paid/invoice-paid",
    )
    sent_emails.record(
        db,
        event_id="evt_paid",
        kind="invoice-paid",
        recipient="ada@example.com",
        provider_id=sent["id"],
    )
    path = "/api/admin/emails/evt_paid:invoice-paid/resend"
    resend.fail_next(3)  # every attempt of the mailer's send

    failed = api.post(path, json={"reason": "Lost it"}, headers=founder)

    assert failed.status_code == 503, failed.text
    assert db.fetch_all("select 1 from public.email_resends") == []
    assert len(resend.delivered) == 1
    again = api.post(path, json={"reason": "Lost it"}, headers=founder)
    assert again.status_code == 200, again.text
    assert resend.delivered_keys == ["evt_paid/invoice-paid", "resend/evt_paid/invoice-paid"]


def test_no_mail_of_a_deleted_person_is_sent_again(
    api_factory: Callable[..., Api], db: Database, resend: Any
) -> None:
    """Resend keeps its copy of what it sent, erased address and all: after the person's
    deletion, a resend of their mail is refused (409) and nothing goes out."""
    from adapters.mail.message import send_email
    from emails import store as sent_emails

    api = api_factory(resend_api_key="re_test_x", resend_api_url=resend.server.url)
    founder = bearer(token(api, make_admin(db), "founder@example.com"))
    ada = create_user(db, "ada@example.com")
    for kind in ("invoice-paid", "purchase-confirmation"):
        sent = send_email(
            api.container.mailer,
            to="ada@example.com",
            subject="Your invoice is paid",
            text="Thank you",
            html="<p>Thank you</p>",
            from_="Acme <billing@acme.dev>",
            idempotency_key=f"evt_paid/{kind}",
        )
        sent_emails.record(
            db, event_id="evt_paid", kind=kind, recipient="ada@example.com", provider_id=sent["id"]
        )
    # One resend asked before the deletion: what it recorded goes with the address.
    path = "/api/admin/emails/evt_paid:{}/resend"
    before = api.post(path.format("invoice-paid"), json={"reason": "Lost it"}, headers=founder)
    assert before.status_code == 200, before.text
    gone = requests.delete(
        api.url + "/api/me",
        json={"confirm": "ada@example.com"},
        headers=bearer(token(api, ada, "ada@example.com", aal="aal1")),
        timeout=30,
    )
    assert gone.status_code == 200, gone.text
    delivered = len(resend.delivered)

    after = api.post(
        path.format("purchase-confirmation"), json={"reason": "Lost it"}, headers=founder
    )

    assert after.status_code == 409, after.text
    assert "deleted" in after.json()["error"]
    assert len(resend.delivered) == delivered
    assert (
        db.fetch_all("select 1 from public.email_resends where kind = 'purchase-confirmation'")
        == []
    )
    kept = db.fetch_all("select recipient from public.email_resends")
    assert [r["recipient"] for r in kept] == [""]


def test_a_local_founder_makes_themselves_admin_and_signs_in_with_a_second_factor(
    api: Api, db: Database
) -> None:
    create_user(db, "founder@example.com")
    cli = create_app(container=api.container).test_cli_runner()

    def run(*args: str) -> str:
        result = cli.invoke(args=["users", *args])
        assert result.exit_code == 0, result.output
        return result.output.strip()

    one_factor = run("token", "founder@example.com")
    assert "admin: founder@example.com" in run("admin", "founder@example.com")
    assert api.get("/api/admin/metrics", headers=bearer(one_factor)).status_code == 404
    two_factors = run("token", "--aal2", "founder@example.com")
    assert api.get("/api/admin/metrics", headers=bearer(two_factors)).status_code == 200


def test_a_subscription_ending_under_a_running_comp_says_access_remains(
    api: Api, db: Database
) -> None:
    from tests.access.lifecycle_helpers import link
    from tests.emails.test_subscriber import outbox, text_of

    seed_demo_products(db)
    ada = create_user(db, "ada@example.com")
    link(db, ada, "cus_ada")
    admin = make_admin(db)
    t0 = int(time.time()) - 60  # the two events seconds apart: no tie to ask Stripe about
    post_event(api, stripe_event("customer.subscription.created", subscription(), created=t0))
    settle(api)
    given = api.post(
        f"/api/admin/customers/{ada}/grants",
        json={"priceId": MONTHLY, "until": None, "reason": "Beta tester"},
        headers=bearer(token(api, admin, "founder@example.com")),
    )
    assert given.status_code == 201
    ended = subscription(status="canceled", ended_at=t0 + 30)
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=t0 + 30))
    settle(api)

    [mail] = [m for m in outbox(api) if m["Subject"].startswith("Subscription ended")]
    text = " ".join(text_of(mail).split())
    assert "Your access through this subscription ended" in text
    assert "you keep access" in text
    me = api.get("/api/me", headers=bearer(token(api, ada, "ada@example.com", aal="aal1")))
    assert me.json()["hasAccess"] is True


def test_a_malformed_id_is_a_400_and_still_recorded(api: Api, db: Database) -> None:
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    answer = api.get("/api/admin/customers/not-a-user", headers=founder)
    assert answer.status_code == 400
    assert answer.json() == {"error": "userId is not an id"}
    ended = call(api, "DELETE", "/api/admin/grants/nope", json={"reason": "x"}, headers=founder)
    assert ended.status_code == 400
    rows = db.fetch_all(
        "select action, subject, subject_user_id from audit.admin_audit where admin_id = %s"
        " order by id",
        (admin,),
    )
    assert [(r["action"], r["subject"], r["subject_user_id"]) for r in rows] == [
        # What is typed where a customer's id goes may name them: kept as its digest.
        ("admin.customer", "sha256:" + hashlib.sha256(b"not-a-user").hexdigest(), None),
        ("admin.end_grant", "nope", None),
    ]


def test_a_founder_task_is_listed_until_an_admin_marks_it_done(api: Api, db: Database) -> None:
    admin = make_admin(db)
    founder = bearer(token(api, admin, "founder@example.com"))
    customer = f"cus_{uuid.uuid4().hex[:12]}"
    leaving.add_founder_task(
        db,
        kind="stripe_redact_customer",
        subject=customer,
        detail=f"Redact {customer} in the Stripe Dashboard",
        deletion_id=None,
    )
    listed = api.get("/api/admin/tasks", headers=founder)
    assert listed.status_code == 200
    [task] = [t for t in listed.json()["items"] if t["subject"] == customer]
    assert (task["kind"], task["doneAt"]) == ("stripe_redact_customer", None)

    path = f"/api/admin/tasks/{task['id']}/done"
    unexplained = api.post(path, json={}, headers=founder)
    assert unexplained.status_code == 400
    assert "reason" in unexplained.json()["error"]
    done = api.post(path, json={"reason": "Redacted in the Dashboard"}, headers=founder)
    assert done.status_code == 200
    assert done.json()["doneAt"] is not None
    after = api.get("/api/admin/tasks", headers=founder).json()["items"]
    assert customer not in [t["subject"] for t in after]
    unknown = api.post(
        f"/api/admin/tasks/{uuid.uuid4()}/done", json={"reason": "x"}, headers=founder
    )
    assert unknown.status_code == 404
    malformed = api.post("/api/admin/tasks/nope/done", json={"reason": "x"}, headers=founder)
    assert malformed.status_code == 400
    assert malformed.json() == {"error": "taskId is not an id"}
