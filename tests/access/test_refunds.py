"""Refunds and disputes through the webhook, the in-process bus, Postgres and GitHub's API."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import GITHUB, post_event, profile, session, settle
from tests.conftest import Api
from tests.fakes.github import FakeGitHub
from tests.helpers import create_user, stripe_event, wait_for

REPO = "example-org/saas-starter-pro"


@pytest.fixture
def ada(db: Database) -> str:
    seed_demo_products(db)
    return create_user(db, "ada@example.com", name="Ada Lovelace")


def bought(gh_api: Api, db: Database, user: str, *, price: str = GITHUB) -> None:
    post_event(gh_api, stripe_event("checkout.session.completed", session(user, price=price)))
    wait_for(lambda: profile(db, user)["has_access"])
    settle(gh_api)


def granted_to_octocat(db: Database) -> None:
    """The buyer named their GitHub account (POST /api/github/access records the grant)."""
    with db.transaction() as conn:
        conn.execute(
            "insert into public.github_grants (purchase_id, user_id, github_username)"
            " select id, user_id, 'octocat' from public.purchases"
        )


def charge(*, refunded: bool, amount_refunded: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": "ch_ada",
        "object": "charge",
        "amount": 4900,
        "amount_refunded": amount_refunded,
        "refunded": refunded,
        "currency": "usd",
        "customer": "cus_ada",
        "payment_intent": "pi_ada",
        "invoice": None,
        **extra,
    }


def purchase(db: Database) -> dict[str, Any]:
    [row] = db.fetch_all(
        "select amount_refunded, refunded_at is not null as refunded from public.purchases"
    )
    return row


def test_a_full_refund_revokes_access_and_the_repository(
    gh_api: Api, db: Database, ada: str, github: FakeGitHub
) -> None:
    bought(gh_api, db, ada)
    granted_to_octocat(db)
    github.collaborators.add((REPO, "octocat"))
    github.accepted.add((REPO, "octocat"))
    body = stripe_event("charge.refunded", charge(refunded=True, amount_refunded=4900))
    post_event(gh_api, body)
    post_event(gh_api, body)  # Stripe's redelivery: nothing more happens
    settle(gh_api)
    assert profile(db, ada)["has_access"] is False
    assert purchase(db) == {"amount_refunded": 4900, "refunded": True}
    assert (REPO, "octocat") not in github.collaborators
    assert github.server.calls("DELETE", f"/repos/{REPO}/collaborators/octocat")
    [outcome] = db.fetch_all(
        "select outcome from public.processed_events where event_type = 'charge.refunded'"
    )
    assert outcome == {"outcome": "refunded, access revoked"}


def test_a_full_refund_cancels_a_pending_repository_invitation(
    gh_api: Api, db: Database, ada: str, github: FakeGitHub
) -> None:
    bought(gh_api, db, ada)
    granted_to_octocat(db)
    github.collaborators.add((REPO, "octocat"))  # invited, not yet accepted
    post_event(gh_api, stripe_event("charge.refunded", charge(refunded=True, amount_refunded=4900)))
    settle(gh_api)
    assert github.collaborators == set()
    assert github.server.calls("DELETE", f"/repos/{REPO}/invitations/")


def test_a_partial_refund_is_recorded_and_changes_no_access(
    gh_api: Api, db: Database, ada: str, github: FakeGitHub
) -> None:
    bought(gh_api, db, ada)
    post_event(gh_api, stripe_event("charge.refunded", charge(refunded=False, amount_refunded=900)))
    settle(gh_api)
    assert profile(db, ada)["has_access"] is True
    assert purchase(db) == {"amount_refunded": 900, "refunded": False}
    assert github.server.calls("DELETE", "/repos/") == []


def test_a_refund_before_its_checkout_is_recorded_waits_for_it(
    gh_api: Api, db: Database, ada: str, stripe_fake: StripeStandIn
) -> None:
    stripe_fake.hold_session(
        {
            "id": "cs_test_life0001",
            "payment_intent": "pi_ada",
        }
    )
    # Created after the checkout, as a refund is; delivered before it, as Stripe may.
    now = int(time.time())
    refund = charge(refunded=True, amount_refunded=4900)
    post_event(gh_api, stripe_event("charge.refunded", refund, created=now + 60))
    wait_for(lambda: stripe_fake.calls("GET", "/v1/checkout/sessions"))
    post_event(
        gh_api, stripe_event("checkout.session.completed", session(ada, price=GITHUB), created=now)
    )
    wait_for(
        lambda: (
            purchase(db)["refunded"] if db.fetch_all("select 1 from public.purchases") else False
        ),
    )
    settle(gh_api)
    assert profile(db, ada)["has_access"] is False
    [outcome] = db.fetch_all(
        "select outcome from public.processed_events where event_type = 'charge.refunded'"
    )
    assert outcome == {"outcome": "refunded, access revoked"}


def test_a_refund_of_a_charge_no_checkout_made_is_recorded_only(gh_api: Api, db: Database) -> None:
    post_event(
        gh_api,
        stripe_event(
            "charge.refunded", charge(refunded=True, amount_refunded=4900, invoice="in_1")
        ),
    )
    settle(gh_api)
    assert db.fetch_all(
        "select outcome from public.processed_events where event_type = 'charge.refunded'"
    ) == [{"outcome": "refund of no purchase recorded"}]


def test_a_dispute_is_recorded_and_logged_for_the_admin(
    gh_api: Api, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    dispute = {
        "id": "dp_1",
        "object": "dispute",
        "amount": 4900,
        "currency": "usd",
        "charge": "ch_ada",
        "payment_intent": "pi_ada",
        "reason": "fraudulent",
        "status": "needs_response",
        "evidence_details": {"due_by": 1798675200},
    }
    body = stripe_event("charge.dispute.created", dispute)
    post_event(gh_api, body)
    post_event(gh_api, body)
    settle(gh_api)
    assert db.fetch_all("select id, reason, amount from public.disputes") == [
        {"id": "dp_1", "reason": "fraudulent", "amount": 4900}
    ]
    [warning] = [
        r for r in caplog.records if r.levelno == logging.WARNING and "dp_1" in r.getMessage()
    ]
    assert "2026-12-31" in warning.getMessage()
    assert "ch_ada" in warning.getMessage()
