"""POST /api/lead and GET /api/products/public over HTTP, against real Postgres."""

from __future__ import annotations

import json

import pytest

from adapters.db.pool import Database
from dev.samples.catalogue import seed_demo_products
from tests.conftest import Api


def lead_emails(db: Database) -> list[str]:
    return [r["email"] for r in db.fetch_all("select email from public.leads order by created_at")]


@pytest.mark.parametrize("body", [{}, {"email": ""}, {"email": "   "}, {"email": None}])
def test_lead_without_email_is_400(api: Api, db: Database, body: dict[str, object]) -> None:
    response = api.post("/api/lead", json=body)
    assert response.status_code == 400
    assert response.json() == {"error": "Email is required (email)"}
    assert lead_emails(db) == []


@pytest.mark.parametrize(
    "email",
    [
        "not-an-email",
        "a@",
        "@b.com",
        "x y@z.com",
        42,
        "jörg@example.com",
        "a" * 65 + "@example.com",
    ],
)
def test_malformed_lead_email_is_400(api: Api, db: Database, email: object) -> None:
    response = api.post("/api/lead", json={"email": email})
    assert response.status_code == 400
    assert "email" in response.json()["error"].lower()
    assert response.json()["error"].endswith("(email)"), "names the field"
    assert lead_emails(db) == []


def test_lead_is_stored_once_ignoring_case(api: Api, db: Database) -> None:
    first = api.post("/api/lead", json={"email": "Founder@Example.com"})
    again = api.post("/api/lead", json={"email": "founder@example.COM"})
    assert first.status_code == again.status_code == 200
    assert first.json() == {"success": True}
    assert [e.lower() for e in lead_emails(db)] == ["founder@example.com"]


def test_products_lists_active_ones_featured_first(api: Api, db: Database) -> None:
    assert seed_demo_products(db) == 3
    with db.transaction() as conn:
        conn.execute("update public.products set is_active = false where name = 'Starter Kit'")
    response = api.get("/api/products/public")
    assert response.status_code == 200
    assert "max-age=60" in response.headers["Cache-Control"]
    products = response.json()["products"]
    assert [p["name"] for p in products] == ["Pro Repository", "Team Monthly"]
    assert products[0] == {
        "id": products[0]["id"],
        "name": "Pro Repository",
        "description": "Access to the private GitHub repository, with every future commit.",
        "price": 149.0,
        "priceId": "price_demo_pro_github",
        "type": "github",
        "billingType": "one_time",
        "billingInterval": None,
        "isFeatured": True,
        "perSeat": False,
        "trialDays": None,
        "features": [],
        "featureNames": {},
        "credits": [],
        "currency": "usd",
        "taxBehavior": "unspecified",
    }
    # The team plan, as its product's metadata says: per seat, with its features, each named as
    # its Stripe Entitlements feature names it.
    assert products[1]["billingInterval"] == "month"
    assert (products[1]["perSeat"], products[1]["features"]) == (True, ["templates", "support"])
    assert products[1]["featureNames"] == {
        "templates": "New templates each month",
        "support": "Priority support",
    }


def test_products_say_the_credits_they_grant_named_as_a_buyer_reads_them(
    api: Api, db: Database
) -> None:
    seed_demo_products(db)
    with db.transaction() as conn:
        for credits, period, name in (
            ({"generations": 500, "templates": 2}, "once", "Starter Kit"),
            ({"templates": 10}, "period", "Team Monthly"),
        ):
            conn.execute(
                "update public.products set credits = %s::jsonb, credits_period = %s"
                " where name = %s",
                (json.dumps(credits), period, name),
            )
    found = {p["name"]: p for p in api.get("/api/products/public").json()["products"]}
    pack = found["Starter Kit"]
    assert pack["credits"] == [
        {"feature": "generations", "amount": 500, "period": "once"},
        {"feature": "templates", "amount": 2, "period": "once"},
    ]
    # A feature Stripe names by its display name; one it does not, by its key.
    assert pack["featureNames"] == {"generations": "generations", "templates": "templates"}
    team = found["Team Monthly"]
    assert team["credits"] == [{"feature": "templates", "amount": 10, "period": "period"}]
    assert team["featureNames"]["templates"] == "New templates each month"


def test_products_say_a_trial_of_a_subscription(api: Api, db: Database) -> None:
    seed_demo_products(db)
    with db.transaction() as conn:
        conn.execute("update public.products set trial_days = 14 where name = 'Team Monthly'")
    [team] = [p for p in api.get("/api/products/public").json()["products"] if p["perSeat"]]
    assert (team["name"], team["trialDays"]) == ("Team Monthly", 14)


def test_products_say_their_currency_and_whether_tax_is_included(api: Api, db: Database) -> None:
    seed_demo_products(db)
    with db.transaction() as conn:
        conn.execute(
            "update public.products set currency = 'eur', tax_behavior = 'inclusive'"
            " where name = 'Starter Kit'"
        )
        conn.execute(
            "update public.products set tax_behavior = 'exclusive' where name = 'Team Monthly'"
        )
    found = {p["name"]: p for p in api.get("/api/products/public").json()["products"]}
    assert (found["Starter Kit"]["currency"], found["Starter Kit"]["taxBehavior"]) == (
        "eur",
        "inclusive",
    )
    assert found["Team Monthly"]["taxBehavior"] == "exclusive"
    assert found["Pro Repository"]["currency"] == "usd"


def test_seeding_twice_adds_nothing(db: Database) -> None:
    assert seed_demo_products(db) == 3
    assert seed_demo_products(db) == 0
    assert len(db.fetch_all("select id from public.products")) == 3
