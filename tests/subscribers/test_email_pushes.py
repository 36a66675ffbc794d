"""E-mail pushes held at once: the claims of their mails share one round trip (then their
records another), each push sends its own mail and answers with its own outcome."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from adapters.bus.coalesce import Coalescer
from adapters.db import sent_emails
from adapters.db.pool import Database
from subscribers.emails import EmailSubscriber
from tests.conftest import Api
from tests.fakes.resend import FakeResend
from tests.helpers import wait_for
from tests.subscribers.test_email_batches import claims, recorded, renewals

SENT = "sent invoice-paid"


@pytest.fixture
def pushes(api_factory: Callable[..., Api], resend: FakeResend) -> EmailSubscriber:
    api = api_factory(resend_api_key="re_test_key", resend_api_url=resend.server.url)
    handler = api.container.pushes("emails")
    assert isinstance(handler, EmailSubscriber)
    return handler


def test_pushes_held_at_once_claim_their_mails_together_and_each_sends_its_own(
    pushes: EmailSubscriber, resend: FakeResend, db: Database
) -> None:
    events = renewals(db, "push", 8)
    assert pushes.shared is not None
    claims_at_once = pushes.shared.claims
    assert isinstance(claims_at_once, Coalescer)
    # Another transaction holds the first two events' claims, uncommitted: the first two
    # pushes' claims, each alone, wait on them, so the next six wait for a batch together.
    with psycopg.connect(db.url) as holder:
        for event in events[:2]:
            holder.execute(
                "insert into public.email_claims (event_id, kind, holder)"
                " values (%s, 'invoice-paid', 'elsewhere')",
                (event.id,),
            )
        with ThreadPoolExecutor(max_workers=8) as pool:
            first = [pool.submit(pushes, e) for e in events[:2]]
            wait_for(lambda: _waiting_on_claims(db) == 2)
            rest = [pool.submit(pushes, e) for e in events[2:]]
            wait_for(lambda: claims_at_once.waiting == 6)
            holder.rollback()  # the claims were never taken: the pushes take them
            outcomes = [f.result(timeout=30) for f in first + rest]

    assert outcomes == [SENT] * 8
    assert sorted(k or "" for k in resend.delivered_keys) == sorted(
        f"{e.id}/invoice-paid" for e in events
    )
    assert len(resend.server.calls("POST", "/emails")) == 8
    assert sorted(recorded(db)) == sorted(e.id for e in events)
    assert claims(db) == []
    # Delivered again, each finds its mail sent.
    assert [pushes(e) for e in events] == ["duplicate"] * 8


def test_one_mail_wanted_twice_in_a_batch_is_claimed_for_the_first_alone(db: Database) -> None:
    [event] = renewals(db, "twice", 1)
    wanted = sent_emails.Wanted(event.id, "invoice-paid", None, None)

    first, second = sent_emails.claim_and_look_up(db, [wanted, wanted], holder="h")

    assert first.claimed is True
    assert isinstance(second.claimed, sent_emails.SendInProgress)
    assert claims(db) == [event.id]


def _waiting_on_claims(db: Database) -> int:
    """Backends waiting for a lock while inserting a claim."""
    [row] = db.fetch_all(
        "select count(*) as n from pg_stat_activity"
        " where wait_event_type = 'Lock' and query like '%email_claims%'"
    )
    return int(row["n"])
