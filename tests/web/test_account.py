"""The dashboard's account surfaces driven in the machine's Chromium against
`python -m dev.server`: credits after a pack and after consumption; the data downloaded and the
account deleted (then signed out, the old token refused); a second factor enrolled with a real
TOTP code up to `aal2`, which the support API asks of an admin. A password sign-up is welcomed
once. Each page's screenshot goes to $WEB_SCREENSHOTS (`make web-screenshots` sets docs/web),
else to the test's temporary directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyotp
import pytest
import requests
from playwright.sync_api import Browser, BrowserContext, expect

from adapters.supabase_auth import read_session, storage_key
from dev import stripe_stand_in
from tests.conftest import SETTINGS_VARIABLES
from tests.helpers import wait_for
from tests.web.conftest import USAGE_KEY, Site
from tests.web.test_journeys import Person, contexts, shots, unique

__all__ = ["contexts", "shots"]  # fixtures, shared with the journeys

expect.set_options(timeout=30_000)
PACK = "Generations Pack"


def run_env(site: Site) -> dict[str, str]:
    """The environment `.data/run.env` exports for the CLI (the stand-ins' among it)."""
    lines = (site.data / "run.env").read_text().splitlines()
    pairs = (
        line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export ")
    )
    return {name: shlex.split(value)[0] for name, value in pairs}


def flask(site: Site, *args: str) -> str:
    """`flask --app main ...` in another terminal, as the docs say, against the running stack."""
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "main", *args],
        env=clean | run_env(site), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def pack(site: Site) -> str:
    """A pack of 5 generations, made on the Stripe stand-in as a founder makes one in the
    Dashboard, and synced: on sale on the pricing page."""
    env = run_env(site)
    base, auth = env["STRIPE_API_BASE"].rstrip("/"), (stripe_stand_in.API_KEY, "")
    made = requests.post(
        f"{base}/v1/products",
        data={"name": PACK, "description": "Five generations, kept until used.",
              "metadata[type]": "link", "metadata[credits]": "generations:5",
              "metadata[credits_period]": "once"},
        auth=auth, timeout=10,
    )  # fmt: skip
    assert made.status_code == 200, made.text
    price = requests.post(
        f"{base}/v1/prices",
        data={"product": made.json()["id"], "unit_amount": 500, "currency": "usd"},
        auth=auth, timeout=10,
    )  # fmt: skip
    assert price.status_code == 200, price.text
    flask(site, "products", "sync")
    return str(made.json()["id"])


def token_of(context: BrowserContext, site: Site) -> str:
    """The access token the page keeps in its session cookie (as @supabase/ssr keeps it)."""
    cookies = {c["name"]: c["value"] for c in context.cookies()}
    session = read_session(storage_key(site.url), cookies)
    assert session is not None
    return str(session["access_token"])


