"""The Stripe stand-in's checkout page (dev/stripe_stand_in.py), as `make run` wires it: a
signed-in buyer's checkout, created through the API, is paid on the page; the events reach the
webhook signed as Stripe signs them, and access records the product and user that were chosen.
The commands the page prints deliver the same."""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import html5lib
import pytest
import requests

from adapters.db.pool import Database
from dev import stack as local_stack
from dev import stripe_stand_in
from dev.samples.catalogue import seed_demo_products
from dev.stripe_stand_in import StripeStandIn
from main import create_app
from tests.conftest import Api
from tests.dev.test_pipeline_view import rendered
from tests.emails.test_subscriber import outbox, text_of
from tests.helpers import HANG_GUARD, create_user, wait_for

NS = {"h": "http://www.w3.org/1999/xhtml"}
BRAND = "Initech"


@dataclass
class Local:
    api: Api
    stand_in: StripeStandIn


@pytest.fixture
def local(api_factory: Callable[..., Api]) -> Iterator[Local]:
    """The app over HTTP with the stand-in as its Stripe, paying through the app's webhook."""
    with stripe_stand_in.running(BRAND) as stand_in:
        api = api_factory(
            stripe_secret_key=stripe_stand_in.API_KEY,
            stripe_api_base=stand_in.url,
            brand_name=BRAND,
        )
        local_stack.pay_through(stand_in, api.container, api.url)
        yield Local(api, stand_in)


