"""Automatic top-up end to end, through the real routes, the bus, the Stripe stand-in and signed
events: parallel consumptions crossing the threshold charge one pack off-session, its credits
arrive once however often Stripe says it is paid, nothing is charged once it is off (even for a
claim already made), a decline or a card needing authentication turns it off with one true mail,
and a Stripe outage halfway charges once when it comes back."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.db.pool import Database, DatabaseUnavailable
from adapters.stripe_api import PaymentsUnavailable
from core.events import Event
from credits import service as credits
from dev.samples.catalogue import price, product
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from tests.access.lifecycle_helpers import link, post_event, settle
from tests.conftest import Api
from tests.credits.test_routes import KEY, deliver, pack_checkout, use
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import stripe_event, wait_for
from tests.teams.test_routes import Person, join, new_team
from topups.charge import TopUps

PACK, PLAIN_PACK = "price_gen_pack", "price_plain_pack"
TOP_UP = "/api/me/credits/top-up"


@pytest.fixture
def shop(
    api_factory: Any, fakes: tuple[StripeStandIn, Any], db: Database
) -> tuple[Api, Person, StripeStandIn]:
    """A pack of 500 generations marked for top-up, another pack not, and Ada, paying as
    cus_ada with a saved card, holding one pack."""
    api = api_factory(usage_api_key=KEY)
    stripe = fakes[0]
    stripe.products["prod_pack"] = product(
        "prod_pack", "500 generations", "",
        {"type": "link", "credits": "generations:500", "credits_period": "once", "top_up": "true"},
    )  # fmt: skip
    stripe.prices[PACK] = price(PACK, "prod_pack", 900)
    stripe.products["prod_plain"] = product(
        "prod_plain", "Plain pack", "",
        {"type": "link", "credits": "generations:50", "credits_period": "once"},
    )  # fmt: skip
    stripe.prices[PLAIN_PACK] = price(PLAIN_PACK, "prod_plain", 500)
    for n, prod in enumerate(("prod_pack", "prod_plain")):
        deliver(api, "product.updated", stripe.products[prod], created=1_000 + n)
    ada = Person(api, db, "ada@example.com", name="Ada")
    link(db, ada.id, "cus_ada")
    stripe.save_card("cus_ada")
    deliver(api, "checkout.session.completed", pack_checkout(ada.id), created=int(time.time()))
    assert balance(ada) == 500
    return api, ada, stripe


def me_credits(person: Person) -> dict[str, Any]:
    answer = person.call("GET", "/api/me")
    assert answer.status_code == 200, answer.text
    [held] = [c for c in answer.json()["credits"] if c["teamId"] is None]
    return dict(held)


def balance(person: Person) -> int:
    return int(me_credits(person)["balance"])


def consume(api: Api, person: Person, n: int, *, prefix: str = "k") -> list[int]:
    def one(i: int) -> int:
        body = {"userId": person.id, "feature": "generations", "amount": 1, "key": f"{prefix}{i}"}
        return use(api, body).status_code

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(n)))


def paid_events(stripe: StripeStandIn, event_type: str) -> list[dict[str, Any]]:
    return [e for e in stripe.events if e["type"] == event_type]


def post_stripe(api: Api, event: dict[str, Any]) -> None:
    post_event(api, json.dumps(event).encode())
    settle(api)


def test_parallel_consumptions_crossing_the_threshold_charge_one_pack_granted_once(
    shop: tuple[Api, Person, StripeStandIn],
) -> None:
    api, ada, stripe = shop
    on = ada.call("PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 470})
    assert (on.status_code, on.json()) == (
        200, {"feature": "generations", "priceId": PACK, "below": 470, "teamId": None},
    )  # fmt: skip
    assert me_credits(ada)["topUp"] == {"priceId": PACK, "below": 470}

    assert consume(api, ada, 50) == [200] * 50
    settle(api)
    [charge] = stripe.off_session_charges()
    assert len(stripe.calls("POST", "/v1/payment_intents")) == 1
    assert (charge["amount"], charge["currency"], charge["customer"]) == (900, "usd", "cus_ada")
    assert charge["payment_method"] == "pm_card_visa"
    assert charge["status"] == "succeeded"
    assert charge["metadata"]["top_up_price"] == PACK
    assert charge["metadata"]["top_up_feature"] == "generations"
    [sent] = stripe.calls("POST", "/v1/payment_intents")
    assert sent.form()["off_session"] == "true"
    assert sent.form()["confirm"] == "true"
    assert sent.headers["Idempotency-Key"].startswith("top-up-")
    assert balance(ada) == 450  # not granted before Stripe says it is paid

    [succeeded] = paid_events(stripe, "payment_intent.succeeded")
    post_stripe(api, succeeded)
    post_stripe(api, succeeded)  # redelivered: granted once
    assert balance(ada) == 950
    assert me_credits(ada)["packs"] == 950
    # The same metadata on another customer's payment (not this service's charge): nothing.
    forged = succeeded["data"]["object"] | {"id": "pi_forged", "customer": "cus_eve"}
    post_event(api, stripe_event("payment_intent.succeeded", forged))
    settle(api)
    assert balance(ada) == 950

    # Above the threshold again: more consumptions charge nothing more.
    assert consume(api, ada, 20, prefix="again") == [200] * 20
    settle(api)
    assert len(stripe.off_session_charges()) == 1


def test_nothing_is_charged_after_top_up_is_turned_off_even_for_a_claim_made(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    api, ada, stripe = shop
    assert (
        ada.call(
            "PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 495}
        ).status_code
        == 200
    )
    # A consumption claims the top-up; its announcement is held here, not on the bus yet.
    held: list[Event] = []
    credits.consume(
        db, credits.Payer(user_id=ada.id), "generations", 10, "held",
        publish=lambda event, _: held.append(event),
    )  # fmt: skip
    [claimed] = held
    off = ada.call("DELETE", TOP_UP, {"feature": "generations"})
    assert off.status_code == 204
    assert me_credits(ada)["topUp"] is None
    top_ups = TopUps(db, api.container.stripe, lambda event, data: None)
    assert top_ups.handle(claimed) == "top-up turned off before its charge"
    assert top_ups.handle(claimed) == "top-up settled before"
    assert consume(api, ada, 30) == [200] * 30
    settle(api)
    assert stripe.off_session_charges() == []
    assert stripe.calls("POST", "/v1/payment_intents") == []


@pytest.mark.parametrize(
    ("card", "refusal", "told"),
    [
        ("pm_card_chargeDeclined", None, "the bank declined the card on file"),
        ("pm_card_visa", "authentication_required", "needs you to confirm the payment"),
        ("pm_card_authenticationRequired", None, "needs you to confirm the payment"),
    ],
)
def test_a_refused_charge_turns_top_up_off_and_tells_the_payer_once(
    shop: tuple[Api, Person, StripeStandIn], card: str, refusal: str | None, told: str
) -> None:
    api, ada, stripe = shop
    stripe.save_card("cus_ada", card)
    stripe.next_off_session_refusal = refusal
    assert (
        ada.call(
            "PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 495}
        ).status_code
        == 200
    )
    assert consume(api, ada, 10) == [200] * 10
    settle(api)
    [charge] = stripe.off_session_charges()
    assert charge["status"] == "requires_payment_method"
    assert me_credits(ada)["topUp"] is None
    [failed] = paid_events(stripe, "payment_intent.payment_failed")
    post_stripe(api, failed)  # Stripe's own word of it: told once all the same
    mails = [m for m in outbox(api) if "top-up" in str(m["Subject"])]
    assert [m["Subject"] for m in mails] == ["Auto top-up of generations credits is off"]
    text = " ".join(text_of(mails[0]).split())
    assert told in text
    assert "Nothing was charged." in text
    assert "Automatic top-up is now off for generations" in text
    assert mails[0]["To"] == "ada@example.com"
    # Off: later consumptions charge nothing, and the balance is what it was.
    stripe.save_card("cus_ada")
    assert consume(api, ada, 10, prefix="later") == [200] * 10
    settle(api)
    assert len(stripe.off_session_charges()) == 1
    assert balance(ada) == 480


def test_a_customer_without_a_saved_card_is_told_and_nothing_is_charged(
    shop: tuple[Api, Person, StripeStandIn],
) -> None:
    api, ada, stripe = shop
    stripe.customers["cus_ada"]["invoice_settings"]["default_payment_method"] = None
    assert (
        ada.call(
            "PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 495}
        ).status_code
        == 200
    )
    assert consume(api, ada, 10) == [200] * 10
    settle(api)
    assert stripe.calls("POST", "/v1/payment_intents") == []
    assert me_credits(ada)["topUp"] is None
    [mail] = [m for m in outbox(api) if "top-up" in str(m["Subject"])]
    assert "no card is saved" in " ".join(text_of(mail).split())


def test_stripe_failing_halfway_keeps_the_claim_and_its_retry_charges_once(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    api, ada, stripe = shop
    assert (
        ada.call(
            "PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 495}
        ).status_code
        == 200
    )
    held: list[Event] = []
    credits.consume(
        db, credits.Payer(user_id=ada.id), "generations", 10, "held",
        publish=lambda event, _: held.append(event),
    )  # fmt: skip
    [claimed] = held
    top_ups = TopUps(db, api.container.stripe, lambda event, data: None)
    stripe.outage_paths.add("/v1/payment_intents")
    with pytest.raises(PaymentsUnavailable):
        top_ups.handle(claimed)
    stripe.outage_paths.clear()
    # Stripe made the charge but its answer was lost: the same key answers the same intent.
    assert top_ups.handle(claimed) == "top-up charged"
    assert top_ups.handle(claimed) == "top-up charged before"
    assert len(stripe.off_session_charges()) == 1
    keys = {c.headers["Idempotency-Key"] for c in stripe.calls("POST", "/v1/payment_intents")}
    assert len(keys) == 1
    # No second claim while this one is in flight.
    more: list[Event] = []
    credits.consume(
        db, credits.Payer(user_id=ada.id), "generations", 10, "more",
        publish=lambda event, _: more.append(event),
    )  # fmt: skip
    assert more == []


def test_choosing_a_top_up_is_validated_and_a_teams_is_its_managers(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    api, ada, _ = shop
    refused = {
        "no such price": {"feature": "generations", "priceId": "price_nope", "below": 5},
        "not for top-up": {"feature": "generations", "priceId": PLAIN_PACK, "below": 5},
        "another feature": {"feature": "images", "priceId": PACK, "below": 5},
        "below zero": {"feature": "generations", "priceId": PACK, "below": 0},
        "below as text": {"feature": "generations", "priceId": PACK, "below": "5"},
        "no feature": {"priceId": PACK, "below": 5},
        "an unknown field": {"feature": "generations", "priceId": PACK, "below": 5, "x": 1},
    }
    for why, body in refused.items():
        answer = ada.call("PUT", TOP_UP, body)
        assert answer.status_code == 400, why
        assert answer.json()["error"], why
    assert me_credits(ada)["topUp"] is None
    assert "priceId" in ada.call("PUT", TOP_UP, refused["not for top-up"]).json()["error"]

    team = new_team(ada)
    eve, bob = Person(api, db, "eve@example.com"), Person(api, db, "bob@example.com")
    join(api, team, ada, bob)
    body = {"feature": "generations", "priceId": PACK, "below": 5, "teamId": team}
    assert eve.call("PUT", TOP_UP, body).status_code == 404
    assert bob.call("PUT", TOP_UP, body).status_code == 403
    assert bob.call("DELETE", TOP_UP, {"feature": "generations", "teamId": team}).status_code == 403
    assert eve.call("DELETE", TOP_UP, {"feature": "generations", "teamId": team}).status_code == 404
    on = ada.call("PUT", TOP_UP, body)
    assert (on.status_code, on.json()["teamId"]) == (200, team)
    assert db.fetch_all(
        "select account_id::text, below from public.credit_top_ups where enabled"
    ) == [{"account_id": team, "below": 5}]
    assert ada.call("DELETE", TOP_UP, {"feature": "generations", "teamId": team}).status_code == 204
    assert db.fetch_all("select 1 from public.credit_top_ups where enabled") == []
    assert datetime.now(UTC)  # the routes answered in time


def test_a_charge_whose_record_is_lost_after_stripe_made_it_is_charged_once_when_retried(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    """The worker's connection killed while Stripe makes the charge (its transaction, holding
    the claim, rolls back): the retry's idempotency key answers the same intent."""
    api, ada, stripe = shop
    assert (
        ada.call(
            "PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 495}
        ).status_code
        == 200
    )
    held: list[Event] = []
    credits.consume(
        db, credits.Payer(user_id=ada.id), "generations", 10, "held",
        publish=lambda event, _: held.append(event),
    )  # fmt: skip
    [claimed] = held
    top_ups = TopUps(db, api.container.stripe, lambda event, data: None)
    outcome: list[Any] = []

    def charge() -> None:
        try:
            outcome.append(top_ups.handle(claimed))
        except Exception as exc:
            outcome.append(exc)

    stripe.responding.clear()  # Stripe slow: the worker waits inside its transaction
    worker = threading.Thread(target=charge)
    worker.start()
    [pid] = wait_for(
        lambda: [
            r["pid"]
            for r in db.fetch_all(
                "select a.pid from pg_stat_activity a join pg_locks l on l.pid = a.pid"
                " where a.state = 'idle in transaction' and l.mode = 'RowShareLock'"
                " and l.relation = 'public.credit_top_ups'::regclass"
            )
        ]
    )
    db.fetch_all("select pg_terminate_backend(%s) as done", (pid,))
    stripe.responding.set()
    worker.join()
    [failed] = outcome
    assert isinstance(failed, DatabaseUnavailable)
    assert len(stripe.off_session_charges()) == 1  # Stripe made it; the record was lost
    assert top_ups.handle(claimed) == "top-up charged"
    assert top_ups.handle(claimed) == "top-up charged before"
    [charge_made] = stripe.off_session_charges()
    [row] = db.fetch_all("select payment_intent from public.credit_top_ups")
    assert row["payment_intent"] == charge_made["id"]
    assert len(stripe.calls("POST", "/v1/payment_intents")) == 2  # sent twice, charged once


