"""No transaction is held across a call to Resend or Stripe.

Supabase's transaction pooler has a few server connections for every service together: a
subscriber that waited on a slow API inside a transaction would keep them from everyone else.
Here each process has a pool of ONE connection, Resend (then Stripe) stops answering, and the
other subscriber (or, for Stripe, access's other worker: in-process, e-mail waits while access
has work running, by the bus's design) must still apply its events while the call hangs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from access.announcements import announced_ids
from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import subscription
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.fakes.resend import FakeResend
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for


def has_access(db: Database, user_id: str) -> bool:
    rows = db.fetch_all("select has_access from public.profiles where id = %s", (user_id,))
    return bool(rows and rows[0]["has_access"])


def mails_for(db: Database, body: bytes) -> list[dict[str, object]]:
    """The mails about the event in `body` (a checkout's are keyed by its session)."""
    event = json.loads(body)
    return db.fetch_all(
        "select kind from public.sent_emails where event_id = any(%s)",
        (list(announced_ids(event["id"], event["data"]["object"]["id"])),),
    )


def test_access_applies_while_resend_hangs_on_a_send(
    api_factory: Callable[..., Api], resend: FakeResend, db: Database
) -> None:
    # The send hangs until the mailer's deadline, here the longest allowed: the second event's
    # access is awaited, and must apply within the first send's first attempt.
    api = api_factory(
        resend_api_key="re_test_key",
        resend_api_url=resend.server.url,
        database_pool_size=1,
        outbound_timeout_seconds=30,
    )
    seed_demo_products(db)
    first = create_user(db, "first@example.com")
    second = create_user(db, "second@example.com")
    first_body = stripe_event(
        "checkout.session.completed", completed(first, customer="cus_first", session="cs_first")
    )
    resend.responding.clear()
    try:
        assert post_event(api, first_body).status_code == 200
        wait_for(lambda: resend.server.calls("POST", "/emails"))  # the send hangs now

        assert (
            post_event(
                api,
                stripe_event(
                    "checkout.session.completed",
                    completed(second, customer="cus_second", session="cs_second"),
                ),
            ).status_code
            == 200
        )
        wait_for(lambda: has_access(db, second))
        assert resend.delivered == [], "the first send still hangs"
        assert len(resend.server.calls("POST", "/emails")) == 1, "in its first attempt"
    finally:
        resend.responding.set()
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    assert len(mails_for(db, first_body)) == 1
    assert db.fetch_all("select * from public.email_claims") == []


def test_access_applies_other_events_while_stripe_hangs_on_a_tie(
    api_factory: Callable[..., Api], stripe_fake: StripeStandIn, db: Database
) -> None:
    # Stripe hangs until the client's deadline, here the longest allowed (see above).
    api = api_factory(database_pool_size=1, outbound_timeout_seconds=30)
    seed_demo_products(db)
    tied, other = create_user(db, "tied@example.com"), create_user(db, "other@example.com")
    now = int(time.time())
    with db.transaction() as conn:
        # `tied`'s subscription was last changed at `now`: a change created in the same second
        # is a tie, which only Stripe's status can settle.
        conn.execute(
            "update public.accounts set customer_id = 'cus_tied', has_access = true,"
            " access_changed_at = to_timestamp(%s) where owner_id = %s",
            (now, tied),
        )
        conn.execute(
            "update public.profiles set customer_id = 'cus_tied', has_access = true,"
            " access_changed_at = to_timestamp(%s) where id = %s",
            (now, tied),
        )
        conn.execute(
            "insert into public.entitlements (account_id, source_id, kind, status, active,"
            " changed_at) select id, 'sub_tied', 'subscription', 'active', true, to_timestamp(%s)"
            " from public.accounts where owner_id = %s",
            (now, tied),
        )
        conn.execute(
            "update public.accounts set customer_id = 'cus_other' where owner_id = %s", (other,)
        )
        conn.execute("update public.profiles set customer_id = 'cus_other' where id = %s", (other,))
    tie = stripe_event(
        "customer.subscription.updated",
        subscription(customer="cus_tied", id="sub_tied", status="canceled"),
        created=now,
    )
    renewal = stripe_event(
        "invoice.paid",
        {"id": "in_other", "customer": "cus_other", "subscription": "sub_other"},
        created=now,
    )
    stripe_fake.responding.clear()
    try:
        assert post_event(api, tie).status_code == 200
        wait_for(lambda: stripe_fake.calls("GET", "/v1/subscriptions/sub_tied"))

        assert post_event(api, renewal).status_code == 200
        wait_for(lambda: has_access(db, other))
        assert len(stripe_fake.calls("GET", "/v1/subscriptions/sub_tied")) == 1, "still hangs"
    finally:
        stripe_fake.responding.set()
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    # Stripe says active at the tie (its default here): access stays as it was.
    assert has_access(db, tied)