def me(site: Site, token: str) -> requests.Response:
    return requests.get(
        f"{site.url}/api/me", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def welcomes(site: Site, to: str) -> list[Any]:
    return [m for m in site.mails(to) if str(m["Subject"]).startswith("Welcome")]


def test_a_password_sign_up_sees_its_credits_after_a_pack_and_after_consumption(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path, pack: str
) -> None:
    cleo = Person(browser, site, contexts, unique("cleo"))
    page = cleo.page
    page.goto("/signin")
    cleo.sign_up_with_a_password()
    expect(page.locator("#credits")).to_have_text("No credits yet.")
    # Welcomed once, though a password sign-up never passes the sign-in callback.
    wait_for(lambda: welcomes(site, cleo.email))
    page.reload()
    expect(page.locator("#credits")).to_have_text("No credits yet.")

    page.goto("/")
    page.get_by_role("button", name=f"Buy {PACK}").click()
    cleo.pay_on_the_stand_ins_page()
    page.goto("/dashboard")
    credits = page.locator("#credits li")
    expect(credits).to_have_count(1)
    expect(credits).to_contain_text("Generations: 5 credits left of 5, 0 used.")
    expect(credits).to_contain_text("From packs: kept until used.")

    user = me(site, token_of(page.context, site)).json()["id"]
    for n in range(2):  # the founder's other service consumes, as docs/credits.md says
        used = requests.post(
            f"{site.url}/api/usage",
            json={"userId": user, "feature": "generations", "amount": 1, "key": f"web-{n}"},
            headers={"Authorization": f"Bearer {USAGE_KEY}"},
            timeout=10,
        )
        assert used.status_code == 200, used.text
    page.reload()
    expect(credits).to_contain_text("Generations: 3 credits left of 5, 2 used.")
    page.screenshot(path=shots / "dashboard-credits.png", full_page=True)

    assert len(welcomes(site, cleo.email)) == 1
    assert cleo.errors == []


def test_the_data_is_downloaded_and_the_account_deleted_from_the_dashboard(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path
) -> None:
    dora = Person(browser, site, contexts, unique("dora"))
    page = dora.page
    page.goto("/signin")
    dora.sign_up_with_a_password()
    expect(page.get_by_text(f"Signed in as {dora.email}").first).to_be_visible()
    token = token_of(page.context, site)

    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download my data").click()
    download = downloading.value
    assert download.suggested_filename == "my-data.json"
    data = json.loads(Path(download.path()).read_text())
    assert data["profile"]["email"] == dora.email
    expect(page.get_by_role("status")).to_contain_text("Your data is downloaded")
    page.screenshot(path=shots / "dashboard-settings.png", full_page=True)

    # The confirmation the API asks: the address typed again; another one is refused.
    page.get_by_label("Type your e-mail address to confirm").fill("someone@example.com")
    page.get_by_role("button", name="Delete my account").click()
    expect(page.get_by_role("alert")).to_contain_text("confirm")
    assert me(site, token).status_code == 200

    page.get_by_label("Type your e-mail address to confirm").fill(dora.email)
    page.get_by_role("button", name="Delete my account").click()

    expect(page.get_by_role("heading", name="Your account is deleted")).to_be_visible()
    expect(page.get_by_text("Signed in as")).to_have_count(0)
    expect(page.locator("#site-header").get_by_role("link", name="Sign in")).to_be_visible()
    page.screenshot(path=shots / "dashboard-deleted.png", full_page=True)
    assert me(site, token).status_code == 401
    page.goto("/dashboard")
    expect(page.get_by_text("Sign in to see your dashboard.")).to_be_visible()
    wait_for(lambda: [m for m in site.mails(dora.email) if "is deleted" in str(m["Subject"])])
    assert dora.errors == []


def test_a_page_holding_a_deleted_accounts_session_signs_out(
    browser: Browser, site: Site, contexts: list[BrowserContext]
) -> None:
    """The account deleted elsewhere (another tab, a device): the next page the old session
    opens is refused by the API and signs out."""
    eli = Person(browser, site, contexts, unique("eli"))
    page = eli.page
    page.goto("/signin")
    eli.sign_up_with_a_password()
    token = token_of(page.context, site)
    gone = requests.delete(
        f"{site.url}/api/me",
        json={"confirm": eli.email},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert gone.status_code == 200, gone.text

    page.goto("/dashboard")

    expect(page.get_by_role("alert")).to_have_text("This account was deleted")
    expect(page.get_by_text("Sign in to see your dashboard.")).to_be_visible()
    expect(page.get_by_text("Signed in as")).to_have_count(0)
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert read_session(storage_key(site.url), cookies) is None


def test_an_admin_enrols_a_second_factor_to_aal2_and_the_support_api_answers(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path
) -> None:
    """docs/support.md's path for a first admin, locally: sign up, `users admin`, a TOTP factor
    enrolled and verified on the dashboard, the support API answering the `aal2` token."""
    fay = Person(browser, site, contexts, unique("fay"))
    page = fay.page
    page.goto("/signin")
    fay.sign_up_with_a_password()
    assert "admin:" in flask(site, "users", "admin", fay.email)
    metrics = f"{site.url}/api/admin/metrics"

    def support(token: str) -> int:
        answer = requests.get(metrics, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        return answer.status_code

    assert support(token_of(page.context, site)) == 404  # one factor: no support API

    page.reload()
    factor = page.locator("#second-factor")
    expect(factor.locator("#factor-state")).to_contain_text("Off.")
    factor.get_by_role("button", name="Add an authenticator app").click()
    qr = factor.get_by_role("img", name="QR code of your authenticator key")
    expect(qr).to_be_visible()
    # Drawn, not a broken image: the SVG Auth answered shows from its data: address.
    wait_for(lambda: qr.evaluate("img => img.complete && img.naturalWidth > 0"))
    secret = factor.locator("#totp-secret").inner_text()
    page.screenshot(path=shots / "dashboard-second-factor.png", full_page=True)
    # A wrong code is refused as Auth words it, and changes nothing.
    totp = pyotp.TOTP(secret)
    factor.get_by_label("The 6-digit code your app shows").fill(
        f"{(int(totp.now()) + 500_000) % 1_000_000:06d}"
    )
    factor.get_by_role("button", name="Turn on the second factor").click()
    expect(factor.get_by_role("alert")).to_have_text("Invalid TOTP code entered")
    factor.get_by_label("The 6-digit code your app shows").fill(totp.now())
    factor.get_by_role("button", name="Turn on the second factor").click()

    expect(factor.locator("#factor-state")).to_have_text("On, and this session passed it.")
    token = token_of(page.context, site)
    assert support(token) == 200

    # A later sign-in with the password alone is aal1 until a code raises it.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{site.url}/")
    page.goto("/signin")
    page.get_by_label("E-mail", exact=True).nth(1).fill(fay.email)
    page.get_by_label("Password", exact=True).fill("correct horse battery")
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url(f"{site.url}/dashboard")
    expect(factor.locator("#factor-state")).to_contain_text("has not passed it yet")
    assert support(token_of(page.context, site)) == 404
    code = totp.now()
    factor.get_by_label("The 6-digit code your app shows").fill(code)
    factor.get_by_role("button", name="Verify this session").click()
    expect(factor.locator("#factor-state")).to_have_text("On, and this session passed it.")
    assert support(token_of(page.context, site)) == 200
    page.screenshot(path=shots / "dashboard-second-factor-on.png", full_page=True)

    page.once("dialog", lambda dialog: dialog.accept())
    factor.get_by_role("button", name="Remove the second factor").click()
    expect(factor.locator("#factor-state")).to_contain_text("Off.")
    assert support(token_of(page.context, site)) == 404
    assert re.fullmatch(r"\d{6}", code)
    assert fay.errors == []
