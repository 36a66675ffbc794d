"""What people are told of what they were granted, in Chromium against `python -m dev.server`:
a comp with its end date and nothing of who gave it; a free trial's success page and its
confirmation mail with its end and first charge, never a payment; a pack's credits on pricing.
Screenshots go to $WEB_SCREENSHOTS (`make web-screenshots` sets docs/web)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, BrowserContext, Page, expect

from access.grant_words import day
from adapters.db.pool import Database
from adapters.tokens import User
from dev import stripe_stand_in
from support.service import give_comp
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import create_user, wait_for
from tests.web.conftest import Site
from tests.web.test_pricing import stand_in

expect.set_options(timeout=30_000)
TEAM_MONTHLY = "price_demo_team_monthly"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    chosen = os.environ.get("WEB_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path / "shots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def context(browser: Browser, site: Site) -> Iterator[BrowserContext]:
    opened = browser.new_context(base_url=site.url, viewport={"width": 1100, "height": 800})
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def catalogue(site: Site) -> None:
    """A monthly plan with a 14-day free trial and a pack of credits, made on the Stripe
    stand-in and loaded by `products sync`, as a founder's own products are."""
    env = stand_in(site)
    base, auth = env["STRIPE_API_BASE"].rstrip("/"), (stripe_stand_in.API_KEY, "")
    for name, description, metadata, amount, interval in (
        (
            "Studio",
            "Every template, every month.",
            {"type": "link", "trial_days": "14"},
            2900,
            "month",
        ),
        (
            "Generation Pack",
            "Generations to use whenever you need them.",
            {"type": "link", "credits": "generations:500", "credits_period": "once"},
            900,
            None,
        ),
    ):
        data = {"name": name, "description": description}
        data |= {f"metadata[{k}]": v for k, v in metadata.items()}
        made = requests.post(f"{base}/v1/products", data=data, auth=auth, timeout=10)
        assert made.status_code == 200, made.text
        price = {"product": made.json()["id"], "unit_amount": amount, "currency": "usd"}
        if interval:
            price["recurring[interval]"] = interval
        priced = requests.post(f"{base}/v1/prices", data=price, auth=auth, timeout=10)
        assert priced.status_code == 200, priced.text
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    synced = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "main", "products", "sync"],
        env=clean | env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert synced.returncode == 0, synced.stderr


def sign_up(page: Page, site: Site, email: str) -> None:
    page.goto("/signin")
    page.get_by_label("E-mail", exact=True).nth(1).fill(email)
    page.get_by_label("Password", exact=True).fill("correct horse battery")
    page.get_by_role("button", name="Create an account").click()
    page.wait_for_url(f"{site.url}/dashboard")


def unique(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}@example.com"


def test_a_comp_shows_free_until_its_end_never_a_paid_renewing_plan(
    site: Site, context: BrowserContext, database_url: str, shots: Path
) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    email = unique("bea")
    sign_up(page, site, email)
    expect(page.locator("#access-state")).to_have_text(re.compile("no access yet"))

    # An admin gives the team plan for 30 days (the support API's own service).
    db = Database(lambda: database_url, max_size=2)
    try:
        [row] = db.fetch_all(
            "select id::text as id from public.profiles where email = %s", (email,)
        )
        founder = create_user(db, unique("founder"))
        until = datetime.now(UTC) + timedelta(days=30)
        give_comp(
            db,
            user_id=row["id"],
            price_id=TEAM_MONTHLY,
            until=until,
            reason="Beta tester",
            admin=User(id=founder, email=None, aal="aal2"),
        )
    finally:
        db.close()

    page.reload()
    expect(page.locator("#access-state")).to_have_text("You have access.")
    held = page.locator("ul.sources li").filter(has_text="Team Monthly")
    expect(held).to_have_text(
        f"Team Monthly: Complimentary access, free until {day(until)}: nothing is charged."
    )
    expect(held).not_to_contain_text("renewing")
    expect(held).not_to_contain_text("subscription")
    page.screenshot(path=shots / "dashboard-comp.png", full_page=True)
    assert errors == []