def test_a_claim_whose_announcement_was_lost_is_charged_by_the_sweep_once(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    api, ada, stripe = shop
    assert (
        ada.call(
            "PUT", TOP_UP, {"feature": "generations", "priceId": PACK, "below": 495}
        ).status_code
        == 200
    )

    def bus_down(event: Event, data: bytes) -> None:
        raise RuntimeError("the bus did not take it")

    taken = credits.consume(
        db, credits.Payer(user_id=ada.id), "generations", 10, "lost", publish=bus_down
    )
    assert taken.balance == 490  # the consumption stands; its claim too, unannounced
    assert db.fetch_all("select claimed_at is not null as claimed from public.credit_top_ups") == [
        {"claimed": True}
    ]
    app = create_app(container=api.container)
    told = []
    with app.app_context():
        for _ in range(2):  # run twice: charged once
            result = app.test_cli_runner().invoke(args=["credits", "report", "--older-than", "0"])
            assert result.exit_code == 0, result.output
            told.append("announced 1 automatic top-up(s)" in result.output)
            settle(api)
    assert told == [True, False]  # the second finds it charged
    assert len(stripe.off_session_charges()) == 1
    assert (
        len({c.headers["Idempotency-Key"] for c in stripe.calls("POST", "/v1/payment_intents")})
        == 1
    )


def test_a_threshold_above_the_packs_credits_is_refused(
    shop: tuple[Api, Person, StripeStandIn],
) -> None:
    """A pack bought below a threshold higher than its credits can leave the balance still
    below it: each consumption after its grant would buy another, one crossing charged again
    and again."""
    api, ada, stripe = shop
    for below in (501, 2_000, 1_000_000_000):
        body = {"feature": "generations", "priceId": PACK, "below": below}
        answer = ada.call("PUT", TOP_UP, body)
        assert answer.status_code == 400, below
        assert "below" in answer.json()["error"]
    assert me_credits(ada)["topUp"] is None
    assert consume(api, ada, 5) == [200] * 5
    settle(api)
    assert stripe.off_session_charges() == []
    at_most = {"feature": "generations", "priceId": PACK, "below": 500}
    assert ada.call("PUT", TOP_UP, at_most).status_code == 200


def test_a_payment_naming_a_top_up_without_a_customer_grants_nothing(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    """A team without a Stripe customer, and a paid intent carrying its top-up's metadata but no
    customer (not this service's charge, which is always made on the account's customer)."""
    api, ada, _ = shop
    team = new_team(ada)
    assert db.fetch_all("select customer_id from public.accounts where id = %s::uuid", (team,)) == [
        {"customer_id": None}
    ]
    intent = {
        "id": "pi_no_customer",
        "object": "payment_intent",
        "amount": 900,
        "currency": "usd",
        "status": "succeeded",
        "customer": None,
        "metadata": {
            "top_up_account": team,
            "top_up_feature": "generations",
            "top_up_crossing": "1",
            "top_up_price": PACK,
        },
    }
    post_event(api, stripe_event("payment_intent.succeeded", intent))
    settle(api)
    assert (
        db.fetch_all("select 1 from public.credit_grants where account_id = %s::uuid", (team,))
        == []
    )


def test_a_claim_whose_threshold_was_lowered_before_its_charge_is_not_charged(
    shop: tuple[Api, Person, StripeStandIn], db: Database
) -> None:
    """The holder lowers the threshold (or turns top-up off and on again with a lower one)
    while a claim waits for its charge: the balance is no longer below what they chose, so the
    pack is not bought, and the next crossing of the new threshold is."""
    api, ada, stripe = shop
    on = {"feature": "generations", "priceId": PACK, "below": 495}
    assert ada.call("PUT", TOP_UP, on).status_code == 200
    held: list[Event] = []
    credits.consume(
        db, credits.Payer(user_id=ada.id), "generations", 10, "held",
        publish=lambda event, _: held.append(event),
    )  # fmt: skip
    [claimed] = held
    assert ada.call("DELETE", TOP_UP, {"feature": "generations"}).status_code == 204
    lower = {"feature": "generations", "priceId": PACK, "below": 10}
    assert ada.call("PUT", TOP_UP, lower).status_code == 200
    top_ups = TopUps(db, api.container.stripe, lambda event, data: None)
    assert top_ups.handle(claimed) == "top-up not needed: the balance is not below its threshold"
    assert stripe.calls("POST", "/v1/payment_intents") == []
    assert me_credits(ada)["topUp"] == {"priceId": PACK, "below": 10}
    # Released: crossing the new threshold claims and charges one pack.
    assert consume(api, ada, 481) == [200] * 481
    settle(api)
    assert len(stripe.off_session_charges()) == 1
