"""Leaving over HTTP, with the real app, Postgres and the stand-ins: GET /api/me/export holds
the person's data and no one else's; DELETE /api/me cancels at Stripe, removes the GitHub
collaborator, deletes the auth user, keeps purchases anonymised, and a crash between any two of
its steps is finished by a retry with nothing done twice."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from accounts.leaving_rules import STEPS
from adapters.db.pool import Database
from adapters.supabase_auth import encode_value
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from teams import store as team_store
from tests.access.test_subscriber import post_event
from tests.conftest import Api
from tests.fakes.github import FakeGitHub
from tests.fakes.supabase import SECRET_KEY
from tests.helpers import HANG_GUARD, create_user, wait_for

REPO = "example-org/saas-starter-pro"
ADA = "ada@example.com"
GRACE = "grace@example.com"


@pytest.fixture
def app(
    api_factory: Callable[..., Api],
    fakes: tuple[StripeStandIn, AuthStandIn],
    github: FakeGitHub,
    db: Database,
) -> Api:
    """The app with Supabase Auth's secret key (its admin API deletes users) and GitHub."""
    seed_demo_products(db)
    return api_factory(
        supabase_secret_key=SECRET_KEY, github_token="ghp_test", github_api_url=github.server.url
    )


def bearer(api: Api, user_id: str, email: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token(sub=user_id, email=email)}"}


def buy(api: Api, stripe: StripeStandIn, user_id: str, email: str, price: str, mode: str) -> str:
    """A checkout made through the route and paid on the stand-in, its events delivered to the
    webhook signed as Stripe signs them; returns the session's id."""
    made = api.post(
        "/api/payments/create-checkout",
        json={
            "priceId": price,
            "mode": mode,
            "successUrl": "https://app.example.com/thanks",
            "cancelUrl": "https://app.example.com/no",
        },
        headers=bearer(api, user_id, email),
    )
    assert made.status_code == 200, made.text
    session = list(stripe.sessions)[-1]
    for event in stripe.complete(session, email=email):
        assert post_event(api, json.dumps(event).encode()).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    return session


@pytest.fixture
def ada(
    app: Api, fakes: tuple[StripeStandIn, AuthStandIn], github: FakeGitHub, db: Database
) -> str:
    """Ada: a subscriber, a buyer of a repository product with access on GitHub, a lead."""
    stripe = fakes[0]
    user = create_user(db, ADA, name="Ada Lovelace")
    buy(app, stripe, user, ADA, "price_demo_team_monthly", "subscription")
    buy(app, stripe, user, ADA, "price_demo_pro_github", "payment")
    granted = app.post(
        "/api/github/access", json={"username": "ada-l"}, headers=bearer(app, user, ADA)
    )
    assert granted.status_code == 200, granted.text
    github.accepted.add((REPO, "ada-l"))
    assert app.post("/api/lead", json={"email": ADA}).status_code == 200
    assert app.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    return user


def delete(api: Api, user_id: str, body: Any = None, email: str = ADA) -> Any:
    return requests.delete(
        api.url + "/api/me",
        json={"confirm": email} if body is None else body,
        headers=bearer(api, user_id, email),
        timeout=HANG_GUARD,
    )


def subscriptions(stripe: StripeStandIn) -> dict[str, str]:
    return {sid: s["status"] for sid, s in stripe.subscriptions.items()}


def outbox(api: Api) -> list[str]:
    folder = Path(api.container.settings.email_outbox_dir)
    return [p.read_text() for p in sorted(folder.glob("*.eml"))] if folder.exists() else []


def goodbyes(api: Api) -> list[str]:
    return [m for m in outbox(api) if "account is deleted" in m]


# Export.


