"""/_dev/pipeline (dev/pipeline_view.py), read as a person reads it: in headless Chromium.

The page is served the way `make run` serves it (dev/stack.api_server); events go in through
the signed webhook; Chromium loads the page and the e-mail it links to, and what it rendered is
checked against the ledger and the outbox.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import html5lib
import pytest
import requests

from access.announcements import announced_ids
from adapters.db.pool import Database
from dev import pipeline_view, stripe_stand_in
from dev import stack as local_stack
from dev.samples.catalogue import seed_demo_products
from tests.access.lifecycle_helpers import subscription
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.helpers import HANG_GUARD, create_user, stripe_event, wait_for

NS = {"h": "http://www.w3.org/1999/xhtml"}


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        message = "chromium is not installed (`make test` installs it)"
        if os.environ.get("CI", "").lower() in {"1", "true"}:
            pytest.fail(message)
        pytest.skip(message)
    return found


def rendered(url: str, tmp_path: Path) -> str:
    """The DOM Chromium built from `url`, as HTML."""
    done = subprocess.run(
        [
            chromium(),
            *("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"),
            *("--disable-background-networking", "--disable-component-update"),
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def cells(dom: str, table: str) -> list[list[str]]:
    """The text of each cell of each data row of the table with that id."""
    document = html5lib.parse(dom)
    rows = document.findall(f".//h:table[@id='{table}']//h:tr", NS)
    return [
        [" ".join("".join(td.itertext()).split()) for td in row.findall("h:td", NS)]
        for row in rows
        if row.findall("h:td", NS)
    ]


def links(dom: str) -> list[str]:
    return [a.get("href", "") for a in html5lib.parse(dom).findall(".//h:a", NS)]


@contextlib.contextmanager
def page_of(api: Api) -> Iterator[str]:
    """The local stack's server over the app's container; the page's URL."""
    server = local_stack.api_server(api.container, host="127.0.0.1", port=0)
    with contextlib.ExitStack() as stack:
        base = local_stack.serve_in_background(server, stack)
        stack.callback(server.server_close)
        yield base + pipeline_view.PATH + "/"


@pytest.fixture
def page(api: Api) -> Iterator[str]:
    with page_of(api) as url:
        yield url


def test_a_checkout_paid_on_stripes_page_lists_its_confirmation_with_its_event(
    api_factory: Callable[..., Api], db: Database, tmp_path: Path
) -> None:
    """As `make run` runs: the app's Stripe is the stand-in, whose page pays through the
    webhook; the page learns the event's checkout from Stripe (`GET /v1/events/{id}`)."""
    with stripe_stand_in.running() as stand_in:
        api = api_factory(stripe_secret_key=stripe_stand_in.API_KEY, stripe_api_base=stand_in.url)
        local_stack.pay_through(stand_in, api.container, api.url)
        seed_demo_products(db)
        email = "payer@example.com"
        user = create_user(db, email)
        made = api.post(
            "/api/payments/create-checkout",
            json={
                "priceId": "price_demo_pro_github",
                "mode": "payment",
                "successUrl": "https://app.example.com/ok",
                "cancelUrl": "https://app.example.com/no",
            },
            headers={"Authorization": f"Bearer {api.token(sub=user, email=email)}"},
        )
        assert made.status_code == 200, made.text
        session = made.json()["url"].rsplit("/", 1)[-1]
        paid = requests.post(
            f"{stand_in.url}/pay/{session}", data={"email": email}, timeout=HANG_GUARD
        )
        assert paid.status_code == 200, paid.text
        assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
        [event] = [e for e in stand_in.events if e["type"] == "checkout.session.completed"]
        [sent] = db.fetch_all("select event_id, kind, recipient from public.sent_emails")
        assert (sent["event_id"], sent["kind"]) == (f"granted_{session}", "purchase-confirmation")

        with page_of(api) as page:
            dom = rendered(page, tmp_path)

    [row] = [r for r in cells(dom, "events") if r[0] == event["id"]]
    assert row[1] == "checkout.session.completed"
    assert row[-1] == f"purchase-confirmation to {email}"
    # Named once, with its event: no row of the session's own.
    assert not [r for r in cells(dom, "events") if r[0] == session]
    assert f"{pipeline_view.PATH}/emails/granted_{session}/purchase-confirmation" in links(dom)


