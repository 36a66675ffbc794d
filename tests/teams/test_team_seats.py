"""Seats changed in Stripe's billing portal are told as `PATCH /api/teams/{teamId}/seats` tells
them: the same e-mails, once each under redelivery and events out of order, and a team's
repository follows the seats (taken off a member who loses theirs, given back with it, and
taken from every member when the subscription ends). Over HTTP, with Stripe's signed events."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from typing import Any

import pytest

from adapters.db.pool import Database
from core.events import Event, parse_event
from dev.stripe_stand_in import StripeStandIn
from teams import store as teams
from teams.rules import Member, seat_holders
from tests.access.lifecycle_helpers import link, post_event, settle
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.fakes.github import FakeGitHub
from tests.helpers import HANG_GUARD, stripe_event
from tests.teams.test_routes import Person, join, new_team
from tests.teams.test_team_billing import SEAT_PRICE, T0, access, team_checkout, team_subscription

REPO = "example-org/team-seats"


def repository_seat_product(db: Database) -> None:
    """A per-seat subscription whose product is a repository: each seated member's GitHub
    account is a collaborator while the subscription lasts."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, github_repo,"
            " billing_type, billing_interval, per_seat, features) values ('Team source', 12, %s,"
            " 'github', %s, 'subscription', 'month', true, '{pro}')",
            (SEAT_PRICE, REPO),
        )


def seat_mails(api: Api, email: str, kind: str) -> list[EmailMessage]:
    """The e-mails sent to `email` saying their seat ended (`lost`) or is back (`restored`)."""
    ending = {"lost": "ended", "restored": "is back"}[kind]
    return [m for m in outbox(api) if m["To"] == email and str(m["Subject"]).endswith(ending)]


def portal(api: Api, quantity: int, *, created: int, event_id: str | None = None) -> bytes:
    """Stripe's event for a quantity changed in the billing portal, posted and settled."""
    body = stripe_event(
        "customer.subscription.updated",
        team_subscription(quantity),
        created=created,
        event_id=event_id,
        previous={"items": {"data": [{"quantity": quantity + 1}]}},
    )
    post_event(api, body)
    settle(api)
    return body


def test_seats_changed_in_the_portal_are_told_and_move_the_repository(
    api_factory: Callable[..., Api], github: FakeGitHub, stripe_fake: StripeStandIn, db: Database
) -> None:
    api = api_factory(github_token="ghp_test", github_api_url=github.server.url)
    repository_seat_product(db)
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    grace, bob = Person(api, db, "grace@example.com"), Person(api, db, "bob@example.com")
    post_event(
        api, stripe_event("checkout.session.completed", team_checkout(ada.id, team), created=T0)
    )
    post_event(
        api, stripe_event("customer.subscription.created", team_subscription(3), created=T0 + 1)
    )
    settle(api)
    join(api, team, ada, grace)
    join(api, team, ada, bob)
    github.known_users |= {"grace-gh", "bob-gh"}
    for person, login in ((grace, "grace-gh"), (bob, "bob-gh")):
        answer = person.call("POST", "/api/github/access", {"username": login, "teamId": team})
        assert answer.status_code == 200, answer.text
    assert {(REPO, "grace-gh"), (REPO, "bob-gh")} <= github.collaborators

    # Fewer seats in the portal: the newest member loses theirs, is told, and leaves the repo.
    lowered = portal(api, 2, created=T0 + 10)
    assert not access(db, bob)
    assert access(db, grace)
    [lost] = seat_mails(api, "bob@example.com", "lost")
    # The team's name is quoted beside who wrote it, its creator.
    named = 'The team "Analytical Engines", named by Ada Lovelace (ada@example.com),'
    assert f"{named} now has 2 seats" in text_of(lost)
    assert "Analytical Engines" not in lost["Subject"]
    assert (REPO, "bob-gh") not in github.collaborators
    assert (REPO, "grace-gh") in github.collaborators

    # Stripe delivers it again, and an older event comes late: nothing changes, nobody is told
    # twice, and the repository stays as the seats say.
    post_event(api, lowered)
    settle(api)
    portal(api, 3, created=T0 + 5)
    assert not access(db, bob)
    assert len(seat_mails(api, "bob@example.com", "lost")) == 1
    assert seat_mails(api, "bob@example.com", "restored") == []
    assert (REPO, "bob-gh") not in github.collaborators

    # More seats in the portal: the seat, its e-mail and the repository come back.
    portal(api, 3, created=T0 + 20)
    assert access(db, bob)
    [restored] = seat_mails(api, "bob@example.com", "restored")
    assert f"{named} added seats" in text_of(restored)
    assert (REPO, "bob-gh") in github.collaborators

    # The route asks for the same at the period's end: nothing changes until Stripe's event for
    # it arrives, and its member is told once.
    stripe_fake.subscribe("sub_team", quantity=3)
    patched = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 2})
    assert patched.status_code == 200, patched.text
    settle(api)
    assert (REPO, "bob-gh") in github.collaborators
    portal(api, 2, created=T0 + 30)
    assert len(seat_mails(api, "bob@example.com", "lost")) == 2
    assert (REPO, "bob-gh") not in github.collaborators
    # Nobody else was told anything.
    assert seat_mails(api, "grace@example.com", "lost") == []
    assert seat_mails(api, "ada@example.com", "lost") == []

    # The subscription's end takes the repository from every member, and gives no seat back
    # (a seat of a team without access is no news).
    ended = team_subscription(2, status="canceled")
    post_event(api, stripe_event("customer.subscription.deleted", ended, created=T0 + 40))
    settle(api)
    assert not access(db, grace)
    assert {(r, u) for r, u in github.collaborators if r == REPO} == set()
    assert len(seat_mails(api, "bob@example.com", "restored")) == 1
    assert github.server.calls("DELETE", f"/repos/{REPO}/collaborators/grace-gh")


