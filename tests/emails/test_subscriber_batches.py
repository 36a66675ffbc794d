"""E-mail in batches, as the pull consumer hands them over: each event's outcome on its own
when Resend refuses one address, fails midway, or another delivery holds a claim."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from adapters.accounts import AccountError
from adapters.db.pool import Database
from adapters.mail.message import MailError
from core.app_events import ACCOUNT_INVITED
from core.events import Event, InvalidEvent, app_event, parse_event
from dev.auth_stand_in import AuthStandIn
from dev.samples.catalogue import seed_demo_products
from emails import store as sent_emails
from emails.subscriber import EmailSubscriber
from tests.access.test_subscriber_batches import customers
from tests.adapters.db.test_round_trips import renewal_body
from tests.conftest import Api
from tests.fakes.resend import FakeResend

SENT = "sent invoice-paid"
UNAVAILABLE = {"statusCode": 500, "name": "application_error", "message": "Unavailable"}


@pytest.fixture
def mail(api_factory: Callable[..., Api], resend: FakeResend) -> EmailSubscriber:
    api = api_factory(resend_api_key="re_test_key", resend_api_url=resend.server.url)
    return api.container.email_subscriber


def renewals(db: Database, prefix: str, count: int) -> list[Event]:
    seed_demo_products(db)
    return [
        parse_event(json.loads(renewal_body(customer, f"evt_{prefix}{n}")))
        for n, customer in enumerate(customers(db, prefix, count))
    ]


def recorded(db: Database) -> list[str]:
    return [r["event_id"] for r in db.fetch_all("select event_id from public.sent_emails")]


def claims(db: Database) -> list[str]:
    return [r["event_id"] for r in db.fetch_all("select event_id from public.email_claims")]


def test_resend_failing_midway_leaves_the_rest_unsent_and_unclaimed_for_the_redelivery(
    mail: EmailSubscriber, resend: FakeResend, db: Database
) -> None:
    batch = renewals(db, "bmid", 4)
    # The first is sent; the second finds Resend down through all three attempts.
    resend.scripted[:] = [(200, {"id": "re_first"}, {})] + [(500, UNAVAILABLE, {})] * 3

    outcomes = mail.send_many(batch)

    assert outcomes[0] == SENT
    assert all(isinstance(o, MailError) for o in outcomes[1:])
    assert len(resend.server.calls("POST", "/emails")) == 4  # the last two never tried
    assert recorded(db) == [batch[0].id]
    assert claims(db) == []

    assert mail.send_many(batch) == ["duplicate", SENT, SENT, SENT]
    assert sorted(recorded(db)) == sorted(e.id for e in batch)
    assert len(resend.delivered) == 3


def test_an_address_resend_refuses_drops_that_e_mail_alone(
    mail: EmailSubscriber, resend: FakeResend, db: Database
) -> None:
    batch = renewals(db, "bref", 3)
    refused = {"statusCode": 422, "name": "validation_error", "message": "Invalid `to` field"}
    resend.scripted[:] = [(200, {"id": "re_first"}, {}), (422, refused, {})]

    first, second, third = mail.send_many(batch)

    assert (first, third) == (SENT, SENT)
    assert isinstance(second, InvalidEvent)
    assert sorted(recorded(db)) == sorted([batch[0].id, batch[2].id])
    assert claims(db) == []
    assert len(resend.server.calls("POST", "/emails")) == 3  # refused once, not retried


def test_a_copy_in_the_batch_is_a_duplicate_and_a_claim_held_elsewhere_waits(
    mail: EmailSubscriber, resend: FakeResend, db: Database
) -> None:
    first, held = renewals(db, "bdup", 2)
    assert sent_emails.claim(db, event_id=held.id, kind="invoice-paid", holder="another")

    outcomes = mail.send_many([first, held, first])

    assert (outcomes[0], outcomes[2]) == (SENT, "duplicate")
    assert isinstance(outcomes[1], sent_emails.SendInProgress)
    assert len(resend.delivered) == 1
    assert recorded(db) == [first.id]
    assert claims(db) == [held.id]  # still the other delivery's


def test_a_batch_whose_record_fails_is_sent_again_with_the_same_keys(
    mail: EmailSubscriber, resend: FakeResend, db: Database
) -> None:
    batch = renewals(db, "brec", 3)
    with db.transaction() as conn:
        conn.execute("""
            create function refuse_records() returns trigger language plpgsql as $$
            begin raise exception 'simulated: the record is lost'; end $$""")
        conn.execute(
            "create trigger refuse_records before insert on public.sent_emails"
            " for each row execute function refuse_records()"
        )
    try:
        outcomes = mail.send_many(batch)
    finally:
        with db.transaction() as conn:
            conn.execute("drop trigger refuse_records on public.sent_emails")
            conn.execute("drop function refuse_records()")
    assert all(isinstance(o, Exception) for o in outcomes)
    assert claims(db) == []

    assert mail.send_many(batch) == [SENT] * 3
    keys = [r.headers["Idempotency-Key"] for r in resend.server.calls("POST", "/emails")]
    assert sorted(keys) == sorted(2 * [f"{e.id}/invoice-paid" for e in batch])
    assert len(resend.delivered) == 3  # Resend answered the second sends with the first


def test_a_sign_in_link_auth_cannot_make_leaves_no_claim_so_the_redelivery_sends_at_once(
    api_factory: Callable[..., Api],
    resend: FakeResend,
    supabase_fake: AuthStandIn,
    db: Database,
) -> None:
    supabase_fake.reset()
    api = api_factory(
        supabase_secret_key="service-role-key",
        resend_api_key="re_test_key",
        resend_api_url=resend.server.url,
    )
    mail = api.container.email_subscriber
    api.container.accounts.ensure(email="guest-down@example.com", name="Ada")
    invited, _ = app_event(
        ACCOUNT_INVITED,
        event_id="invited_evt_auth_down",
        obj={"email": "guest-down@example.com", "name": "Ada", "price_id": None},
        created=datetime.now(UTC),
    )
    supabase_fake.unavailable = 1

    [failed] = mail.send_many([invited])

    assert isinstance(failed, AccountError)  # retried, not dropped
    assert claims(db) == []  # not held for the lease: nothing was sent
    assert resend.delivered == []

    assert mail.send_many([invited]) == ["sent signin-link"]
    [sent] = resend.delivered
    assert supabase_fake.links[-1] in sent["text"]
