"""Every page on a phone's width, with the brand the settings name: nothing wider than the
screen, the brand in each title and in the landing's heading, one plan at most called most
popular (the first featured one); and every local address the docs name answers."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import requests
from playwright.sync_api import Browser, ViewportSize, expect

from tests.web.conftest import Site

# A phone held upright (an iPhone's CSS width); the layout must not scroll sideways.
NARROW: ViewportSize = {"width": 390, "height": 844}
PAGES = ("/", "/signin", "/dashboard", "/team", "/success", "/feedback", "/no-such-page")

expect.set_options(timeout=30_000)
ROOT = Path(__file__).resolve().parents[2]


def brand_of(site: Site) -> str:
    config = requests.get(f"{site.url}/config.js", timeout=30).text
    found = re.search(r'"brand": (".*?")', config)
    assert found is not None, config
    brand: str = json.loads(found.group(1))
    return brand


def test_every_page_fits_a_phone_and_names_the_brand(browser: Browser, site: Site) -> None:
    brand = brand_of(site)
    context = browser.new_context(base_url=site.url, viewport=NARROW)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # Signed in, with a team, a member's row and an invitation waiting: the widest content.
    page.goto("/signin")
    address = f"narrow-{uuid.uuid4().hex[:8]}@example.com"
    page.get_by_label("E-mail", exact=True).nth(1).fill(address)
    page.get_by_label("Password", exact=True).fill("correct horse battery")
    page.get_by_role("button", name="Create an account").click()
    page.wait_for_url(f"{site.url}/dashboard")
    page.goto("/team")
    page.get_by_label("Team name").fill("A team with a rather long name for a phone")
    page.get_by_role("button", name="Create the team").click()
    expect(page.locator("#team-name")).to_have_text("A team with a rather long name for a phone")
    page.get_by_label("E-mail", exact=True).fill("someone-with-a-long-address@example.com")
    page.get_by_role("button", name="Send the invitation").click()
    expect(page.locator("#invitations")).to_contain_text("someone-with-a-long-address")
    team_page = page.url

    too_wide: dict[str, int] = {}
    for path in (*PAGES, team_page.removeprefix(site.url)):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        expect(page).to_have_title(re.compile(re.escape(brand) + "$"))
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > NARROW["width"]:
            too_wide[path] = width
    assert too_wide == {}
    context.close()
    assert errors == []


def test_the_landing_names_the_brand_and_at_most_one_most_popular_plan(
    browser: Browser, site: Site
) -> None:
    brand = brand_of(site)
    context = browser.new_context(base_url=site.url, viewport=NARROW)
    page = context.new_page()
    page.goto("/")
    expect(page.locator("#pricing article").first).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_contain_text(brand)
    featured = page.locator("#pricing article.featured").count()
    assert featured >= 1, "the demo catalogue features a plan"
    expect(page.get_by_text("Most popular", exact=True)).to_have_count(1)
    context.close()


# A local address the README and the guides tell a founder to open or call.
LOCAL_URL = re.compile(r"http://localhost:8080(/[^\s\"'`)<>,]*)?")
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))


def test_every_local_address_the_docs_name_answers(site: Site) -> None:
    named = {
        (found.group(1) or "/").replace("{CHECKOUT_SESSION_ID}", "cs_test_none")
        for document in DOCUMENTS
        for found in LOCAL_URL.finditer(document.read_text())
    }
    assert "/" in named
    missing = {}
    # The support API is as missing to a stranger as a path that does not exist, by design.
    for path in sorted(p for p in named if not p.startswith("/api/admin")):
        answer = requests.get(f"{site.url}{path}", timeout=30, allow_redirects=False)
        # An API route the docs show with POST answers 405 to a GET: it exists.
        if answer.status_code == 404:
            missing[path] = answer.status_code
    assert missing == {}