def test_the_page_shows_each_event_its_outcomes_and_the_mail_it_caused(
    api: Api, db: Database, page: str, tmp_path: Path
) -> None:
    seed_demo_products(db)
    buyer = create_user(db, "viewer@example.com")
    body = stripe_event("checkout.session.completed", completed(buyer))
    event_id = json.loads(body)["id"]
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    [ledger] = db.fetch_all(
        "select outcome from public.processed_events where event_id = %s and consumer = 'access'",
        (event_id,),
    )
    session = json.loads(body)["data"]["object"]["id"]
    [sent] = db.fetch_all(
        "select event_id, kind, recipient from public.sent_emails where event_id = any(%s)",
        (list(announced_ids(event_id, session)),),
    )

    dom = rendered(page, tmp_path)

    # The brand the mails name (BRAND_NAME, else the admin sender's name: "Acme Team <...>").
    assert f"<h1>{api.container.settings.product_name}: pipeline</h1>" in dom
    [row] = [r for r in cells(dom, "events") if r[0] == event_id]
    assert row[1] == "checkout.session.completed"
    assert ledger["outcome"] in row
    # A checkout's mail is keyed by its session; Stripe never sent this event (nor does it send
    # the ones `events send` makes up), so its session is unknown: listed on the session's row.
    [mailed] = [r for r in cells(dom, "events") if r[0] == session]
    assert mailed[1] == "checkout session"
    assert mailed[-1] == f"{sent['kind']} to {sent['recipient']}"
    mail = f"{pipeline_view.PATH}/emails/{sent['event_id']}/{sent['kind']}"
    assert mail in links(dom)

    letter = rendered(page.removesuffix(pipeline_view.PATH + "/") + mail, tmp_path)
    outbox = api.container.mailer.find(f"{sent['event_id']}/{sent['kind']}")  # type: ignore[attr-defined]
    assert outbox is not None
    message = email.message_from_bytes(outbox.read_bytes(), policy=email.policy.default)
    part = message.get_body(preferencelist=("html",))
    assert part is not None
    # What a reader sees of the HTML part as sent: the same words, in Chromium's DOM.
    assert visible_text(letter) == visible_text(str(part.get_content()))


def visible_text(html: str) -> str:
    document = html5lib.parse(html)
    body = document.find(".//h:body", NS)
    assert body is not None
    return " ".join("".join(body.itertext()).split())


def test_an_event_no_one_could_apply_is_listed_as_a_dead_letter(
    api: Api, page: str, tmp_path: Path
) -> None:
    # A renewal for a customer no checkout ever linked: retried until the bus gives up.
    body = stripe_event(
        "customer.subscription.updated", subscription(customer="cus_nobody", id="sub_nobody")
    )
    event_id = json.loads(body)["id"]
    assert post_event(api, body).status_code == 200
    dead = api.container.bus.dead_letters  # type: ignore[attr-defined]
    wait_for(lambda: any(event.id == event_id for _, event in dead))

    dom = rendered(page, tmp_path)

    assert ["access", event_id, "customer.subscription.updated"] in cells(dom, "dead-letters")


def test_an_e_mail_that_was_not_sent_is_not_found(api: Api, page: str) -> None:
    import requests

    response = requests.get(page + "emails/evt_none/receipt", timeout=HANG_GUARD)
    assert response.status_code == 404


def test_a_change_the_grant_already_holds_is_told_as_applied_not_as_an_error(
    db: Database, page: str, tmp_path: Path
) -> None:
    # The success page's completion of a subscription usually lands after Stripe's newer
    # subscription events: the access cycle records it `stale` (nothing to write).
    event_id = "completion_cs_test_already"
    with db.transaction() as conn:
        conn.execute(
            "insert into public.processed_events (consumer, event_id, event_type,"
            " event_created, outcome)"
            " values ('access', %s, 'checkout.session.completed', now(), 'stale')",
            (event_id,),
        )

    dom = rendered(page, tmp_path)

    [row] = [r for r in cells(dom, "events") if r[0] == event_id]
    assert "already applied" in row
    assert "stale" not in row
