"""A team's rights follow its current roles and seats, never who created it: a creator removed
from the team gets nothing of its purchases (repository access), reads none of its rows under
row-level security and receives none of its billing mail, which goes to its current owners.
Replayed over HTTP with Stripe's signed events, as the attack was shown."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import GITHUB, MONTHLY, post_event, settle
from tests.adapters.db.test_schema import as_role
from tests.conftest import Api
from tests.emails.test_subscriber import outbox
from tests.fakes.github import FakeGitHub
from tests.helpers import checkout_session_with_items, stripe_event, wait_for
from tests.teams.test_routes import Person, join, new_team

REPO = "example-org/saas-starter-pro"
NOW = int(time.time())


def team_checkout(
    stripe: StripeStandIn,
    session: str,
    *,
    buyer: Person,
    team: str,
    price: str,
    subscription: str | None = None,
) -> bytes:
    """A team's checkout as the API makes it (its owner or admin signed in, the team in its
    metadata), completed and paid; Stripe keeps it with its line items (the seats bought)."""
    obj: dict[str, Any] = {
        "id": session,
        "object": "checkout.session",
        "client_reference_id": buyer.id,
        "customer": "cus_team",
        "subscription": subscription,
        "mode": "subscription" if subscription else "payment",
        "metadata": {"price_id": price, "user_id": buyer.id, "team_id": team},
        "payment_status": "paid",
        "amount_total": 4900,
        "currency": "usd",
        "created": NOW - 120,
        "customer_details": {"email": buyer.email, "name": "Carol Creator"},
    }
    stripe.hold_session({**obj, **checkout_session_with_items(session, price)})
    return stripe_event("checkout.session.completed", obj, created=NOW - 100)


def team_rows(db: Database, person: Person, team: str) -> dict[str, int]:
    """How many of the team's rows `person` reads through the API (row-level security)."""
    queries = {
        "accounts": "select count(*) as n from public.accounts where id = %s",
        "entitlements": "select count(*) as n from public.entitlements where account_id = %s",
        "purchases": "select count(*) as n from public.purchases where account_id = %s",
        "teams": "select count(*) as n from public.teams where id = %s",
        "team_members": "select count(*) as n from public.team_members where team_id = %s",
    }
    with as_role(db, "authenticated", person.id) as conn:
        return {
            table: int(conn.execute(sql, (team,)).fetchone()["n"])  # type: ignore[index]
            for table, sql in queries.items()
        }


def test_a_removed_creator_keeps_nothing_of_the_team(
    gh_api: Api, github: FakeGitHub, db: Database, fakes: tuple[StripeStandIn, Any]
) -> None:
    seed_demo_products(db)
    stripe = fakes[0]
    carol = Person(gh_api, db, "carol@example.com", "Carol")
    team = new_team(carol)
    olivia = Person(gh_api, db, "olivia@example.com", "Olivia")
    join(gh_api, team, carol, olivia, role="owner")
    github.known_users |= {"carol-gh", "olivia-gh"}

    # Carol, the creator, buys the team a subscription and a repository.
    post_event(gh_api, team_checkout(
        stripe, "cs_test_teamsub", buyer=carol, team=team, price=MONTHLY, subscription="sub_team"
    ))  # fmt: skip
    post_event(
        gh_api, team_checkout(stripe, "cs_test_teamrepo", buyer=carol, team=team, price=GITHUB)
    )
    settle(gh_api)
    before = team_rows(db, carol, team)
    assert before == {
        "accounts": 1, "entitlements": 2, "purchases": 2, "teams": 1, "team_members": 2,
    }  # fmt: skip
    # Who paid is kept for the books.
    buyers = db.fetch_all(
        "select distinct user_id::text from public.purchases where account_id = %s", (team,)
    )
    assert buyers == [{"user_id": carol.id}]

    removed = olivia.call("DELETE", f"/api/teams/{team}/members/{carol.id}")
    assert removed.status_code == 204, removed.text
    settle(gh_api)

    # No repository: neither through the team nor as if the team's purchase were hers.
    mine = carol.call("POST", "/api/github/access", {"username": "carol-gh"})
    assert mine.status_code == 403, mine.text
    theirs = carol.call("POST", "/api/github/access", {"username": "carol-gh", "teamId": team})
    assert theirs.status_code == 404, theirs.text
    assert (REPO, "carol-gh") not in github.collaborators
    # No row of the team under row-level security.
    assert team_rows(db, carol, team) == dict.fromkeys(before, 0)
    # Still, the current owner gets the repository through her seat.
    olivias = olivia.call("POST", "/api/github/access", {"username": "olivia-gh", "teamId": team})
    assert olivias.status_code == 200, olivias.text

    # The team's billing mail goes to its current owner, not to the creator.
    sent_before = len(outbox(gh_api))
    ended = {
        "id": "sub_team",
        "object": "subscription",
        "customer": "cus_team",
        "status": "canceled",
        "ended_at": NOW - 10,
        "cancellation_details": {"reason": "cancellation_requested"},
        "items": {"object": "list", "data": [{"price": {"id": MONTHLY}}]},
    }
    post_event(gh_api, stripe_event("customer.subscription.deleted", ended, created=NOW - 10))
    failed = {
        "id": "in_team_failed",
        "object": "invoice",
        "customer": "cus_team",
        "customer_email": "carol@example.com",  # the address the team's customer was made with
        "subscription": "sub_team",
        "billing_reason": "subscription_cycle",
        "amount_due": 4900,
        "currency": "usd",
        "attempt_count": 1,
        "next_payment_attempt": NOW + 86400,
        "lines": {"data": [{"price": {"id": MONTHLY}}]},
    }
    post_event(gh_api, stripe_event("invoice.payment_failed", failed, created=NOW - 5))
    settle(gh_api)
    mails = outbox(gh_api)[sent_before:]
    assert mails, "the team's billing mail went to nobody"
    ended_mails = [m for m in mails if str(m["Subject"]).startswith("Subscription ended")]
    assert [m["To"] for m in ended_mails] == ["olivia@example.com"]
    assert all("carol@example.com" not in str(m["To"]) for m in mails)
    assert any("payment" in str(m["Subject"]).lower() for m in mails)


def test_an_owner_demoted_while_their_invitation_waits_invites_no_owner(
    api: Api, db: Database
) -> None:
    """Grace, an owner, invites an owner while Ada makes her a member: her role is asked again
    with the team held, so the invitation made after her demotion is refused (403) and no owner
    invitation exists."""
    ada = Person(api, db, "ada@example.com", "Ada")
    grace = Person(api, db, "grace@example.com", "Grace")
    team = new_team(ada)
    join(api, team, ada, grace, role="owner")

    with ThreadPoolExecutor(max_workers=1) as pool:
        with db.transaction() as holder:
            # The team held as a change of it holds it, until Grace's invitation waits for it.
            holder.execute("select 1 from public.accounts where id = %s for update", (team,))
            sent = pool.submit(
                grace.call,
                "POST",
                f"/api/teams/{team}/invitations",
                {"email": "mallory@example.com", "role": "owner"},
            )
            wait_for(
                lambda: (
                    db.fetch_all(
                        "select count(*) as n from pg_stat_activity where wait_event_type = 'Lock'"
                        " and datname = current_database()"
                    )[0]["n"]
                    >= 1
                )
            )
            holder.execute(
                "update public.team_members set role = 'member' where team_id = %s"
                " and user_id = %s",
                (team, grace.id),
            )
        answer = sent.result()

    assert answer.status_code == 403, answer.text
    assert (
        db.fetch_all("select 1 from public.team_invitations where email = 'mallory@example.com'")
        == []
    )