def seated_team(api: Api, db: Database, quantity: int) -> tuple[Person, str]:
    """Ada's team with a per-seat subscription of `quantity` seats."""
    repository_seat_product(db)
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    post_event(
        api, stripe_event("checkout.session.completed", team_checkout(ada.id, team), created=T0)
    )
    post_event(
        api,
        stripe_event("customer.subscription.created", team_subscription(quantity), created=T0 + 1),
    )
    settle(api)
    assert ada.call("GET", f"/api/teams/{team}").json()["seats"] == {"total": quantity, "used": 1}
    return ada, team


def invite(ada: Person, team: str, email: str) -> str:
    sent = ada.call("POST", f"/api/teams/{team}/invitations", {"email": email, "role": "member"})
    assert sent.status_code == 201, sent.text
    return str(sent.json()["id"])


def test_resending_an_expired_invitation_needs_a_free_seat(api: Api, db: Database) -> None:
    ada, team = seated_team(api, db, 2)
    grace = invite(ada, team, "grace@example.com")
    with db.transaction() as conn:  # a week went by: the invitation expired, its seat is free
        conn.execute(
            "update public.team_invitations set expires_at = now() - interval '1 minute'"
            " where id = %s",
            (grace,),
        )
    carl = invite(ada, team, "carl@example.com")
    assert ada.call("GET", f"/api/teams/{team}").json()["seats"] == {"total": 2, "used": 2}

    # A pending invitation keeps its seat: resent while every seat is taken.
    resent = ada.call("POST", f"/api/teams/{team}/invitations/{carl}/resend")
    assert resent.status_code == 200, resent.text
    # The expired one would take a seat nobody has free: refused as a new invitation is.
    refused = ada.call("POST", f"/api/teams/{team}/invitations/{grace}/resend")
    assert refused.status_code == 409
    new = ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "dan@example.com", "role": "member"}
    )
    assert new.status_code == 409
    assert refused.json() == new.json()
    assert "All 2 seats" in refused.json()["error"]
    [expired] = db.fetch_all(
        "select expires_at < now() as expired from public.team_invitations where id = %s",
        (grace,),
    )
    assert expired["expired"]  # nothing changed
    assert ada.call("GET", f"/api/teams/{team}").json()["seats"] == {"total": 2, "used": 2}

    # With a seat free again it is resent, and takes that seat.
    assert ada.call("DELETE", f"/api/teams/{team}/invitations/{carl}").status_code == 204
    again = ada.call("POST", f"/api/teams/{team}/invitations/{grace}/resend")
    assert again.status_code == 200, again.text
    listed = ada.call("GET", f"/api/teams/{team}").json()
    assert [i["email"] for i in listed["invitations"]] == ["grace@example.com"]
    assert listed["seats"] == {"total": 2, "used": 2}


