"""The frontend driven in the machine's Chromium against `python -m dev.server`, as people use
it: a buyer's whole path, and a team's. Every link comes from the outbox, every payment is made
on the Stripe stand-in's checkout page. Each page's screenshot goes to $WEB_SCREENSHOTS
(`make web-screenshots` sets docs/web), else to the test's temporary directory."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, BrowserContext, Page, expect

from dev import stripe_stand_in
from tests.helpers import HANG_GUARD, wait_for
from tests.web.conftest import Site

# The pages' first paint waits on the API, which waits on a loaded two-core machine.
expect.set_options(timeout=HANG_GUARD * 1000)
VERIFY_LINK = r"http://localhost:\d+/auth/v1/verify\?\S+"
ACCEPT_LINK = r"http://localhost:\d+/invitations/accept\?token=\S+"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    chosen = os.environ.get("WEB_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path / "shots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def contexts(browser: Browser, site: Site) -> Iterator[list[BrowserContext]]:
    """Browser contexts (a person each: their own cookies and storage), closed after."""
    opened: list[BrowserContext] = []
    yield opened
    for context in opened:
        context.close()


class Person:
    """One person in a browser context of their own; uncaught page errors are collected."""

    def __init__(self, browser: Browser, site: Site, contexts: list[BrowserContext], email: str):
        context = browser.new_context(base_url=site.url, viewport={"width": 1100, "height": 800})
        contexts.append(context)
        self.site, self.email = site, email
        self.page: Page = context.new_page()
        self.page.set_default_timeout(HANG_GUARD * 1000)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def sign_in_by_email_link(self) -> None:
        """From /signin: the link mailed to the outbox, followed; lands on the dashboard."""
        page = self.page
        page.get_by_label("E-mail", exact=True).first.fill(self.email)
        page.get_by_role("button", name="Send the link").click()
        expect(page.get_by_role("status")).to_contain_text(f"sent a sign-in link to {self.email}")
        page.goto(self.site.link(self.email, VERIFY_LINK))
        page.wait_for_url(f"{self.site.url}/dashboard")

    def sign_up_with_a_password(self) -> None:
        """From /signin: a new account by password; lands on the dashboard."""
        page = self.page
        page.get_by_label("E-mail", exact=True).nth(1).fill(self.email)
        page.get_by_label("Password", exact=True).fill("correct horse battery")
        page.get_by_role("button", name="Create an account").click()
        page.wait_for_url(f"{self.site.url}/dashboard")

    def session(self) -> dict[str, Any] | None:
        """The session this browser keeps (the auth cookie), as the pages read it."""
        found: dict[str, Any] | None = self.page.evaluate(
            "async () => (await import('/js/auth.js')).session()"
        )
        return found

    def pay_on_the_stand_ins_page(self) -> tuple[str, str]:
        """On Stripe's (stand-in) checkout page: pay, then follow its link back to the site.
        Where the stand-in serves, and the session paid."""
        page = self.page
        page.wait_for_url(re.compile(r".*/pay/cs_\w+"))
        stand_in, _, session = page.url.partition("/pay/")
        page.get_by_role("button", name=re.compile("^Pay")).click()
        page.get_by_role("link", name="Back to the site").click()
        page.wait_for_url(re.compile(re.escape(self.site.url) + r"/success\?session_id=cs_\w+"))
        return stand_in, session


def unique(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}@example.com"


def test_a_buyer_picks_a_plan_signs_in_through_the_outbox_pays_and_claims_the_repository(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path
) -> None:
    ada = Person(browser, site, contexts, unique("ada"))
    page = ada.page
    page.goto("/")
    plans = page.locator("article.plan h3")
    expect(plans.first).to_have_text("Pro Repository")  # featured first
    expect(page.get_by_text("$19.00 per seat / month")).to_be_visible()
    expect(page.get_by_role("spinbutton", name="Seats")).to_have_value("3")
    page.screenshot(path=shots / "landing.png", full_page=True)

    page.get_by_role("button", name="Buy Pro Repository").click()
    page.wait_for_url(f"{site.url}/signin")
    expect(page.get_by_role("heading", name="You picked Pro Repository")).to_be_visible()
    page.screenshot(path=shots / "signin.png", full_page=True)
    ada.sign_in_by_email_link()
    expect(page.locator("#access-state")).to_have_text(re.compile("no access yet"))

    page.get_by_role("button", name="Continue to checkout: Pro Repository").click()
    ada.pay_on_the_stand_ins_page()
    # Access at once, from the success page's call, and a token refreshed to carry it.
    expect(page.locator("#access-state")).to_have_text("Paid: you have access now.")
    # Named as a buyer reads it, never by its key.
    expect(page.locator("#token-state")).to_contain_text(
        "the example-org/saas-starter-pro repository"
    )
    expect(page.locator("#token-state")).not_to_contain_text("github:")
    page.screenshot(path=shots / "success.png", full_page=True)

    page.get_by_role("link", name="Go to your dashboard").click()
    expect(page.locator("#access-state")).to_have_text("You have access.")
    page.get_by_label("Your GitHub username").fill("ada-l")
    page.get_by_role("button", name="Invite me to the repository").click()
    expect(page.get_by_role("status")).to_contain_text("Invited to example-org/saas-starter-pro")
    assert ("example-org/saas-starter-pro", "ada-l") in site.github.collaborators
    page.screenshot(path=shots / "dashboard.png", full_page=True)

    page.get_by_role("link", name="Your purchases and downloads").click()
    expect(page.get_by_role("row", name=re.compile("Pro Repository"))).to_contain_text("Active")
    page.screenshot(path=shots / "products.png", full_page=True)

    page.goto("/dashboard")
    page.get_by_role("button", name="Manage billing").click()
    page.wait_for_url(re.compile(r".*/portal/bps_\w+$"))
    # A purchase paid once has no subscription to manage; the portal leads back to the site.
    expect(page.locator("#subscriptions")).to_contain_text("No subscriptions")
    page.get_by_role("link", name="Return to the site").click()
    page.wait_for_url(f"{site.url}/dashboard")
    assert ada.errors == []


def test_a_guest_pays_and_the_success_page_says_what_they_bought_and_how_to_sign_in(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path
) -> None:
    guest = Person(browser, site, contexts, unique("guest"))
    page = guest.page
    page.goto("/")
    page.get_by_role("button", name="Buy Starter Kit").click()
    page.get_by_role("button", name="Buy as a guest").click()
    page.wait_for_url(re.compile(r".*/pay/cs_\w+"))
    page.get_by_label("Buyer's e-mail").fill(guest.email)
    guest.pay_on_the_stand_ins_page()
    expect(page.locator("#access-state")).to_have_text("Paid: Starter Kit is yours.")
    expect(page.get_by_text("We sent a sign-in link")).to_be_visible()
    # Nothing of the account the typed e-mail chose: no session was made here.
    expect(page.get_by_role("link", name="Sign in", exact=True).first).to_be_visible()
    page.screenshot(path=shots / "success-guest.png", full_page=True)
    # The sign-in link mailed to the address typed on Stripe's page: an implicit-flow link,
    # whose session arrives in the address's fragment, kept by the dashboard.
    page.goto(site.link(guest.email, VERIFY_LINK))
    page.wait_for_url(f"{site.url}/dashboard")
    # Kept only once the guest chose the account the link names (a link proves no one).
    expect(page.get_by_text(f"This link signs you in as {guest.email}")).to_be_visible()
    assert guest.session() is None
    page.get_by_role("button", name=f"Continue as {guest.email}").click()
    expect(page.locator("#access-state")).to_have_text("You have access.")
    expect(page.get_by_text(f"Signed in as {guest.email}").first).to_be_visible()
    assert "access_token" not in page.url
    page.get_by_role("link", name="Your purchases and downloads").click()
    download = page.get_by_role("row", name=re.compile("Starter Kit")).get_by_role("link")
    expect(download).to_have_attribute("href", "https://example.com/downloads/starter-kit.zip")

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{site.url}/")
    page.goto("/dashboard")
    expect(page.get_by_text("Sign in to see your dashboard.")).to_be_visible()
    assert guest.errors == []


def test_a_team_buys_three_seats_invites_two_and_the_newest_loses_access_at_two_seats_next_period(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path
) -> None:
    olga = Person(browser, site, contexts, unique("olga"))
    page = olga.page
    page.goto("/#pricing")
    page.get_by_role("button", name="Buy seats for a team").click()
    page.wait_for_url(f"{site.url}/signin")
    page.get_by_label("E-mail", exact=True).nth(1).fill(olga.email)
    page.get_by_label("Password", exact=True).fill("correct horse battery")
    page.get_by_role("button", name="Create an account").click()
    page.wait_for_url(f"{site.url}/dashboard")
    page.get_by_role("link", name="Choose the team").click()
    page.get_by_label("Team name").fill("Olga's team")
    page.get_by_role("button", name="Create the team").click()
    expect(page.locator("#team-name")).to_have_text("Olga's team")
    expect(page.get_by_label("Plan")).to_have_value("price_demo_team_monthly")
    page.get_by_role("spinbutton", name="Seats").fill("3")
    page.get_by_role("button", name="Buy seats").click()
    stand_in, session = olga.pay_on_the_stand_ins_page()
    expect(page.locator("#access-state")).to_have_text("Paid: you have access now.")
    page.goto("/dashboard")
    page.get_by_role("link", name="Olga's team").click()
    expect(page.locator("#seat-count")).to_have_text("3 seats, 1 held by members; 2 free.")

    invitees = [unique("bea"), unique("cy")]
    for address in invitees:
        page.get_by_label("E-mail", exact=True).fill(address)
        page.get_by_role("button", name="Send the invitation").click()
        expect(page.locator("#invitations")).to_contain_text(address)
    page.screenshot(path=shots / "team.png", full_page=True)

    members = []
    for n, address in enumerate(invitees):
        member = Person(browser, site, contexts, address)
        members.append(member)
        member.page.goto(site.link(address, ACCEPT_LINK))
        # The link names the team and who sent it, before and after signing in.
        invited = f"{olga.email} invited you to join the team “Olga's team” as a member."
        expect(member.page.locator("#invited")).to_have_text(invited)
        member.page.get_by_role("link", name="Sign in to accept").click()
        member.sign_in_by_email_link()
        member.page.get_by_role("link", name="Open the invitation").click()
        expect(member.page.locator("#invited")).to_have_text(invited)
        if n == 0:
            member.page.screenshot(path=shots / "accept.png", full_page=True)
        member.page.get_by_role("button", name="Accept the invitation").click()
        expect(member.page.get_by_role("status")).to_have_text(
            "You joined Olga's team as a member."
        )
        member.page.goto("/dashboard")
        expect(member.page.locator("#access-state")).to_have_text("You have access.")

    page.reload()
    expect(page.locator("#seat-count")).to_have_text("3 seats, 3 held by members; none free.")
    # No free seat: said before anything is sent.
    expect(page.locator("#seat-note")).to_contain_text("All 3 seats are taken")
    expect(page.get_by_role("button", name="Send the invitation")).to_be_disabled()
    expect(page.locator("#members tbody tr")).to_have_count(3)
    page.get_by_role("spinbutton", name="Seats").fill("2")
    page.get_by_role("button", name="Change seats").click()
    # Fewer seats wait for the period's end: until then all three keep theirs.
    expect(page.get_by_role("button", name="Change seats")).to_be_enabled()
    expect(page.locator("#seat-count")).to_have_text("3 seats, 3 held by members; none free.")
    # The period ends at Stripe (the stand-in's clock moves on): the schedule's next phase.
    paid = requests.get(
        f"{stand_in}/v1/checkout/sessions/{session}",
        headers={"Authorization": f"Bearer {stripe_stand_in.API_KEY}"},
        timeout=HANG_GUARD,
    ).json()
    ended = requests.post(f"{stand_in}/period_end/{paid['subscription']}", timeout=HANG_GUARD)
    assert ended.status_code == 200, ended.text

    def seat_count(person: Person, wanted: str) -> bool:
        """The team page read again until Stripe's event about the change is applied."""
        person.page.reload()
        count = person.page.locator("#seat-count")
        count.wait_for()
        return count.inner_text() == wanted

    # Two seats for three members: the newest keeps no seat.
    wait_for(lambda: seat_count(olga, "2 seats, 2 held by members; none free."))
    newest_row = page.get_by_role("row", name=re.compile(re.escape(invitees[-1])))
    expect(newest_row).to_contain_text("No seat")
    page.screenshot(path=shots / "team-seats.png", full_page=True)

    newest = members[-1].page

    def shows_no_access() -> bool:
        newest.goto("/dashboard")
        state = newest.locator("#access-state")
        state.wait_for()
        return "no access" in state.inner_text()

    wait_for(shows_no_access)
    expect(newest.get_by_role("listitem").filter(has_text="Olga's team")).to_contain_text("no seat")
    first = members[0].page
    first.goto("/dashboard")
    expect(first.locator("#access-state")).to_have_text("You have access.")
    for person in (olga, *members):
        assert person.errors == []