def test_the_export_holds_their_data_and_no_one_elses(
    app: Api, ada: str, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    grace = create_user(db, GRACE, name="Grace Hopper")
    buy(app, fakes[0], grace, GRACE, "price_demo_starter_one_time", "payment")
    team = app.post("/api/teams", json={"name": "Engines"}, headers=bearer(app, ada, ADA)).json()
    with db.transaction() as conn:  # Grace joins Ada's team
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, 'member')",
            (team["id"], grace),
        )
    app.post("/api/lead", json={"email": GRACE})

    response = app.get("/api/me/export", headers=bearer(app, ada, ADA))

    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "private, no-store"
    data = response.json()
    assert data["profile"]["email"] == ADA
    assert data["profile"]["name"] == "Ada Lovelace"
    assert len(data["purchases"]) == 2
    assert {p["customer_email"] for p in data["purchases"]} == {ADA}
    assert [(g["kind"], g["active"]) for g in data["grants"]].count(("subscription", True)) == 1
    assert [g["github_username"] for g in data["githubGrants"]] == ["ada-l"]
    assert [(t["name"], t["role"]) for t in data["teams"]] == [("Engines", "owner")]
    assert [lead["email"] for lead in data["leads"]] == [ADA]
    assert {m["kind"] for m in data["emailsSent"]} >= {"purchase-confirmation"}
    assert len(data["accounts"]) == 1
    assert data["accounts"][0]["stripe_customers"]
    text = response.text.lower()
    assert "grace" not in text  # not the teammate, her purchase, her lead or her mails
    assert grace not in text
    assert "token_hash" not in text
    assert 'is_admin": true' not in text


def test_the_export_needs_a_signed_in_user(app: Api) -> None:
    assert app.get("/api/me/export").status_code == 401


# Deletion.


def test_deleting_cancels_at_stripe_removes_github_deletes_the_user_and_keeps_books(
    app: Api,
    ada: str,
    fakes: tuple[StripeStandIn, AuthStandIn],
    github: FakeGitHub,
    db: Database,
) -> None:
    stripe, supabase = fakes
    assert set(subscriptions(stripe).values()) == {"active"}

    response = delete(app, ada)

    assert response.status_code == 200, response.text
    assert response.json() == {"deleted": True, "finished": True, "remaining": []}
    assert set(subscriptions(stripe).values()) == {"canceled"}
    assert len(stripe.calls("DELETE", "/v1/subscriptions/")) == 1
    assert (REPO, "ada-l") not in github.collaborators
    assert supabase.calls("DELETE", f"/auth/v1/admin/users/{ada}")
    assert db.fetch_all("select 1 from auth.users where id = %s", (ada,)) == []
    assert db.fetch_all("select 1 from public.profiles where id = %s", (ada,)) == []
    purchases = db.fetch_all(
        "select user_id, account_id, customer_email, amount_total, stripe_checkout_session_id"
        " from public.purchases"
    )
    assert len(purchases) == 2  # kept for the books...
    assert all(p["user_id"] is None and p["customer_email"] is None for p in purchases)
    assert all(p["stripe_checkout_session_id"] for p in purchases)  # ...tied to Stripe's
    assert db.fetch_all("select 1 from public.leads") == []
    assert (
        db.fetch_all(
            "select 1 from public.sent_emails"
            " where lower(recipient) = %s and kind <> 'account-deleted'",
            (ADA,),
        )
        == []
    )
    assert app.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [goodbye] = goodbyes(app)
    assert f"To: {ADA}" in goodbye or ADA in goodbye
    [row] = db.fetch_all(
        "select email, plan, steps_done, finished_at from public.account_deletions"
    )
    assert row["finished_at"] is not None
    assert row["email"] is None
    assert row["plan"] == {}
    assert list(row["steps_done"]) == list(STEPS)
    # Stripe is not allowed redaction jobs here (no preview version set): the founder's task.
    [task] = db.fetch_all("select kind, subject, detail from public.founder_tasks")
    assert task["kind"] == "stripe_redact_customer"
    assert task["subject"].startswith("cus_")
    # Gone: the same token is refused, even to delete again.
    assert delete(app, ada).status_code == 401


# A token outlives its user: every route refuses it once the account is deleted.

SIGNED_IN_ROUTES = [
    ("GET", "/api/me", None),
    ("GET", "/api/me/export", None),
    ("DELETE", "/api/me", {"confirm": ADA}),
    ("GET", f"/api/teams/{uuid.uuid4()}", None),
    ("POST", "/api/teams", {"name": "After"}),
    ("POST", "/api/invitations/accept", {"token": "x" * 43}),
    ("POST", "/api/github/access", {"username": "ada-l"}),
    ("POST", "/api/payments/create-portal", {"returnUrl": "https://app.example.com/x"}),
    (
        "POST",
        "/api/payments/create-checkout",
        {
            "priceId": "price_demo_starter_one_time",
            "mode": "payment",
            "successUrl": "https://app.example.com/ok",
            "cancelUrl": "https://app.example.com/no",
        },
    ),
]