def checkout(api: Api, user: str, email: str, price: str, mode: str) -> str:
    """The signed-in user's checkout, created through the API; its page's URL."""
    token = api.token(sub=user, email=email)
    response = api.post(
        "/api/payments/create-checkout",
        json={
            "priceId": price,
            "mode": mode,
            "successUrl": "https://app.example.com/ok",
            "cancelUrl": "https://app.example.com/no",
        },
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    url: str = response.json()["url"]
    return url


def form_of(dom: str) -> tuple[str, str, dict[str, str]]:
    """The page's one form: method, action and its fields' values."""
    [form] = html5lib.parse(dom).findall(".//h:form", NS)
    fields = {i.get("name", ""): i.get("value", "") for i in form.findall(".//h:input", NS)}
    return form.get("method", "get").lower(), form.get("action", ""), fields


def commands_of(dom: str) -> list[str]:
    [pre] = html5lib.parse(dom).findall(".//h:pre[@id='commands']", NS)
    return "".join(pre.itertext()).strip().splitlines()


def bought(db: Database, session: str) -> list[dict[str, Any]]:
    return db.fetch_all(
        "select pu.user_id::text as user_id, pr.name, pr.stripe_price_id, pu.paid"
        " from public.purchases pu join public.products pr on pr.id = pu.product_id"
        " where pu.stripe_checkout_session_id = %s",
        (session,),
    )


def entitlements(db: Database, user: str) -> dict[str, dict[str, Any]]:
    rows = db.fetch_all(
        "select e.kind, e.price_id, e.active, e.current_period_end from public.entitlements e"
        " join public.accounts a on a.id = e.account_id"
        " where a.kind = 'personal' and a.owner_id = %s",
        (user,),
    )
    return {r["kind"]: r for r in rows}


def kinds_sent(api: Api, db: Database, email: str) -> set[str]:
    """The kinds of e-mail recorded as sent to `email`, once the bus is idle."""
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    rows = db.fetch_all("select kind from public.sent_emails where recipient = %s", (email,))
    return {r["kind"] for r in rows}


def confirmation_to(api: Api, email: str) -> str:
    [found] = [
        text_of(m)
        for m in outbox(api)
        if email in str(m["To"]) and str(m["Subject"]).startswith("Order confirmed")
    ]
    return " ".join(found.split())


@pytest.mark.parametrize(
    ("price", "mode", "product", "says"),
    [
        ("price_demo_pro_github", "payment", "Pro Repository", "Claim your repository access"),
        ("price_demo_team_monthly", "subscription", "Team Monthly", "renews every month"),
    ],
)
def test_the_page_pays_for_the_chosen_product_as_the_signed_in_buyer(
    local: Local, db: Database, tmp_path: Path, price: str, mode: str, product: str, says: str
) -> None:
    seed_demo_products(db)
    email = "ada@example.com"
    user = create_user(db, email)
    page = checkout(local.api, user, email, price, mode)
    session = page.rsplit("/", 1)[-1]

    # What a person's browser shows: the session's price, mode and user, a form, the commands.
    dom = rendered(page, tmp_path)
    assert f"{BRAND}: Checkout" in dom
    method, action, fields = form_of(dom)
    # Posted to the page's own address: the docs' walks post `email` to the checkout's URL;
    # a new buyer may give a VAT number, as the session collects tax ids.
    assert (method, action, fields) == ("post", f"/pay/{session}", {"email": email, "tax_id": ""})
    [first, *rest] = commands_of(dom)
    assert f"--price {price}" in first
    assert f"--user {user}" in first
    assert f"--session {session}" in first
    assert [c.split()[7] for c in rest] == (
        ["customer.subscription.created"] if mode == "subscription" else []
    )

    paid = requests.post(local.stand_in.url + action, data=fields, timeout=HANG_GUARD)

    assert paid.status_code == 200, paid.text
    assert "-&gt; 200" in paid.text or "&rarr; 200" in paid.text
    wait_for(lambda: bought(db, session))
    [purchase] = bought(db, session)
    assert (purchase["user_id"], purchase["name"], purchase["paid"]) == (user, product, True)
    held = wait_for(lambda: entitlements(db, user).get(
        "subscription" if mode == "subscription" else "purchase"
    ))  # fmt: skip
    assert (held["price_id"], held["active"]) == (price, True)
    if mode == "subscription":
        wait_for(lambda: entitlements(db, user)["subscription"]["current_period_end"])
    # Signed in: no "you bought this while signed out" sign-in mail.
    assert kinds_sent(local.api, db, email) == {"purchase-confirmation"}
    text = confirmation_to(local.api, email)
    assert says in text
    assert f"The {BRAND} team" in text
    # Its receipt link, found as in production in the session Stripe expands: the paid
    # invoice's page (a subscription) or the payment's charge's receipt; it opens.
    link = re.search(rf"{re.escape(local.stand_in.url)}/(invoice|receipt)/[a-z0-9_]+", text)
    assert link is not None, text
    assert link[1] == ("invoice" if mode == "subscription" else "receipt")
    assert requests.get(link[0], timeout=5).status_code == 200
    # Paid once: the page says so and a second payment is refused.
    again = requests.post(local.stand_in.url + action, data=fields, timeout=HANG_GUARD)
    assert again.status_code == 400


def test_the_printed_commands_record_the_same_purchase(local: Local, db: Database) -> None:
    seed_demo_products(db)
    email = "grace@example.com"
    user = create_user(db, email)
    page = checkout(local.api, user, email, "price_demo_pro_github", "payment")
    session = page.rsplit("/", 1)[-1]
    html = requests.get(page, timeout=HANG_GUARD).text
    [command] = commands_of(html)
    args = shlex.split(command)
    assert args[:5] == ["uv", "run", "flask", "--app", "main"]

    runner = create_app(local.api.container.settings).test_cli_runner()
    url = local.api.url + "/api/webhook/payments"
    done = runner.invoke(args=[*args[5:], "--url", url])

    assert done.exit_code == 0, done.output
    wait_for(lambda: bought(db, session))
    [purchase] = bought(db, session)
    assert (purchase["user_id"], purchase["name"]) == (user, "Pro Repository")
    assert kinds_sent(local.api, db, email) == {"purchase-confirmation"}


def test_without_a_webhook_the_page_prints_the_commands_only() -> None:
    with stripe_stand_in.running() as stand_in, contextlib.closing(requests.Session()) as http:
        created = http.post(
            stand_in.url + "/v1/checkout/sessions",
            data={"mode": "payment", "line_items[0][price]": "price_x"},
            timeout=HANG_GUARD,
        ).json()
        page = http.get(created["url"], timeout=HANG_GUARD).text
        paid = http.post(created["url"], data={"email": "a@example.com"}, timeout=HANG_GUARD)
    assert "<form" not in page
    assert commands_of(page) == [
        "uv run flask --app main events send checkout.session.completed --email"
        f" YOU@example.com --price price_x --session {created['id']}"
    ]
    assert paid.status_code == 400