def test_a_team_named_with_markup_shows_the_markup_as_text(
    browser: Browser, site: Site, contexts: list[BrowserContext]
) -> None:
    eve = Person(browser, site, contexts, unique("eve"))
    page = eve.page
    page.goto("/signin")
    eve.sign_up_with_a_password()
    page.goto("/team")
    name = "<b id=injected>Bold</b>"
    page.get_by_label("Team name").fill(name)
    page.get_by_role("button", name="Create the team").click()
    expect(page.locator("#team-name")).to_have_text(name)
    assert page.locator("#injected").count() == 0
    page.goto("/dashboard")
    expect(page.get_by_role("link", name=name)).to_be_visible()
    assert page.locator("#injected").count() == 0
    assert eve.errors == []


def test_an_owner_changes_a_role_revokes_an_invitation_and_removes_a_member(
    browser: Browser, site: Site, contexts: list[BrowserContext]
) -> None:
    ian = Person(browser, site, contexts, unique("ian"))
    page = ian.page
    page.goto("/signin")
    ian.sign_up_with_a_password()
    page.goto("/team")
    page.get_by_label("Team name").fill("Ian's team")
    page.get_by_role("button", name="Create the team").click()
    expect(page.locator("#team-name")).to_have_text("Ian's team")
    # A team with no plan yet says what an invitation gives before it is sent.
    expect(page.locator("#seat-note")).to_have_text(
        "The team has no plan yet: whoever you invite joins it, and gets its access once the"
        " team buys one."
    )
    dan, kim = unique("dan"), unique("kim")
    for address in (dan, kim):
        page.get_by_label("E-mail", exact=True).fill(address)
        page.get_by_role("button", name="Send the invitation").click()
        expect(page.locator("#invitations")).to_contain_text(address)

    member = Person(browser, site, contexts, dan)
    member.page.goto(site.link(dan, ACCEPT_LINK))
    member.page.get_by_role("link", name="Sign in to accept").click()
    member.sign_up_with_a_password()
    member.page.get_by_role("link", name="Open the invitation").click()
    member.page.get_by_role("button", name="Accept the invitation").click()
    expect(member.page.get_by_role("status")).to_have_text("You joined Ian's team as a member.")

    page.reload()
    page.get_by_role("form", name=f"Revoke {kim}").get_by_role("button").click()
    expect(page.locator("#page")).to_contain_text("No invitations waiting.")
    # The API's refusal, as it words it.
    page.get_by_label("E-mail", exact=True).fill(dan)
    page.get_by_role("button", name="Send the invitation").click()
    expect(page.get_by_role("alert")).to_have_text(f"{dan} is already a member of this team")

    row = page.get_by_role("row", name=re.compile(re.escape(dan)))
    row.get_by_role("combobox", name=f"Role of {dan}").select_option("admin")
    row.get_by_role("button", name="Change role").click()
    # The role cell, not the row: the row's role picker lists "Admin" before the change lands.
    expect(
        page.get_by_role("row", name=re.compile(re.escape(dan))).locator("td").first
    ).to_have_text("Admin")
    # Removing asks first: Cancel keeps the member, only the second button removes.
    row = page.get_by_role("row", name=re.compile(re.escape(dan)))
    row.get_by_role("button", name="Remove").click()
    expect(row).to_contain_text(f"Remove {dan} from Ian's team? They lose its access at once.")
    row.get_by_role("button", name="Cancel").click()
    expect(page.locator("#members tbody tr")).to_have_count(2)
    row.get_by_role("button", name="Remove").click()
    row.get_by_role("button", name="Yes, remove").click()
    expect(page.locator("#members tbody tr")).to_have_count(1)

    # The removed member is now a stranger to the team: told it does not exist.
    member.page.goto(page.url)
    expect(member.page.get_by_role("alert")).to_have_text("Team not found")
    assert ian.errors == []
    assert member.errors == []