def call(api: Api, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    return requests.request(method, api.url + path, json=body, headers=headers, timeout=30)


def test_every_route_refuses_the_token_of_a_deleted_account(
    app: Api, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    stripe = fakes[0]
    user = create_user(db, ADA)
    headers = bearer(app, user, ADA)
    assert call(app, "GET", "/api/me", None, headers).status_code == 200
    assert delete(app, user).status_code == 200
    sessions = len(stripe.sessions)

    for method, path, body in SIGNED_IN_ROUTES:
        answer = call(app, method, path, body, headers)
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.json() == {"error": "This account was deleted"}, (method, path)
    # The cookie a page keeps is the same token: refused the same way.
    cookie = {
        app.container.supabase_auth.cookie_name: encode_value(
            {"access_token": headers["Authorization"].split(" ", 1)[1]}
        )
    }
    assert requests.get(app.url + "/api/me", cookies=cookie, timeout=30).status_code == 401
    # Nothing was made for it: no checkout, no team.
    assert len(stripe.sessions) == sessions
    assert db.fetch_all("select 1 from public.teams") == []


def test_an_admin_deleted_is_refused_the_support_api(
    api_factory: Callable[..., Api], db: Database
) -> None:
    app = api_factory(supabase_secret_key=SECRET_KEY, admin_mfa="off")
    user = create_user(db, ADA)
    with db.transaction() as conn:
        conn.execute("update public.profiles set is_admin = true where id = %s", (user,))
    headers = bearer(app, user, ADA)
    assert call(app, "GET", "/api/admin/metrics", None, headers).status_code == 200
    assert delete(app, user).status_code == 200

    assert call(app, "GET", "/api/admin/metrics", None, headers).status_code == 404


def test_while_a_deletion_runs_only_asking_again_is_let_through(
    app: Api, ada: str, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    """Asked for, the deletion stops everything else at once (nothing bought while its steps
    run); the deletion asked again finishes it."""
    stripe = fakes[0]
    stripe.outage_paths.add("/v1/subscriptions/")
    assert delete(app, ada).status_code == 503  # recorded, stopped before its first step
    stripe.outage_paths.clear()
    headers = bearer(app, ada, ADA)
    sessions = len(stripe.sessions)

    for method, path, body in SIGNED_IN_ROUTES:
        if method == "DELETE":
            continue
        answer = call(app, method, path, body, headers)
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.json() == {"error": "This account is being deleted"}, (method, path)
    assert len(stripe.sessions) == sessions

    assert delete(app, ada).status_code == 200
    assert call(app, "GET", "/api/me", None, headers).status_code == 401


def test_the_cancellation_a_deletion_asked_for_is_settled_not_dead_lettered(
    app: Api, ada: str, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    stripe = fakes[0]
    assert delete(app, ada).status_code == 200
    # Stripe answers the cancellation with its event, about a customer no account has now.
    [ended] = [e for e in stripe.events if e["type"] == "customer.subscription.deleted"]
    assert post_event(app, json.dumps(ended).encode()).status_code == 200
    assert app.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    [row] = db.fetch_all(
        "select outcome from public.processed_events where event_id = %s and consumer = 'access'",
        (ended["id"],),
    )
    assert row["outcome"] == "ignored: the customer's account was deleted"
    assert app.container.bus.dead_letters == []  # type: ignore[attr-defined]
    [customer] = db.fetch_all("select customer_id from public.erased_customers")
    assert customer["customer_id"] == ended["data"]["object"]["customer"]


@pytest.mark.parametrize(
    "body",
    [{}, {"confirm": ""}, {"confirm": "grace@example.com"}, {"confirm": 42}],
)
def test_a_missing_or_wrong_confirmation_is_400_and_changes_nothing(
    app: Api, ada: str, fakes: tuple[StripeStandIn, AuthStandIn], db: Database, body: Any
) -> None:
    response = delete(app, ada, body)
    assert response.status_code == 400
    assert "(confirm)" in response.json()["error"]
    assert set(subscriptions(fakes[0]).values()) == {"active"}
    assert db.fetch_all("select 1 from public.account_deletions") == []
    assert db.fetch_all("select 1 from public.profiles where id = %s", (ada,))


def test_the_confirmation_ignores_case(app: Api, db: Database) -> None:
    user = create_user(db, ADA)
    assert delete(app, user, {"confirm": "  Ada@Example.COM "}).status_code == 200
    assert db.fetch_all("select 1 from auth.users") == []


def test_the_last_owner_of_a_team_with_members_gets_409_naming_it(app: Api, db: Database) -> None:
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    team = app.post("/api/teams", json={"name": "Engines"}, headers=bearer(app, ada, ADA)).json()
    with db.transaction() as conn:
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, 'member')",
            (team["id"], grace),
        )
    response = delete(app, ada)
    assert response.status_code == 409
    assert "'Engines'" in response.json()["error"]
    assert team["id"] in response.json()["error"]
    assert db.fetch_all("select 1 from public.account_deletions") == []
    # Grace, a mere member, may leave: the team goes on with Ada.
    assert delete(app, grace, email=GRACE).status_code == 200
    assert db.fetch_all("select user_id::text from public.team_members") == [{"user_id": ada}]
    # Alone in it now, Ada may go: the team closes with her account.
    assert delete(app, ada).status_code == 200
    assert db.fetch_all("select 1 from public.teams") == []


# A crash between any two steps. Each injection makes one step fail: the dependency the step
# calls failing at its HTTP boundary, or Postgres refusing to record the step as done (the
# step's work happened, its record did not: as a crash right after it). The same call again
# finishes the deletion, with nothing sent or done twice.


def _refuse_recording(step: str) -> Callable[[Database], Callable[[], None]]:
    def inject(db: Database) -> Callable[[], None]:
        with db.transaction() as conn:
            conn.execute(
                "create function pg_temp_refuse() returns trigger language plpgsql as $$"
                f" begin if '{step}' = any(new.steps_done) then"
                " raise exception 'the connection dropped'; end if; return new; end $$".replace(
                    "pg_temp_refuse", "public.test_refuse_step"
                )
            )
            conn.execute(
                "create trigger test_refuse_step before update on public.account_deletions"
                " for each row execute function public.test_refuse_step()"
            )

        def heal() -> None:
            with db.transaction() as conn:
                conn.execute("drop trigger test_refuse_step on public.account_deletions")
                conn.execute("drop function public.test_refuse_step()")

        return heal

    return inject


@pytest.fixture
def injected(db: Database) -> Iterator[list[Callable[[], None]]]:
    heals: list[Callable[[], None]] = []
    yield heals
    for heal in heals:
        heal()


HTTP_FAULTS = ["stripe_subscriptions", "github", "supabase_auth", "stripe_privacy"]


@pytest.mark.parametrize("fault", [*HTTP_FAULTS, *(f"record:{s}" for s in STEPS)])
def test_a_crash_between_any_two_steps_is_finished_by_a_retry(
    api_factory: Callable[..., Api],
    fakes: tuple[StripeStandIn, AuthStandIn],
    github: FakeGitHub,
    ada: str,
    db: Database,
    injected: list[Callable[[], None]],
    fault: str,
) -> None:
    stripe, supabase = fakes
    app = api_factory(
        supabase_secret_key=SECRET_KEY,
        github_token="ghp_test",
        github_api_url=github.server.url,
        stripe_redaction_api_version="2025-07-30.preview",
    )
    if fault == "stripe_subscriptions":
        stripe.outage_paths.add("/v1/subscriptions/")
    elif fault == "github":
        github.down = True
    elif fault == "supabase_auth":
        supabase.unavailable = 10
    elif fault == "stripe_privacy":
        stripe.outage_paths.add("/v1/privacy/")
    else:
        injected.append(_refuse_recording(fault.split(":", 1)[1])(db))

    first = delete(app, ada)

    assert first.status_code in (500, 503), first.text
    [row] = db.fetch_all("select finished_at, last_error from public.account_deletions")
    assert row["finished_at"] is None
    assert row["last_error"]
    stripe.outage_paths.clear()
    github.down = False
    supabase.unavailable = 0
    for heal in injected:
        heal()
    injected.clear()

    retried = delete(app, ada)

    assert retried.status_code == 200, retried.text
    assert set(subscriptions(stripe).values()) == {"canceled"}
    assert len([c for c in stripe.calls("DELETE", "/v1/subscriptions/")]) == 1
    assert (REPO, "ada-l") not in github.collaborators
    assert db.fetch_all("select 1 from auth.users where id = %s", (ada,)) == []
    assert len(stripe.redaction_jobs) == 1  # one job for the one customer, run once
    [job] = stripe.redaction_jobs.values()
    assert len(stripe.calls("POST", f"/v1/privacy/redaction_jobs/{job['id']}/run")) == 1
    assert db.fetch_all("select 1 from public.founder_tasks") == []
    purchases = db.fetch_all("select user_id, customer_email from public.purchases")
    assert purchases
    assert all(p["customer_email"] is None for p in purchases)
    assert app.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    wait_for(lambda: goodbyes(app))
    assert len(goodbyes(app)) == 1
    [done] = db.fetch_all("select finished_at, steps_done from public.account_deletions")
    assert done["finished_at"] is not None
    assert list(done["steps_done"]) == list(STEPS)


# Stripe's redaction, and the founder's way to finish.


def test_while_stripe_validates_a_redaction_the_command_finishes_it(
    api_factory: Callable[..., Api],
    fakes: tuple[StripeStandIn, AuthStandIn],
    github: FakeGitHub,
    ada: str,
    db: Database,
) -> None:
    stripe = fakes[0]
    app = api_factory(
        supabase_secret_key=SECRET_KEY,
        github_token="ghp_test",
        github_api_url=github.server.url,
        stripe_redaction_api_version="2025-07-30.preview",
    )
    stripe.redaction_validating = True

    response = delete(app, ada)

    assert response.status_code == 202
    assert response.json() == {
        "deleted": True,
        "finished": False,
        "remaining": ["redact_customers"],
    }
    assert db.fetch_all("select 1 from auth.users where id = %s", (ada,)) == []
    [job] = stripe.redaction_jobs.values()
    assert job["status"] == "validating"
    assert job["objects"]["customers"] == [c for c in stripe.customers]
    created = stripe.calls("POST", "/v1/privacy/redaction_jobs")
    assert created[0].headers["Stripe-Version"] == "2025-07-30.preview"
    assert created[0].form() == {
        "objects": {"customers": list(stripe.customers)},
        "validation_behavior": "fix",
    }
    stripe.redaction_validating = False

    runner = create_app(app.container.settings).test_cli_runner()
    result = runner.invoke(args=["account-deletions", "resume"])

    assert result.exit_code == 0, result.output
    assert "left to do: nothing" in result.output
    assert job["status"] == "redacting"
    assert all(c["email"] == "[redacted]" for c in stripe.customers.values())
    [row] = db.fetch_all("select finished_at, email from public.account_deletions")
    assert row["finished_at"] is not None
    assert row["email"] is None
    # Nothing is left: the command says so, and runs nothing again.
    again = runner.invoke(args=["account-deletions", "resume"])
    assert "0 deletion(s) under way" in again.output
    assert len(stripe.calls("POST", f"/v1/privacy/redaction_jobs/{job['id']}/run")) == 1


def test_a_stripe_account_outside_the_preview_leaves_the_founder_a_task(
    api_factory: Callable[..., Api],
    fakes: tuple[StripeStandIn, AuthStandIn],
    github: FakeGitHub,
    ada: str,
    db: Database,
) -> None:
    stripe = fakes[0]
    app = api_factory(
        supabase_secret_key=SECRET_KEY,
        github_token="ghp_test",
        github_api_url=github.server.url,
        stripe_redaction_api_version="2025-07-30.preview",
    )
    stripe.redaction_enrolled = False

    assert delete(app, ada).status_code == 200

    assert stripe.redaction_jobs == {}
    [task] = db.fetch_all("select kind, subject, detail, deletion_id from public.founder_tasks")
    assert task["kind"] == "stripe_redact_customer"
    assert task["subject"] == next(iter(stripe.customers))
    assert "Stripe refused a redaction job" in task["detail"]
    assert task["deletion_id"] is not None


def test_a_deletion_another_call_is_running_is_left_to_it(
    app: Api, ada: str, fakes: tuple[StripeStandIn, AuthStandIn], db: Database
) -> None:
    stripe = fakes[0]
    stripe.outage_paths.add("/v1/subscriptions/")
    assert delete(app, ada).status_code == 503  # recorded, stopped before its first step
    stripe.outage_paths.clear()
    with db.transaction() as conn:  # another call holds it
        conn.execute(
            "update public.account_deletions set running_until = now() + interval '1 minute'"
        )

    response = delete(app, ada)

    assert response.status_code == 409
    assert "running now" in response.json()["error"]
    assert stripe.calls("DELETE", "/v1/subscriptions/") == []
    with db.transaction() as conn:  # that call died: its lease runs out
        conn.execute(
            "update public.account_deletions set running_until = now() - interval '1 second'"
        )
    assert delete(app, ada).status_code == 200
    assert len(stripe.calls("DELETE", "/v1/subscriptions/")) == 1


def test_a_team_its_creator_leaves_goes_on_with_its_other_owner(app: Api, db: Database) -> None:
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    team = app.post("/api/teams", json={"name": "Engines"}, headers=bearer(app, ada, ADA)).json()
    with db.transaction() as conn:
        conn.execute(
            "insert into public.team_members (team_id, user_id, role) values (%s, %s, 'owner')",
            (team["id"], grace),
        )
        conn.execute(  # an invitation once sent to Ada's address, accepted, and another one
            "insert into public.team_invitations (team_id, email, role, token_hash, expires_at,"
            " accepted_at) values (%s, 'Ada@example.com', 'member', 'h1', now(), now()),"
            " (%s, 'alan@example.com', 'member', 'h2', now() + interval '1 day', null)",
            (team["id"], team["id"]),
        )

    assert delete(app, ada).status_code == 200
    assert db.fetch_all("select email from public.team_invitations") == [
        {"email": "alan@example.com"}
    ]

    # The team, its account and Grace's membership stand; its account names Grace now.
    [account] = db.fetch_all(
        "select owner_id::text from public.accounts where id = %s", (team["id"],)
    )
    assert account["owner_id"] == grace
    assert db.fetch_all("select name from public.teams") == [{"name": "Engines"}]
    assert db.fetch_all("select user_id::text, role from public.team_members") == [
        {"user_id": grace, "role": "owner"}
    ]
    seen = app.get(f"/api/teams/{team['id']}", headers=bearer(app, grace, GRACE))
    assert seen.status_code == 200


# A team outlives its creator and keeps an owner, by any path.


def _team_of(app: Api, db: Database, creator: str, others: dict[str, str]) -> str:
    """A team Ada (`creator`) made through the route, with these other members (id: role) and
    a subscription of its own: a paying team."""
    team = str(
        app.post("/api/teams", json={"name": "Engines"}, headers=bearer(app, creator, ADA)).json()[
            "id"
        ]
    )
    with db.transaction() as conn:
        for user_id, role in others.items():
            conn.execute(
                "insert into public.team_members (team_id, user_id, role) values (%s, %s, %s)",
                (team, user_id, role),
            )
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, price_id, status,"
            " active) values (%s, 'sub_engines', 'subscription', 'price_demo_team_monthly',"
            " 'active', true)",
            (team,),
        )
    return team


def test_a_team_outlives_its_creator_deleted_from_the_dashboard(app: Api, db: Database) -> None:
    """Deleting the creator's auth user by SQL (as the Supabase dashboard does) passes the
    team's account to its longest-standing owner, as DELETE /api/me does: the team, its
    members and its subscription stay."""
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    bob = create_user(db, "bob@example.com")
    team = _team_of(app, db, ada, {grace: "owner", bob: "member"})

    with db.transaction() as conn:
        # As Supabase Auth's admin API deletes a user: as its own role, which owns auth.users
        # there (granted here for the one statement).
        conn.execute("grant usage on schema auth to supabase_auth_admin")
        conn.execute("grant select, delete on auth.users to supabase_auth_admin")
        conn.execute("set local role supabase_auth_admin")
        conn.execute("delete from auth.users where id = %s", (ada,))
        conn.execute("reset role")
        conn.execute("revoke select, delete on auth.users from supabase_auth_admin")
        conn.execute("revoke usage on schema auth from supabase_auth_admin")

    [account] = db.fetch_all("select owner_id::text from public.accounts where id = %s", (team,))
    assert account["owner_id"] == grace
    assert db.fetch_all("select name from public.teams") == [{"name": "Engines"}]
    assert db.fetch_all("select user_id::text, role from public.team_members order by role") == [
        {"user_id": bob, "role": "member"},
        {"user_id": grace, "role": "owner"},
    ]
    assert db.fetch_all(
        "select source_id from public.entitlements where account_id = %s", (team,)
    ) == [{"source_id": "sub_engines"}]
    seen = app.get(f"/api/teams/{team}", headers=bearer(app, grace, GRACE))
    assert seen.status_code == 200


def test_the_last_owner_deleted_from_the_dashboard_is_refused_naming_the_team(
    app: Api, db: Database
) -> None:
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    team = _team_of(app, db, ada, {grace: "member"})

    with pytest.raises(psycopg.errors.RestrictViolation) as refused, db.transaction() as conn:
        conn.execute("delete from auth.users where id = %s", (ada,))

    assert "last owner of the team 'Engines'" in str(refused.value)
    assert team in str(refused.value)
    assert db.fetch_all("select 1 from auth.users where id = %s", (ada,)) == [{"?column?": 1}]
    assert len(db.fetch_all("select 1 from public.team_members where team_id = %s", (team,))) == 2
    # Alone in the team, its creator goes and the team with them, as DELETE /api/me closes it.
    with db.transaction() as conn:
        conn.execute("delete from public.team_members where user_id = %s", (grace,))
        conn.execute("delete from auth.users where id = %s", (ada,))
    assert db.fetch_all("select 1 from public.teams") == []


def test_two_owners_deleting_their_accounts_at_once_leave_the_team_an_owner(
    app: Api, db: Database
) -> None:
    """Ada and Grace, the two owners of a team with a member, delete their accounts at the same
    moment: one deletion goes ahead, the other is the last owner's 409."""
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    bob = create_user(db, "bob@example.com")
    team = _team_of(app, db, ada, {grace: "owner", bob: "member"})
    start = threading.Barrier(2)

    def leave(user_id: str, email: str) -> Any:
        start.wait()
        return delete(app, user_id, email=email)

    # Both deletions held where they record themselves until both got that far (the lock is
    # let go before the pool waits for them).
    with ThreadPoolExecutor(max_workers=2) as pool, db.transaction() as holder:
        holder.execute("lock table public.account_deletions in exclusive mode")
        answers = [pool.submit(leave, ada, ADA), pool.submit(leave, grace, GRACE)]
        wait_for(
            lambda: (
                db.fetch_all(
                    "select count(*) as n from pg_stat_activity"
                    " where wait_event_type = 'Lock' and datname = current_database()"
                )[0]["n"]
                >= 2
            )
        )
    statuses = sorted(a.result().status_code for a in answers)

    assert statuses == [200, 409]
    owners = db.fetch_all(
        "select user_id::text from public.team_members where team_id = %s and role = 'owner'",
        (team,),
    )
    assert len(owners) == 1
    assert db.fetch_all(
        "select user_id::text from public.team_members where team_id = %s and role = 'member'",
        (team,),
    ) == [{"user_id": bob}]


def test_no_owner_steps_down_or_leaves_while_the_other_owners_deletion_is_under_way(
    app: Api, db: Database, injected: list[Callable[[], None]]
) -> None:
    """Ada's deletion is recorded but stopped before she left the team: she is leaving, so
    Grace, the other owner, is the team's last and may neither leave nor step down."""
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    bob = create_user(db, "bob@example.com")
    team = _team_of(app, db, ada, {grace: "owner", bob: "member"})
    injected.append(_refuse_recording("cancel_subscriptions")(db))
    assert delete(app, ada).status_code >= 500
    assert len(db.fetch_all("select 1 from public.account_deletions where finished_at is null"))

    as_grace = bearer(app, grace, GRACE)
    left = requests.delete(
        f"{app.url}/api/teams/{team}/members/{grace}", headers=as_grace, timeout=10
    )
    stepped_down = requests.patch(
        f"{app.url}/api/teams/{team}/members/{grace}",
        json={"role": "admin"},
        headers=as_grace,
        timeout=10,
    )

    for answer in (left, stepped_down):
        assert answer.status_code == 409, answer.text
        assert "at least one owner" in answer.json()["error"]
    injected.pop()()
    assert delete(app, ada).status_code == 200
    assert db.fetch_all("select user_id::text, role from public.team_members order by role") == [
        {"user_id": bob, "role": "member"},
        {"user_id": grace, "role": "owner"},
    ]


def test_the_other_owner_deleted_from_the_dashboard_while_one_leaves_is_refused(
    app: Api, db: Database, injected: list[Callable[[], None]]
) -> None:
    """Ada's deletion is recorded but stopped before she left the team; Grace, the other owner,
    is deleted from the dashboard meanwhile: Ada counts as gone there too, so Grace is the last
    owner and her deletion is refused, and the team keeps an owner once Ada's finishes."""
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    bob = create_user(db, "bob@example.com")
    team = _team_of(app, db, ada, {grace: "owner", bob: "member"})
    injected.append(_refuse_recording("cancel_subscriptions")(db))
    assert delete(app, ada).status_code >= 500

    with pytest.raises(psycopg.errors.RestrictViolation) as refused, db.transaction() as conn:
        conn.execute("delete from auth.users where id = %s", (grace,))

    assert "last owner of the team 'Engines'" in str(refused.value)
    injected.pop()()
    assert delete(app, ada).status_code == 200
    assert db.fetch_all(
        "select user_id::text, role from public.team_members where team_id = %s order by role",
        (team,),
    ) == [{"user_id": bob, "role": "member"}, {"user_id": grace, "role": "owner"}]


def test_no_one_joins_a_team_closing_with_its_owners_deletion(
    app: Api, db: Database, injected: list[Callable[[], None]]
) -> None:
    """Ada, alone in her team, deletes her account: the team closes with it. An invitation she
    sent before is refused while her deletion is under way (409, nothing joined), so Bob is
    never a member of a team that then closes under him."""
    ada = create_user(db, ADA)
    bob = create_user(db, "bob@example.com")
    team = _team_of(app, db, ada, {})
    token = "closing-team-token"
    with db.transaction() as conn:
        conn.execute(
            "insert into public.team_invitations (team_id, email, role, token_hash, invited_by,"
            " expires_at) values (%s, 'bob@example.com', 'member', %s, %s,"
            " now() + interval '7 days')",
            (team, hashlib.sha256(token.encode()).hexdigest(), ada),
        )
    injected.append(_refuse_recording("cancel_subscriptions")(db))
    assert delete(app, ada).status_code >= 500

    joined = requests.post(
        f"{app.url}/api/invitations/accept",
        json={"token": token},
        headers=bearer(app, bob, "bob@example.com"),
        timeout=10,
    )

    assert joined.status_code == 409, joined.text
    assert "closing" in joined.json()["error"]
    assert db.fetch_all(
        "select user_id::text from public.team_members where team_id = %s", (team,)
    ) == [{"user_id": ada}]
    injected.pop()()
    assert delete(app, ada).status_code == 200
    assert db.fetch_all("select 1 from public.teams") == []


@pytest.mark.parametrize("path", ["DELETE /api/me", "dashboard"])
def test_a_teams_name_is_never_said_to_be_written_by_the_member_it_passed_to(
    app: Api, db: Database, path: str
) -> None:
    """Ada named the team; when she goes its account passes to Grace, who never wrote the name:
    a mail quoting it may not say Grace wrote it (with its writer gone, it is not quoted)."""
    ada = create_user(db, ADA)
    grace = create_user(db, GRACE)
    team = _team_of(app, db, ada, {grace: "owner"})
    assert team_store.team_name(db, team) == team_store.TeamName("Engines", ADA, None)

    if path == "dashboard":
        with db.transaction() as conn:
            conn.execute("delete from auth.users where id = %s", (ada,))
    else:
        assert delete(app, ada).status_code == 200

    [account] = db.fetch_all("select owner_id::text from public.accounts where id = %s", (team,))
    assert account["owner_id"] == grace
    named = team_store.team_name(db, team)
    assert named is not None
    assert named.author_email is None