def test_a_team_route_and_a_stripe_batch_on_one_team_take_turns(
    api: Api, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A role change (which gives the seats out again) and a batch of Stripe's events about the
    same team and one of its members' own subscription, started together many times: no
    deadlock (Postgres would break one, the route answering 500 or the batch retried one by
    one), and the end state is the one the last changes call for."""
    ada, team = seated_team(api, db, 3)
    grace, bob = Person(api, db, "grace@example.com"), Person(api, db, "bob@example.com")
    join(api, team, ada, grace)
    join(api, team, ada, bob)
    link(db, grace.id, "cus_grace")  # grace pays for herself too: her account is in the batch
    access_cycle = api.container.access_subscriber
    rounds = 24
    statuses, outcomes = [], []
    caplog.set_level(logging.WARNING)
    for n in range(rounds):
        grace_own = {
            **team_subscription(1, status="active" if n % 2 else "canceled"),
            "id": "sub_grace",
            "customer": "cus_grace",
        }
        kind = "updated" if n % 2 else "deleted"
        batch = [
            parse_event(json.loads(body))
            for body in (
                stripe_event(
                    "customer.subscription.updated",
                    team_subscription(2 + n % 2),
                    created=T0 + 100 + n,
                ),
                stripe_event(f"customer.subscription.{kind}", grace_own, created=T0 + 100 + n),
            )
        ]
        start = threading.Barrier(2, timeout=HANG_GUARD)

        def route(start: threading.Barrier, role: str) -> int:
            start.wait()
            path = f"/api/teams/{team}/members/{bob.id}"
            return ada.call("PATCH", path, {"role": role}).status_code

        def pipeline(start: threading.Barrier, events: list[Event]) -> list[str | Exception]:
            start.wait()
            return access_cycle.apply_many(events)

        with ThreadPoolExecutor(2) as pool:
            routed = pool.submit(route, start, "admin" if n % 2 else "member")
            applied = pool.submit(pipeline, start, batch)
            statuses.append(routed.result(timeout=HANG_GUARD))
            outcomes += applied.result(timeout=HANG_GUARD)
    settle(api)

    assert statuses == [200] * rounds
    assert [o for o in outcomes if isinstance(o, Exception)] == []
    broken = [
        r.getMessage()
        for r in caplog.records
        if "one by one" in r.getMessage() or "deadlock" in r.getMessage().lower()
    ]
    assert broken == []
    # The last round: bob an admin, 3 seats (everyone seated), grace's own subscription active.
    members = teams.members(db, team)
    assert {m.user_id: m.role for m in members} == {
        ada.id: "owner",
        grace.id: "member",
        bob.id: "admin",
    }
    seats = teams.seats(db, team)
    assert seats is not None
    assert seats.total == 3
    ruled = seat_holders([Member(m.user_id, m.role, m.joined_at) for m in members], seats.total)
    assert {m.user_id for m in members if m.has_seat} == ruled
    assert [access(db, p) for p in (ada, grace, bob)] == [True, True, True]
    # Every mirror is what its account and seats derive.
    mirrors = db.fetch_all(
        "select p.id, p.has_access, coalesce(own.has_access, false) or exists ("
        " select 1 from public.team_members m join public.accounts t on t.id = m.team_id"
        " where m.user_id = p.id and m.has_seat and t.has_access) as derived"
        " from public.profiles p left join public.accounts own"
        " on own.owner_id = p.id and own.kind = 'personal'"
    )
    assert [m for m in mirrors if m["has_access"] != m["derived"]] == []


LIFETIME_SEAT = "price_team_seat_lifetime"


def test_lifetime_seats_bought_for_a_team_limit_its_members(
    api: Api, db: Database, stripe_fake: StripeStandIn
) -> None:
    """A per-seat product sold once: the seats the buyer chose on Stripe's page (its line
    item's quantity, which Stripe's event does not carry) are the team's seats."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.products (name, price, stripe_price_id, type, billing_type,"
            " per_seat, features) values ('Team lifetime', 99, %s, 'link', 'one_time', true,"
            " '{pro}')",
            (LIFETIME_SEAT,),
        )
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    bought = ada.call(
        "POST",
        "/api/payments/create-checkout",
        {
            "priceId": LIFETIME_SEAT,
            "mode": "payment",
            "successUrl": "https://app.example.com/ok",
            "cancelUrl": "https://app.example.com/no",
            "teamId": team,
            "quantity": 3,
        },
    )
    assert bought.status_code == 200, bought.text
    [params] = stripe_fake.checkout_params()
    assert params["line_items"][0]["quantity"] == "3"
    # On Stripe's page the buyer took 2 seats, not 3.
    session: dict[str, Any] = {
        "id": "cs_test_lifetime01",
        "object": "checkout.session",
        "client_reference_id": ada.id,
        "customer": "cus_team",
        "mode": "payment",
        "metadata": {"price_id": LIFETIME_SEAT, "user_id": ada.id, "team_id": team},
        "payment_status": "paid",
        "payment_intent": "pi_team_lifetime",
        "amount_total": 19800,
        "currency": "usd",
        "created": T0,
        "customer_details": {"email": "ada@example.com", "name": "Ada Lovelace"},
    }
    stripe_fake.hold_session(
        {
            **session,
            "line_items": {
                "object": "list",
                "data": [{"id": "li_1", "quantity": 2, "price": {"id": LIFETIME_SEAT}}],
            },
        }
    )
    post_event(api, stripe_event("checkout.session.completed", session, created=T0))
    settle(api)

    assert access(db, ada)
    assert ada.call("GET", f"/api/teams/{team}").json()["seats"] == {"total": 2, "used": 1}
    grace = Person(api, db, "grace@example.com")
    join(api, team, ada, grace)
    assert access(db, grace)
    refused = ada.call(
        "POST", f"/api/teams/{team}/invitations", {"email": "bob@example.com", "role": "member"}
    )
    assert refused.status_code == 409
    assert "All 2 seats" in refused.json()["error"]
