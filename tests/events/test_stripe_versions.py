"""Events at the current Stripe API version, built from Stripe's own fixtures, through the
webhook: the same access and e-mail facts as at 2023-08-16; an unknown version is refused."""

from __future__ import annotations

import json
import time
from email.message import EmailMessage
from typing import Any

import pytest

from adapters.db.pool import Database
from core.stripe_objects import CURRENT_VERSION
from dev.samples.catalogue import seed_demo_products
from tests.access.lifecycle_helpers import link
from tests.access.test_subscriber import post_event
from tests.conftest import Api
from tests.core.test_stripe_objects import current_invoice, fixture
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user, stripe_event

PRICE = "price_demo_team_monthly"  # a seeded demo product, "Team" monthly


@pytest.fixture
def customer(db: Database) -> str:
    seed_demo_products(db)
    user = create_user(db, "current@example.com")
    link(db, user, "cus_current")
    return user


def renewal(api_version: str) -> dict[str, Any]:
    invoice = current_invoice()
    invoice.update(
        id=f"in_{api_version[:4]}_{int(time.time() * 1000)}",
        customer="cus_current",
        billing_reason="subscription_cycle",
        status="paid",
        amount_paid=4900,
        currency="usd",
        number="ACME-0042",
        hosted_invoice_url="https://invoice.stripe.com/i/acct_1/test_42",
    )
    if api_version == "2023-08-16":  # the same invoice, shaped as that version shaped it
        invoice.pop("parent")
        invoice["subscription"] = "sub_42"
        line = invoice["lines"]["data"][0]
        line.pop("pricing")
        line["price"] = {"id": PRICE, "object": "price"}
    return invoice


def receipt(api: Api) -> EmailMessage:
    [found] = [m for m in outbox(api) if "ACME-0042" in text_of(m)]
    return found


@pytest.mark.parametrize("api_version", [CURRENT_VERSION, "2023-08-16"])
def test_a_renewal_grants_and_its_receipt_names_the_product(
    api: Api, db: Database, customer: str, api_version: str
) -> None:
    body = stripe_event("invoice.paid", renewal(api_version), api_version=api_version)
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (customer,))
    assert row["has_access"] is True
    text = text_of(receipt(api))
    assert "Team" in text, "the receipt names the product"
    assert "$49.00" in text


@pytest.mark.parametrize("api_version", [CURRENT_VERSION, "2023-08-16"])
def test_a_scheduled_cancellation_says_when_access_ends(
    api: Api, db: Database, customer: str, api_version: str
) -> None:
    subscription = fixture("subscription")
    end = 1_798_675_200  # 2026-12-31
    subscription.update(id="sub_42", customer="cus_current", cancel_at_period_end=True)
    subscription["cancel_at"] = None
    item = subscription["items"]["data"][0]
    item["price"] = {**item["price"], "id": PRICE}
    if api_version == "2023-08-16":
        item.pop("current_period_end", None)
        subscription["current_period_end"] = end
    else:
        item["current_period_end"] = end
    body = stripe_event(
        "customer.subscription.updated",
        subscription,
        api_version=api_version,
        previous={"cancel_at_period_end": False},
    )
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]

    [mail] = [m for m in outbox(api) if "cancel" in m["Subject"].lower()]
    assert "December 31, 2026" in text_of(mail)


def test_an_event_of_a_version_the_service_does_not_read_is_refused_and_named(
    api: Api, db: Database, customer: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = stripe_event("invoice.paid", renewal(CURRENT_VERSION), api_version="2019-02-19")
    response = post_event(api, body)
    assert response.status_code == 400
    assert "Unsupported Stripe API version 2019-02-19 (api_version)" in response.json()["error"]
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [row] = db.fetch_all("select has_access from public.profiles where id = %s", (customer,))
    assert row["has_access"] is False
    [logged] = [r for r in caplog.records if "2019-02-19" in r.getMessage()]
    assert logged.levelname == "ERROR"
    assert json.loads(body)["id"] in logged.getMessage()
