"""Credits end to end, through signed Stripe events and the real routes: a monthly plan grants
its period's credits, parallel consumptions over HTTP never overdraw, a key answers once, the
next paid period resets, a pack is kept across periods until refunded, and GET /api/me shows it.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from adapters.db.pool import Database
from dev.samples.catalogue import price, product
from dev.stripe_stand_in import StripeStandIn
from tests.access.lifecycle_helpers import link, post_event, settle
from tests.conftest import Api
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user, stripe_event

KEY = "usage-key-0123456789abcdef0123456789abcdef"
PLAN, PACK = "price_gen_monthly", "price_gen_pack"
DAY = 86_400


@pytest.fixture
def usage_api(api_factory: Any, fakes: tuple[StripeStandIn, Any], db: Database) -> tuple[Api, str]:
    """The app with a usage key, a catalogue with a monthly plan granting 100 generations and a
    pack of 500, and Ada paying as cus_ada."""
    api = api_factory(usage_api_key=KEY)
    stripe = fakes[0]
    stripe.products["prod_gen"] = product(
        "prod_gen", "Generator", "", {"type": "link", "credits": "generations:100"}
    )
    stripe.prices[PLAN] = price(PLAN, "prod_gen", 1900, "month")
    stripe.products["prod_pack"] = product(
        "prod_pack", "Pack", "", {"type": "link", "credits": "generations:500",
                                  "credits_period": "once"}
    )  # fmt: skip
    stripe.prices[PACK] = price(PACK, "prod_pack", 900)
    for n, prod in enumerate(("prod_gen", "prod_pack")):
        deliver(api, "product.updated", stripe.products[prod], created=1_000 + n)
    ada = create_user(db, "ada@example.com", name="Ada")
    link(db, ada, "cus_ada")
    return api, ada


def deliver(api: Api, event_type: str, obj: dict[str, Any], **kw: Any) -> None:
    post_event(api, stripe_event(event_type, obj, **kw))
    settle(api)


def invoice(number: int, start: int, *, price_id: str = PLAN) -> dict[str, Any]:
    return {
        "id": f"in_{number}",
        "object": "invoice",
        "customer": "cus_ada",
        "subscription": "sub_ada",
        "billing_reason": "subscription_create" if number == 1 else "subscription_cycle",
        "lines": {
            "object": "list",
            "data": [
                {"period": {"start": start, "end": start + 30 * DAY}, "price": {"id": price_id}}
            ],
        },
    }  # fmt: skip


def pack_checkout(user: str) -> dict[str, Any]:
    return {
        "id": "cs_pack",
        "object": "checkout.session",
        "client_reference_id": user,
        "customer": "cus_ada",
        "mode": "payment",
        "metadata": {"price_id": PACK},
        "payment_status": "paid",
        "payment_intent": "pi_pack",
        "amount_total": 900,
        "currency": "usd",
        "created": int(time.time()),
        "customer_details": {"email": "ada@example.com", "name": "Ada"},
    }


def use(api: Api, body: dict[str, Any], *, key: str = KEY) -> requests.Response:
    return requests.post(
        api.url + "/api/usage",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=HANG_GUARD,
    )


def credits_of(api: Api, user: str) -> list[dict[str, Any]]:
    token = api.token(sub=user, email="ada@example.com")
    answer = requests.get(
        api.url + "/api/me", headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD
    )
    assert answer.status_code == 200
    found: list[dict[str, Any]] = answer.json()["credits"]
    return found


def test_credits_granted_consumed_reset_bought_and_refunded(
    usage_api: tuple[Api, str], db: Database
) -> None:
    api, ada = usage_api
    now = int(time.time())
    deliver(api, "invoice.paid", invoice(1, now - DAY), created=now - DAY)
    [held] = credits_of(api, ada)
    assert held == {
        "feature": "generations", "balance": 100, "granted": 100, "used": 0,
        "resetsAt": held["resetsAt"], "teamId": None, "packs": 0, "packsExpireAt": None,
        "topUp": None,
    }  # fmt: skip
    assert held["resetsAt"] is not None

    def one(n: int) -> tuple[int, Any]:
        r = use(api, {"userId": ada, "feature": "generations", "amount": 1, "key": f"k{n}"})
        return r.status_code, r.json()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(150)))
    assert Counter(status for status, _ in answers) == {200: 100, 402: 50}
    assert {body["error"] for status, body in answers if status == 402} == {
        "Not enough generations credits"
    }
    assert credits_of(api, ada)[0]["balance"] == 0
    settle(api)  # 90% of the grant used (CREDITS_ALERTS' default): told once this period
    [low] = [m for m in outbox(api) if "You have used 90%" in str(m["Subject"])]
    assert low["To"] == "ada@example.com"
    assert "Hi Ada," in text_of(low)
    told = " ".join(text_of(low).split())
    assert "Your generations credits: 90 of 100 used, 10 left at" in told
    assert "When none are left, what needs them is refused until more are added." in told
    assert "What is left of this period's credits ends at" in told
    with ThreadPoolExecutor(16) as pool:  # every key again: the first answer, nothing taken
        again = list(pool.map(one, range(150)))
    assert [s for s, _ in again] == [s for s, _ in answers]
    assert credits_of(api, ada)[0]["used"] == 100

    deliver(api, "invoice.paid", invoice(2, now), created=now)  # the next paid period
    assert credits_of(api, ada)[0] | {"resetsAt": None} == {
        "feature": "generations", "balance": 100, "granted": 100, "used": 0,
        "resetsAt": None, "teamId": None, "packs": 0, "packsExpireAt": None,
        "topUp": None,
    }  # fmt: skip
    deliver(api, "invoice.paid", invoice(1, now - DAY), created=now - DAY)  # a late copy
    assert credits_of(api, ada)[0]["balance"] == 100

    deliver(api, "checkout.session.completed", pack_checkout(ada), created=now + 1)
    assert credits_of(api, ada)[0]["balance"] == 600
    settle(api)
    [confirmation] = [m for m in outbox(api) if "Order confirmed" in str(m["Subject"])]
    assert len([m for m in outbox(api) if "You have used" in str(m["Subject"])]) == 1
    assert "500 credits for generations were added to your balance" in text_of(confirmation)
    assert "file" not in text_of(confirmation).lower()
    r = use(api, {"userId": ada, "feature": "generations", "amount": 150, "key": "big"})
    assert (r.status_code, r.json()) == (
        200, {"feature": "generations", "balance": 450, "used": 150},
    )  # fmt: skip
    # GET /api/me tells the pack as one, with what is left of its feature now.
    token = api.token(sub=ada, email="ada@example.com")
    me = requests.get(api.url + "/api/me", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    [pack] = [e for e in me.json()["entitlements"] if e["priceId"] == PACK]
    assert (pack["label"], pack["summary"]) == (
        "Credit pack",
        "A credit pack: 500 credits for generations added to your balance;"
        " 450 credits for generations left now.",
    )
    # The period's credits are drawn first: the pack's stay whole, and say so.
    assert {k: credits_of(api, ada)[0][k] for k in ("balance", "packs", "packsExpireAt")} == {
        "balance": 450, "packs": 450, "packsExpireAt": None,
    }  # fmt: skip
    deliver(api, "invoice.paid", invoice(3, now + 30 * DAY), created=now + 2)
    assert credits_of(api, ada)[0]["balance"] == 550  # the pack's 450 kept, 100 new
    assert credits_of(api, ada)[0]["packs"] == 450
    refund = {
        "id": "ch_pack", "object": "charge", "amount": 900, "amount_refunded": 900,
        "refunded": True, "currency": "usd", "customer": "cus_ada", "payment_intent": "pi_pack",
        "invoice": None,
    }  # fmt: skip
    deliver(api, "charge.refunded", refund, created=now + 3)
    assert credits_of(api, ada)[0]["balance"] == 100  # what was left of the pack taken back


def test_a_subscriptions_end_ends_its_period_credits(
    usage_api: tuple[Api, str], db: Database
) -> None:
    api, ada = usage_api
    now = int(time.time())
    deliver(api, "invoice.paid", invoice(1, now - DAY), created=now - DAY)
    ended = {
        "id": "sub_ada", "object": "subscription", "customer": "cus_ada", "status": "canceled",
        "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": PLAN}}]},
    }  # fmt: skip
    deliver(api, "customer.subscription.deleted", ended, created=now)
    assert credits_of(api, ada) == []
    r = use(api, {"userId": ada, "feature": "generations", "amount": 1, "key": "after"})
    assert (r.status_code, r.json()) == (
        402, {"error": "Not enough generations credits", "balance": 0},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"feature": "generations", "amount": 1, "key": "k"}, "Give userId or teamId"),
        ({"userId": "x", "feature": "generations", "amount": 1, "key": "k"}, "(userId)"),
        ({"userId": "{ada}", "feature": "Gen X", "amount": 1, "key": "k"}, "feature must"),
        ({"userId": "{ada}", "feature": "generations\n", "amount": 1, "key": "k"}, "feature must"),
        ({"userId": "{ada}", "feature": "generations", "amount": 0, "key": "k"}, "amount must"),
        ({"userId": "{ada}", "feature": "generations", "amount": "1", "key": "k"}, "amount must"),
        ({"userId": "{ada}", "feature": "generations", "amount": 1, "key": ""}, "key must"),
        ({"userId": "{ada}", "feature": "generations", "amount": 1, "key": "k" * 101}, "key must"),
        ({"userId": "{ada}", "feature": "generations", "amount": 1}, "key must"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    usage_api: tuple[Api, str], db: Database, body: dict[str, Any], error: str
) -> None:
    api, ada = usage_api
    body = {k: v.replace("{ada}", ada) if isinstance(v, str) else v for k, v in body.items()}
    r = use(api, body)
    assert r.status_code == 400
    assert error in r.json()["error"]
    assert db.fetch_all("select * from public.credit_uses") == []


def test_a_wrong_key_is_401_an_unknown_account_404_and_a_reused_key_409(
    usage_api: tuple[Api, str], db: Database
) -> None:
    api, ada = usage_api
    body = {"userId": ada, "feature": "generations", "amount": 1, "key": "k1"}
    assert use(api, body, key="wrong").status_code == 401
    assert requests.post(api.url + "/api/usage", json=body, timeout=HANG_GUARD).status_code == 401
    stranger = {**body, "userId": "00000000-0000-4000-8000-000000000000"}
    assert use(api, stranger).json() == {"error": "No such user (userId)"}
    assert use(api, {**body, "teamId": stranger["userId"], "userId": None}).status_code == 404
    assert use(api, body).status_code == 402
    assert use(api, {**body, "amount": 2}).status_code == 409


def test_without_a_usage_key_the_route_does_not_exist(api: Api) -> None:
    body = {"userId": "00000000-0000-4000-8000-000000000000", "feature": "g", "amount": 1}
    assert use(api, {**body, "key": "k"}).status_code == 404


def test_each_alert_threshold_is_told_once_a_period(
    api_factory: Any, usage_api: tuple[Api, str], db: Database
) -> None:
    """CREDITS_ALERTS=50,90,100: 150 parallel consumptions over 100 credits tell each threshold
    once, the same keys again tell nothing more, and the next paid period tells them again."""
    _, ada = usage_api
    api = api_factory(usage_api_key=KEY, credits_alerts="50,90,100")
    now = int(time.time())
    deliver(api, "invoice.paid", invoice(1, now - DAY), created=now - DAY)

    def spend(prefix: str, n: int) -> None:
        def one(i: int) -> int:
            body = {"userId": ada, "feature": "generations", "amount": 1, "key": f"{prefix}{i}"}
            return use(api, body).status_code

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(n)))
        settle(api)

    def subjects() -> list[str]:
        return sorted(str(m["Subject"]) for m in outbox(api) if "credits" in str(m["Subject"]))

    told = [
        "You have used 50% of your generations credits",
        "You have used 90% of your generations credits",
        "Your generations credits are used up",
    ]
    spend("a", 150)
    assert subjects() == sorted(told)
    spend("a", 150)  # the same keys: nothing taken, nothing told
    assert subjects() == sorted(told)
    [row] = db.fetch_all("select count(*) as n from public.sent_emails where kind = 'credits-low'")
    assert row["n"] == 3
    deliver(api, "invoice.paid", invoice(2, now), created=now)  # the next period
    spend("b", 100)
    assert subjects() == sorted(told * 2)
    [used_up] = [m for m in outbox(api) if "used up" in str(m["Subject"])][-1:]
    assert "100 of 100 used, 0 left at" in " ".join(text_of(used_up).split())
