"""Seats changed in Stripe's billing portal are told as `PATCH /api/teams/{teamId}/seats` tells
them: the same e-mails, once each under redelivery and events out of order, and a team's
repository follows the seats (taken off a member who loses theirs, given back with it, and
taken from every member when the subscription ends). Over HTTP, with Stripe's signed events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from email.message import EmailMessage

import pytest

from adapters.db.pool import Database
from tests.conftest import Api, serving
from tests.fakes.github import FakeGitHub
from tests.fakes.stripe import FakeStripe
from tests.handlers.test_team_billing import (
    SEAT_PRICE,
    T0,
    access,
    team_checkout,
    team_subscription,
)
from tests.handlers.test_teams import Person, join, new_team
from tests.helpers import stripe_event
from tests.subscribers.lifecycle_helpers import post_event, settle
from tests.subscribers.test_emails import outbox, text_of

REPO = "example-org/team-seats"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    yield from serving(FakeGitHub())


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
    api_factory: Callable[..., Api], github: FakeGitHub, stripe_fake: FakeStripe, db: Database
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
    assert "now has 2 seats" in text_of(lost)
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
    assert len(seat_mails(api, "bob@example.com", "restored")) == 1
    assert (REPO, "bob-gh") in github.collaborators

    # The route takes the same path: lowered by PATCH, told once, even when Stripe's own event
    # for the change arrives after it.
    stripe_fake.quantities["sub_team"] = 3
    patched = ada.call("PATCH", f"/api/teams/{team}/seats", {"quantity": 2})
    assert patched.status_code == 200, patched.text
    settle(api)
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