def test_a_trials_success_page_and_mail_tell_its_end_and_first_charge(
    site: Site, context: BrowserContext, catalogue: None, shots: Path
) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    email = unique("tess")
    sign_up(page, site, email)
    page.goto("/")
    studio = page.locator("article.plan", has=page.get_by_role("heading", name="Studio"))
    studio.get_by_role("button", name="Start the 14-day free trial").click()
    page.wait_for_url(re.compile(r".*/pay/cs_\w+"))
    page.get_by_role("button", name=re.compile("^Pay")).click()
    page.get_by_role("link", name="Back to the site").click()
    page.wait_for_url(re.compile(re.escape(site.url) + r"/success\?session_id=cs_\w+"))

    ends = day(datetime.now(UTC) + timedelta(days=14))
    state = page.locator("#access-state")
    expect(state).to_have_text(
        "Your free trial has started: you have access now, and nothing was charged today."
    )
    # The page reads GET /api/me, which keeps no card: it says both outcomes; the mail, which
    # read the subscription, says which.
    expect(page.locator("ul.sources li").first).to_have_text(
        f"Studio: A free trial until {ends}. The first charge, $29.00, is on {ends}, then one"
        " every month until you cancel. Without a card on file, it ends then instead."
    )
    expect(page.locator("#page")).not_to_contain_text("Paid")
    page.screenshot(path=shots / "success-trial.png", full_page=True)

    def confirmation() -> str | None:
        found = [m for m in site.mails(email) if "free trial" in str(m["Subject"])]
        body = found[-1].get_body(("plain",)) if found else None
        return body.get_content() if body else None

    text: str = wait_for(confirmation)
    # The mail as its reader sees it, in Chromium: its HTML part.
    [mail] = [m for m in site.mails(email) if "free trial" in str(m["Subject"])]
    html = mail.get_body(("html",))
    assert html is not None
    reader = context.new_page()
    reader.set_content(html.get_content())
    expect(reader.get_by_text("Your free trial of Studio has started")).to_be_visible()
    expect(reader.locator("body")).to_contain_text("Free trial until")
    expect(reader.locator("body")).to_contain_text("Due today")
    expect(reader.locator("body")).to_contain_text(f"the first charge, $29.00, is on {ends}")
    expect(reader.locator("body")).not_to_contain_text("Total paid")
    reader.screenshot(path=shots / "mail-trial.png", full_page=True)
    reader.close()
    assert "Your free trial of Studio has started: nothing was charged today." in text
    assert re.search(r"Free trial until:\s+\w+ \d+, \d{4}", text)
    assert re.search(r"First charge:\s+\$29\.00 on \w+ \d+, \d{4}, with a card", text)
    assert re.search(r"Due today:\s+\$0\.00", text)
    assert "No card on file: it ends then unless you add one" in text
    assert f"the first charge, $29.00, is on {ends}" in text
    for untrue in ("payment went through", "Total paid", "renews every month"):
        assert untrue not in text

    page.goto("/dashboard")
    expect(page.locator("ul.sources li").filter(has_text="Studio")).to_contain_text(
        f"A free trial until {ends}."
    )
    assert errors == []


def test_pricing_says_what_a_pack_holds(
    site: Site, context: BrowserContext, catalogue: None, shots: Path
) -> None:
    page = context.new_page()
    page.goto("/")
    pack = page.locator("article.plan", has=page.get_by_role("heading", name="Generation Pack"))
    expect(pack.locator("ul.credits")).to_have_text(
        "500 credits for generations, added once to your balance"
    )
    team = page.locator("article.plan", has=page.get_by_role("heading", name="Team Monthly"))
    # Features by their Stripe display names, never their keys.
    expect(team.locator("ul.features")).to_contain_text("New templates each month")
    expect(team.locator("ul.features")).not_to_contain_text("templates,")
    page.screenshot(path=shots / "landing-pack.png", full_page=True)