def test_a_link_carrying_someone_elses_session_signs_nobody_in(
    browser: Browser, site: Site, contexts: list[BrowserContext]
) -> None:
    """Login CSRF: Mallory hands Ada a link carrying Mallory's own session in its fragment, on
    any page. Nobody is signed in by opening it: the dashboard names the account and keeps
    nothing unless asked to; Ada, signed in, stays herself. Password and e-mail link sign-ins
    still land signed in."""
    mallory = Person(browser, site, contexts, unique("mallory"))
    mallory.page.goto("/signin")
    mallory.sign_up_with_a_password()
    stolen = mallory.session()
    assert stolen is not None
    fragment = (
        f"#access_token={stolen['access_token']}&refresh_token={stolen['refresh_token']}"
        "&token_type=bearer&expires_in=3600&type=magiclink"
    )

    ada = Person(browser, site, contexts, unique("ada"))
    page = ada.page
    for path in ("/", "/dashboard", "/team"):
        page.goto("about:blank")  # a link followed from elsewhere: the page loads anew
        page.goto(path + fragment)
        page.wait_for_url(f"{site.url}/dashboard")
        expect(page.get_by_text(f"This link signs you in as {mallory.email}")).to_be_visible()
        assert "access_token" not in page.url
        assert ada.session() is None, path
        page.get_by_role("button", name="Not me").click()
        expect(page.get_by_text("Sign in to see your dashboard.")).to_be_visible()
        assert ada.session() is None, path

    page.goto("/signin")
    ada.sign_in_by_email_link()
    expect(page.get_by_text(f"Signed in as {ada.email}").first).to_be_visible()
    page.goto("about:blank")
    page.goto("/" + fragment)
    page.wait_for_url(f"{site.url}/dashboard")
    expect(page.get_by_text(f"This link signs you in as {mallory.email}")).to_be_visible()
    page.get_by_role("button", name="Not me").click()
    expect(page.get_by_text(f"Signed in as {ada.email}").first).to_be_visible()
    kept = ada.session()
    assert kept is not None
    assert kept["access_token"] != stolen["access_token"]
    assert ada.errors == []
    assert mallory.errors == []


