"""The pricing as a founder's catalogue makes it: a plan sold monthly and yearly with a free
trial shows one interval at a time, in its own currency and saying whether tax is included,
says the trial, and keeps the one-time products in both; made on the Stripe stand-in `make run`
serves and loaded by `products sync`, as a founder's own products are."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import requests
from playwright.sync_api import Browser, expect

from dev import stripe_stand_in
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import HANG_GUARD
from tests.web.conftest import Site

expect.set_options(timeout=HANG_GUARD * 1000)


def stand_in(site: Site) -> dict[str, str]:
    """The environment `.data/run.env` exports for the CLI, the Stripe stand-in's among it."""
    lines = (site.data / "run.env").read_text().splitlines()
    pairs = (
        line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export ")
    )
    return {name: shlex.split(value)[0] for name, value in pairs}


def test_a_plan_sold_monthly_and_yearly_with_a_trial_shows_one_interval_at_a_time(
    browser: Browser, site: Site
) -> None:
    env = stand_in(site)
    base, auth = env["STRIPE_API_BASE"].rstrip("/"), (stripe_stand_in.API_KEY, "")
    made = requests.post(
        f"{base}/v1/products",
        data={"name": "Studio", "description": "Every template, every month.",
              "metadata[type]": "link", "metadata[trial_days]": "14"},
        auth=auth, timeout=HANG_GUARD,
    )  # fmt: skip
    assert made.status_code == 200, made.text
    for amount, interval in ((2900, "month"), (29000, "year")):
        price = requests.post(
            f"{base}/v1/prices",
            data={"product": made.json()["id"], "unit_amount": amount, "currency": "eur",
                  "tax_behavior": "inclusive", "recurring[interval]": interval},
            auth=auth, timeout=HANG_GUARD,
        )  # fmt: skip
        assert price.status_code == 200, price.text
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    synced = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "main", "products", "sync"],
        env=clean | env, capture_output=True, text=True, timeout=HANG_GUARD, check=False,
    )  # fmt: skip
    assert synced.returncode == 0, synced.stderr

    context = browser.new_context(base_url=site.url)
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_GUARD * 1000)
        page.goto("/")
        billing = page.get_by_role("group", name="Billing")
        expect(billing.get_by_label("Monthly")).to_be_checked()
        studio = page.locator("article.plan", has=page.get_by_role("heading", name="Studio"))
        expect(studio.locator(".price")).to_have_text("€29.00 incl. tax / month")
        expect(studio).to_contain_text("14-day free trial")
        expect(studio.get_by_role("button")).to_have_text("Start the 14-day free trial")
        expect(page.get_by_role("heading", name="Starter Kit")).to_be_visible()

        billing.get_by_label("Yearly").check()
        expect(studio.locator(".price")).to_have_text("€290.00 incl. tax / year")
        # The monthly-only team plan has no yearly price: it leaves; one-time products stay.
        expect(page.get_by_role("heading", name="Team Monthly")).to_have_count(0)
        expect(page.get_by_role("heading", name="Starter Kit")).to_be_visible()
    finally:
        context.close()
