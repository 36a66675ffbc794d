"""The e-mail subscriber through the webhook and the test route, with the outbox and with Resend."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest

from adapters.db.pool import Database
from core.events import parse_event
from dev.samples.catalogue import seed_demo_products
from emails import store as sent_emails
from emails.kinds import KINDS
from tests.conftest import Api
from tests.fakes.resend import FakeResend
from tests.helpers import HANG_GUARD, create_user, stripe_event, stripe_signature, wait_for

PRICE = "price_demo_team_monthly"


def outbox(api: Api) -> list[EmailMessage]:
    folder = Path(api.container.settings.email_outbox_dir)
    return [
        BytesParser(policy=policy.default).parsebytes(p.read_bytes())
        for p in sorted(folder.glob("*.eml"))
    ]


def text_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


def post_event(api: Api, body: bytes) -> None:
    response = api.post(
        "/api/webhook/payments", data=body, headers={"Stripe-Signature": stripe_signature(body)}
    )
    assert response.status_code == 200


def settle(api: Api) -> None:
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]


@pytest.fixture
def buyer(db: Database) -> str:
    seed_demo_products(db)
    user = create_user(db, "ada@example.com", name="Ada Lovelace")
    with db.transaction() as conn:
        conn.execute("update public.profiles set customer_id = 'cus_ada' where id = %s", (user,))
        conn.execute(
            "update public.accounts set customer_id = 'cus_ada' where owner_id = %s", (user,)
        )
    return user


def completed(user: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "cs_test_a1b2c3d4e5",
        "object": "checkout.session",
        "client_reference_id": user,
        "customer": "cus_ada",
        "metadata": {"price_id": PRICE},
        "payment_status": "paid",
        "amount_total": 1900,
        "currency": "usd",
        "created": int(time.time()),
        "customer_details": {"email": "ada@example.com", "name": "Ada Lovelace"},
        **extra,
    }


def test_purchase_confirmation_once_for_three_deliveries(
    api: Api, db: Database, buyer: str
) -> None:
    body = stripe_event("checkout.session.completed", completed(buyer), event_id="evt_buy")
    for _ in range(3):
        post_event(api, body)
    settle(api)
    [message] = outbox(api)
    assert message["To"] == "ada@example.com"
    assert message["Reply-To"] == "support@example.com"
    assert "Team Monthly" in message["Subject"]
    assert len(message["Subject"]) < 50
    text = text_of(message)
    for fact in ("$19.00", "Ada Lovelace", "ORD-A1B2C3D4E5"):
        assert fact in text
    assert db.fetch_all("select event_id, kind from public.sent_emails") == [
        {"event_id": "granted_cs_test_a1b2c3d4e5", "kind": "purchase-confirmation"}
    ]


def test_a_redelivery_ends_at_the_record_of_its_e_mail(api: Api, db: Database, buyer: str) -> None:
    renewal = {"id": "in_2", "customer": "cus_ada", "billing_reason": "subscription_cycle"}
    event = parse_event(json.loads(stripe_event("invoice.paid", renewal, event_id="evt_renew")))
    mail = api.container.email_subscriber
    assert mail(event) == "sent invoice-paid"
    with db.transaction() as conn:  # what planning reads is gone; the record is not
        conn.execute("update public.profiles set customer_id = null where id = %s", (buyer,))
    assert mail(event) == "duplicate"
    assert len(outbox(api)) == 1


def test_an_event_that_calls_for_no_e_mail_leaves_no_claim(
    api: Api, db: Database, buyer: str
) -> None:
    """An event's e-mail is claimed with the look-ups, before its facts are known; facts that
    call for none (a subscription's first invoice, nobody to write to) release the claim, so
    the next delivery, once the facts have changed, sends it rather than waiting on it."""
    mail = api.container.email_subscriber

    def renewal(event_id: str, customer: str, reason: str) -> Any:
        invoice = {"id": f"in_{event_id}", "customer": customer, "billing_reason": reason}
        return parse_event(json.loads(stripe_event("invoice.paid", invoice, event_id=event_id)))

    assert mail(renewal("evt_first", "cus_ada", "subscription_create")) == "no e-mail"
    unknown = renewal("evt_unknown", "cus_later", "subscription_cycle")
    assert mail(unknown) == "no e-mail"
    assert db.fetch_all("select event_id from public.email_claims") == []
    with db.transaction() as conn:  # the customer belongs to the buyer's account since
        conn.execute(
            "update public.accounts set customer_id = 'cus_later' where owner_id = %s", (buyer,)
        )
    assert mail(unknown) == "sent invoice-paid"
    assert [m["To"] for m in outbox(api)] == ["ada@example.com"]


@pytest.mark.parametrize(
    ("reason", "expected"), [("subscription_create", 0), ("subscription_cycle", 1)]
)
def test_invoice_paid_skips_the_first_invoice(
    api: Api, buyer: str, reason: str, expected: int
) -> None:
    invoice = {
        "id": "in_1",
        "customer": "cus_ada",
        "customer_email": "ada@example.com",
        "number": "INV-0042",
        "billing_reason": reason,
        "amount_paid": 1900,
        "currency": "eur",
        "subscription": "sub_1",
        "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1/test_1",
        "lines": {
            "data": [{"price": {"id": PRICE}, "period": {"start": 1763700000, "end": 1766300000}}]
        },
    }
    post_event(api, stripe_event("invoice.paid", invoice))
    settle(api)
    messages = outbox(api)
    assert len(messages) == expected
    if expected:
        text = text_of(messages[0])
        for fact in ("€19.00", "INV-0042", "https://invoice.stripe.com/i/acct_1/test_1"):
            assert fact in text


def test_payment_failed_tells_the_customer(api: Api, buyer: str) -> None:
    invoice = {
        "id": "in_2",
        "customer": "cus_ada",
        "customer_email": "ada@example.com",
        "amount_due": 500000,
        "currency": "jpy",
        "hosted_invoice_url": "https://invoice.stripe.com/i/x",
        "attempt_count": 1,
    }
    post_event(api, stripe_event("invoice.payment_failed", invoice))
    settle(api)
    [message] = outbox(api)
    assert "¥500,000" in text_of(message)


def test_cancellation_goes_to_the_profile_of_the_customer(api: Api, buyer: str) -> None:
    subscription = {
        "id": "sub_1",
        "customer": "cus_ada",
        "status": "canceled",
        "ended_at": int(time.time()),
        "items": {"data": [{"price": {"id": PRICE}}]},
    }
    post_event(api, stripe_event("customer.subscription.deleted", subscription))
    settle(api)
    [message] = outbox(api)
    assert message["To"] == "ada@example.com"
    assert "Ada Lovelace" in text_of(message)


def test_expired_checkout_links_back_to_checkout(api: Api, buyer: str) -> None:
    session = completed(
        buyer,
        payment_status="unpaid",
        status="expired",
        after_expiration={"recovery": {"url": "https://buy.stripe.com/r/live_abc"}},
    )
    post_event(api, stripe_event("checkout.session.expired", session))
    settle(api)
    [message] = outbox(api)
    assert "https://buy.stripe.com/r/live_abc" in text_of(message)


def test_an_address_resend_would_refuse_is_dropped_at_once_not_retried(
    api: Api, buyer: str, caplog: pytest.LogCaptureFixture
) -> None:
    session = completed(
        buyer,
        payment_status="unpaid",
        status="expired",
        customer_details={"email": "jörg@example.com", "name": "Jörg"},
    )
    with caplog.at_level(logging.ERROR):
        post_event(api, stripe_event("checkout.session.expired", session, event_id="evt_utf8"))
        settle(api)
    assert outbox(api) == []
    assert api.container.bus.dead_letters == []  # type: ignore[attr-defined]
    dropped = [r for r in caplog.records if "evt_utf8" in r.getMessage()]
    assert [r.levelname for r in dropped] == ["ERROR"], "logged once, at ERROR, never retried"


@pytest.fixture
def resend_api(api_factory: Callable[..., Api], resend: FakeResend) -> Api:
    return api_factory(resend_api_key="re_test_key", resend_api_url=resend.server.url)


def test_resend_5xx_is_retried_and_sends_once(
    resend_api: Api, resend: FakeResend, buyer: str
) -> None:
    resend.failures_left = 1
    post_event(
        resend_api, stripe_event("checkout.session.completed", completed(buyer), event_id="evt_r1")
    )
    wait_for(lambda: resend.delivered)
    settle(resend_api)
    assert len(resend.delivered) == 1
    keys = {r.headers.get("Idempotency-Key") for r in resend.server.calls("POST", "/emails")}
    assert keys == {"granted_cs_test_a1b2c3d4e5/purchase-confirmation"}
    assert len(resend.server.calls("POST", "/emails")) == 2
    sent = resend.delivered[0]
    assert sent["to"] == ["ada@example.com"]
    assert sent["from"] == "Acme Team <hello@example.com>"


def test_a_crash_after_sending_resends_the_same_key_and_nothing_more(
    resend_api: Api, resend: FakeResend, buyer: str, db: Database
) -> None:
    # The bookkeeping insert fails once, as if the process died right after Resend accepted.
    # A sequence, because nextval survives the rollback that the failure causes.
    with db.transaction() as conn:
        conn.execute("create sequence fail_once_counter")
        conn.execute("""
            create function fail_once() returns trigger language plpgsql as $$
            begin
              if nextval('fail_once_counter') = 1 then
                raise exception 'simulated crash after send';
              end if;
              return new;
            end $$""")
        conn.execute(
            "create trigger fail_once before insert on public.sent_emails"
            " for each row execute function fail_once()"
        )
    try:
        post_event(
            resend_api,
            stripe_event("checkout.session.completed", completed(buyer), event_id="evt_c1"),
        )
        wait_for(lambda: db.fetch_all("select 1 from public.sent_emails"))
    finally:
        with db.transaction() as conn:
            conn.execute("drop trigger if exists fail_once on public.sent_emails")
            conn.execute("drop function if exists fail_once()")
            conn.execute("drop sequence if exists fail_once_counter")
    assert len(resend.server.calls("POST", "/emails")) == 2
    assert len(resend.delivered) == 1


def test_test_route_sends_every_kind_by_default(api: Api) -> None:
    response = api.get("/api/test-email")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert body["emailType"] == "all"
    assert body["message"] == "Test emails sent to support@example.com"
    assert tuple(r["type"] for r in body["results"]) == KINDS
    assert {r["status"] for r in body["results"]} == {"sent"}
    assert len(outbox(api)) == len(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_test_route_sends_one_kind(api: Api, kind: str) -> None:
    response = api.get(f"/api/test-email?type={kind}&email=dev@example.com")
    assert response.json() == {
        "success": True,
        "message": "Test email sent to dev@example.com",
        "emailType": kind,
        "results": [{"type": kind, "status": "sent"}],
    }
    [message] = outbox(api)
    assert message["To"] == "dev@example.com"


def test_test_route_samples_link_to_site_url_and_name_the_catalogues_product(
    api_factory: Callable[..., Api], db: Database
) -> None:
    seed_demo_products(db)  # "Pro Repository" is featured: the first the catalogue lists
    api = api_factory(site_url="https://shop.example.org")
    body = api.get("/api/test-email?type=purchase-confirmation").json()
    assert body["success"] is True
    [message] = outbox(api)
    text = text_of(message)
    assert "Pro Repository" in text
    assert "https://shop.example.org/dashboard" in text
    assert "acme.example.com" not in text


def test_test_route_sends_each_kind_from_its_own_sender(api_factory: Callable[..., Api]) -> None:
    """The sample of an account mail comes from no-reply, as the real one does; the rest from
    the team, to which a customer may reply."""
    api = api_factory(
        email_from_admin="Acme Team <team@acme.example>",
        email_from_noreply="Acme <noreply@acme.example>",
    )
    body = api.get("/api/test-email").json()
    assert body["success"] is True
    senders = {m["Subject"]: m["From"] for m in outbox(api)}
    assert len(senders) == len(KINDS)
    [signin] = [subject for subject in senders if subject.startswith("Sign in to")]
    assert senders.pop(signin) == "Acme <noreply@acme.example>"
    assert set(senders.values()) == {"Acme Team <team@acme.example>"}


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("type=receipt", "Unknown email type"),
        ("email=nope", "email"),
        ("email=j%C3%B6rg@example.com", "before the @-sign"),  # Resend refuses SMTPUTF8
        (f"email={'a' * 65}@example.com", "64 characters"),
        ("type=all&cc=x@example.com", "Unknown field 'cc'"),
    ],
)
def test_test_route_refuses_bad_input(api: Api, query: str, needle: str) -> None:
    response = api.get(f"/api/test-email?{query}")
    assert response.status_code == 400
    assert needle.lower() in response.json()["error"].lower()
    assert outbox(api) == []


def test_test_route_does_not_exist_when_disabled(api_factory: Callable[..., Api]) -> None:
    api = api_factory(enable_test_email=False)
    response = api.get("/api/test-email")
    assert response.status_code == 404
    assert response.json() == {"error": "Not found"}


def test_test_route_reports_a_provider_failure(resend_api: Api, resend: FakeResend) -> None:
    resend.failures_left = 10
    body = resend_api.get("/api/test-email?type=new-signup").json()
    assert body["success"] is False
    assert body["results"] == [{"type": "new-signup", "status": "failed"}]


def test_a_claim_keeps_a_second_sender_away_until_its_lease_runs_out(db: Database) -> None:
    assert sent_emails.claim(db, event_id="evt_lease", kind="receipt", holder="first") is True
    # The same delivery claiming again (its connection broke after the claim) keeps its claim.
    assert sent_emails.claim(db, event_id="evt_lease", kind="receipt", holder="first") is True
    with pytest.raises(sent_emails.SendInProgress):
        sent_emails.claim(db, event_id="evt_lease", kind="receipt", holder="second")
    # The first sender's process died mid-send: once the lease is over, another takes over.
    with db.transaction() as conn:
        conn.execute(
            "update public.email_claims set claimed_at = now() - interval '121 seconds'"
            " where event_id = 'evt_lease'"
        )
    assert sent_emails.claim(db, event_id="evt_lease", kind="receipt", holder="second") is True
    with pytest.raises(sent_emails.SendInProgress):
        sent_emails.claim(db, event_id="evt_lease", kind="receipt", holder="first")
    sent_emails.record(
        db, event_id="evt_lease", kind="receipt", recipient="a@example.com", provider_id="re_1"
    )
    assert sent_emails.claim(db, event_id="evt_lease", kind="receipt", holder="third") is False
    assert db.fetch_all("select * from public.email_claims where event_id = 'evt_lease'") == []
