"""GET /api/me's `teams`: each team's `hasAccess` is what the user gets from it, over HTTP with
Stripe's signed events: a member the seats do not cover reads false while the team pays."""

from __future__ import annotations

from adapters.db.pool import Database
from tests.access.lifecycle_helpers import post_event, settle
from tests.conftest import Api
from tests.helpers import stripe_event
from tests.teams.test_routes import Person, join, new_team
from tests.teams.test_team_billing import T0, seat_product, team_checkout, team_subscription


def team_of(person: Person) -> dict[str, object]:
    me = person.call("GET", "/api/me")
    assert me.status_code == 200, me.text
    [team] = me.json()["teams"]
    return dict(team)


def test_a_member_without_a_seat_reads_no_access_from_the_team(api: Api, db: Database) -> None:
    seat_product(db)
    ada = Person(api, db, "ada@example.com", "Ada Lovelace")
    team = new_team(ada)
    grace = Person(api, db, "grace@example.com")
    post_event(
        api, stripe_event("checkout.session.completed", team_checkout(ada.id, team), created=T0)
    )
    post_event(
        api, stripe_event("customer.subscription.created", team_subscription(2), created=T0 + 1)
    )
    settle(api)
    join(api, team, ada, grace)
    assert team_of(grace) | {"id": None} == {
        "id": None,
        "name": "Analytical Engines",
        "role": "member",
        "hasAccess": True,
        "hasSeat": True,
    }

    # One seat fewer in the portal: the newest member keeps the membership, not the access.
    post_event(
        api, stripe_event("customer.subscription.updated", team_subscription(1), created=T0 + 2)
    )
    settle(api)

    assert (team_of(grace)["hasAccess"], team_of(grace)["hasSeat"]) == (False, False)
    assert grace.call("GET", "/api/me").json()["hasAccess"] is False
    # The owner keeps the seat, and with it the team's access.
    assert (team_of(ada)["hasAccess"], team_of(ada)["hasSeat"]) == (True, True)