def test_an_owner_previews_and_changes_seats_schedules_fewer_undoes_it_and_cancels(
    browser: Browser, site: Site, contexts: list[BrowserContext], shots: Path
) -> None:
    """Each change previewed before anything is charged, confirmed, and shown on the dashboard
    with the API's own dates: more seats now, fewer at the
    period's end (undone), a cancellation with a reason after the retention offer is refused."""
    una = Person(browser, site, contexts, unique("una"))
    page = una.page
    page.goto("/signin")
    una.sign_up_with_a_password()
    page.goto("/team")
    page.get_by_label("Team name").fill("Una's team")
    page.get_by_role("button", name="Create the team").click()
    expect(page.locator("#team-name")).to_have_text("Una's team")
    page.get_by_role("spinbutton", name="Seats").fill("2")
    page.get_by_role("button", name="Buy seats").click()
    una.pay_on_the_stand_ins_page()
    expect(page.locator("#access-state")).to_have_text("Paid: you have access now.")

    page.goto("/dashboard")
    page.get_by_role("button", name="Change plan: Team Monthly").click()
    change = page.get_by_role("form", name="Change plan")
    expect(change.get_by_role("spinbutton", name="Seats")).to_have_value("2")
    change.get_by_role("spinbutton", name="Seats").fill("4")
    change.get_by_role("button", name="Preview the change").click()
    preview = page.get_by_role("region", name="Preview of the change")
    # Two more seats for the period's remaining time: less than two full months of $19.00.
    due = preview.locator(".amount-due")
    expect(due).to_have_text(re.compile(r"^Charged now: \$\d+\.\d\d$"))
    charged = float(due.inner_text().split("$")[1])
    assert 0 < charged <= 38
    expect(preview.locator(".lines li").first).to_be_visible()
    expect(preview.locator(".next-charge")).to_have_text(re.compile(r"Next charge: \$76\.00 on "))
    page.screenshot(path=shots / "plan-preview.png", full_page=True)

    preview.get_by_role("button", name="Confirm and pay").click()
    expect(page.get_by_role("region", name="Preview of the change")).to_have_count(0)

    def seat_count(wanted: str) -> bool:
        """The team page read again until Stripe's event about the change is applied."""
        page.goto("/team")
        page.get_by_role("link", name="Una's team").click()
        count = page.locator("#seat-count")
        count.wait_for()
        return count.inner_text().startswith(wanted)

    wait_for(lambda: seat_count("4 seats"))

    # Fewer seats: nothing now, from the period's end, shown as scheduled until then.
    page.goto("/dashboard")
    page.get_by_role("button", name="Change plan: Team Monthly").click()
    change = page.get_by_role("form", name="Change plan")
    expect(change.get_by_role("spinbutton", name="Seats")).to_have_value("4")
    change.get_by_role("spinbutton", name="Seats").fill("3")
    change.get_by_role("button", name="Preview the change").click()
    preview = page.get_by_role("region", name="Preview of the change")
    effective = preview.locator(".effective")
    expect(effective).to_have_text(re.compile(r"takes effect from \w+ \d+, \d{4}"))
    when = re.search(r"from (\w+ \d+, \d{4})", effective.inner_text())
    assert when is not None
    preview.get_by_role("button", name="Confirm the change").click()
    scheduled = page.locator(".scheduled")
    expect(scheduled).to_contain_text(f"Changes to Team Monthly, 3 seats on {when.group(1)}.")
    page.screenshot(path=shots / "plan-scheduled.png", full_page=True)
    scheduled.get_by_role("button", name="Undo").click()
    expect(page.locator(".scheduled")).to_have_count(0)
    page.reload()
    expect(page.get_by_role("button", name="Change plan: Team Monthly")).to_be_visible()
    expect(page.locator(".scheduled")).to_have_count(0)

    # Cancelling asks why; the end date is the API's.
    page.get_by_role("button", name="Cancel: Team Monthly").click()
    cancel = page.get_by_role("form", name="Cancel the plan")
    cancel.get_by_label("Why are you cancelling?").select_option(label="It's too expensive")
    cancel.get_by_label("Anything to add (optional)").fill("Fewer people now")
    cancel.get_by_role("button", name="Cancel at the end of the period").click()
    # The retention coupon is offered first, nothing changed yet; refused, the plan cancels.
    offered = page.get_by_role("region", name="An offer to stay")
    expect(offered.locator(".offer")).to_have_text("Before you go: 20% off for 3 months.")
    expect(offered.get_by_role("button", name="Keep my plan with the offer")).to_be_visible()
    page.screenshot(path=shots / "plan-offer.png", full_page=True)
    offered.get_by_role("button", name="Cancel anyway").click()
    told = page.locator("#plan-told")
    expect(told).to_have_text(re.compile(r"^Cancelled: Team Monthly ends on \w+ \d+, \d{4}\.$"))
    ends = told.inner_text().removeprefix("Cancelled: Team Monthly ends on ")

    def dashboard_shows(wanted: int) -> bool:
        """The dashboard read again until Stripe's event about the change is applied."""
        page.reload()
        page.get_by_role("button", name="Change plan: Team Monthly").wait_for()
        return page.locator(".scheduled").count() == wanted

    wait_for(lambda: dashboard_shows(1))
    expect(page.locator(".scheduled")).to_contain_text(f"Cancelled: ends on {ends}")
    page.screenshot(path=shots / "plan-cancelled.png", full_page=True)
    page.locator(".scheduled").get_by_role("button", name="Resume").click()
    wait_for(lambda: dashboard_shows(0))
    expect(page.get_by_role("button", name="Cancel: Team Monthly")).to_be_visible()
    assert una.errors == []
