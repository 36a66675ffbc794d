"""The purchase confirmation describes what was bought from its kind: a plan that renews, a
one-time download to keep, or a private repository claimed with a GitHub username."""

from __future__ import annotations

from datetime import UTC, datetime

import html5lib
import pytest

from catalogue.rules import EmailProduct
from core.app_events import ACCESS_GRANTED
from core.events import Event
from emails.kinds import kind_of
from emails.render import Brand, EmailContent, render

BRAND = Brand(product_name="Acme", site_url="https://acme.example.com", support_email="a@b.co")
SUBSCRIPTION = EmailProduct("Team Monthly", "link", "month", "https://acme.example.com/app", None)
LIFETIME = EmailProduct("Starter Kit", "link", "one_time", "https://example.com/kit.zip", None)
REPOSITORY = EmailProduct("Pro Repository", "github", "one_time", None, "example-org/pro")


def confirmation(product: EmailProduct) -> EmailContent:
    """The mail as the emails subscriber builds it from access's grant of `product`."""
    grant = Event(
        id="evt_app_granted",
        type=ACCESS_GRANTED,
        created=datetime(2026, 11, 26, tzinfo=UTC),
        livemode=False,
        object={
            "email": "ada@example.com",
            "checkout_session": "cs_test_0123456789abcdef",
            "amount_total": 1900,
            "currency": "usd",
            "purchased_at": "2026-11-26",
        },
    )
    build = kind_of("purchase-confirmation").triggers[ACCESS_GRANTED]
    props = build(grant, product, BRAND.site_url)
    assert props is not None
    return render("purchase-confirmation", props, brand=BRAND)


def both(content: EmailContent) -> list[str]:
    """The text part, and what a reader sees of the HTML part (its words and its links)."""
    body = html5lib.parse(content.html).find(".//{http://www.w3.org/1999/xhtml}body")
    assert body is not None
    hrefs = [a.get("href", "") for a in body.iter("{http://www.w3.org/1999/xhtml}a")]
    return [content.text, " ".join([*"".join(body.itertext()).split(), *hrefs])]


def test_a_subscription_says_it_renews_and_where_to_manage_it() -> None:
    content = confirmation(SUBSCRIPTION)
    for part in both(content):
        assert "Team Monthly subscription has started" in part
        assert "renews every month until you cancel" in part
        assert "cancel from your dashboard" in part
        assert "https://acme.example.com/dashboard" in part
        assert "download" not in part.lower()
        assert "one-time" not in part.lower()
        assert "GitHub" not in part


def test_a_yearly_subscription_renews_every_year() -> None:
    content = confirmation(EmailProduct("Team Yearly", "link", "year", None, None))
    for part in both(content):
        assert "renews every year until you cancel" in part
        assert "every month" not in part


def test_a_lifetime_licence_gives_its_download_link_and_nothing_to_renew() -> None:
    content = confirmation(LIFETIME)
    for part in both(content):
        assert "Your downloads" in part
        assert "https://example.com/kit.zip" in part
        assert "yours to keep, with nothing to renew" in part
        assert "renews" not in part
        assert "subscription" not in part.lower()
        assert "GitHub" not in part


def test_a_repository_is_claimed_with_a_github_username() -> None:
    content = confirmation(REPOSITORY)
    for part in both(content):
        assert "Claim your repository access" in part
        assert "example-org/pro" in part
        assert "Add your GitHub username" in part
        assert "https://acme.example.com/dashboard/products" in part
        assert "download" not in part.lower()
        assert "renews" not in part


@pytest.mark.parametrize("billing", ["month", "year"])
def test_a_repository_sold_as_a_subscription_says_both(billing: str) -> None:
    content = confirmation(EmailProduct("Pro Club", "github", billing, None, "example-org/pro"))
    for part in both(content):
        assert "Add your GitHub username" in part
        assert f"Your access renews every {billing} until you cancel" in part


def test_a_pack_says_what_it_added_to_the_balance_and_promises_no_files() -> None:
    pack = EmailProduct(
        "Generation Pack", "link", "one_time", None, None, credits_added=(("generations", 500),)
    )
    content = confirmation(pack)
    for part in both(content):
        assert "500 credits for generations were added to your balance" in part
        assert "Your credits" in part
        assert "https://acme.example.com/dashboard" in part
        assert "file" not in part.lower()
        assert "download" not in part.lower()
    one = EmailProduct("Single", "link", "one_time", None, None, credits_added=(("exports", 1),))
    for part in both(confirmation(one)):
        assert "1 credit for exports was added to your balance" in part
    for part in both(confirmation(LIFETIME)):
        assert "Added to your balance" not in part
        assert "credit" not in part


def test_a_one_time_purchase_without_a_download_promises_no_files() -> None:
    plain = EmailProduct("Consulting Hour", "link", "one_time", None, None)
    for part in both(confirmation(plain)):
        assert "yours to keep, with nothing to renew" in part
        assert "file" not in part.lower()
        assert "download" not in part.lower()


def trial_confirmation(trial: dict[str, object]) -> EmailContent:
    """The mail for a free trial's checkout: nothing paid, the trial as access announced it."""
    grant = Event(
        id="evt_app_granted",
        type=ACCESS_GRANTED,
        created=datetime(2026, 11, 26, tzinfo=UTC),
        livemode=False,
        object={
            "email": "ada@example.com",
            "checkout_session": "cs_test_0123456789abcdef",
            "amount_total": 0,
            "currency": "usd",
            "purchased_at": "2026-11-26",
            "trial": trial,
        },
    )
    props = kind_of("purchase-confirmation").triggers[ACCESS_GRANTED](
        grant, SUBSCRIPTION, BRAND.site_url
    )
    assert props is not None
    return render("purchase-confirmation", props, brand=BRAND)


TRIAL_END = int(datetime(2026, 12, 10, tzinfo=UTC).timestamp())


def test_a_trial_with_a_card_tells_its_end_and_first_charge_never_a_payment() -> None:
    content = trial_confirmation(
        {
            "trial_end": TRIAL_END,
            "first_charge": 2900,
            "currency": "usd",
            "interval": "month",
            "has_card": True,
            "without_card": "cancel",
        }
    )
    assert content.subject == "Your free trial has started: Team Monthly"
    for part in both(content):
        assert "Your free trial of Team Monthly has started: nothing was charged today" in part
        assert "Free trial until" in part
        assert "The first charge, $29.00, is on Dec 10, 2026, then one every month" in part
        assert "$29.00 on December 10, 2026" in part
        assert "Due today" in part
        assert "payment went through" not in part
        assert "Total paid" not in part
        assert "renews every month" not in part


def test_a_trial_without_a_card_says_it_ends_unless_one_is_added() -> None:
    content = trial_confirmation(
        {
            "trial_end": TRIAL_END,
            "first_charge": 2900,
            "currency": "usd",
            "interval": "month",
            "has_card": False,
            "without_card": "cancel",
        }
    )
    for part in both(content):
        assert "No card on file: it ends then unless you add one" in part
        assert "the first charge, $29.00, is on Dec 10, 2026" in part
        assert "$29.00 on December 10, 2026, with a card" in part
        assert "Add a card to go on after December 10, 2026" in part
        assert "payment went through" not in part
