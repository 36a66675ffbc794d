"""After a checkout's access is committed: the order, and how to reach what was bought, told
from its kind: a repository to claim, a free trial (its end and first charge, never a payment),
a subscription that renews, a credit pack's credits, or a one-time download."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import EmailStr

from access.grant_words import Credits, GrantFacts, GrantWords, counted, feature_name, words
from catalogue.rules import EmailProduct
from core.app_events import ACCESS_GRANTED
from core.brand import Brand
from core.events import Event
from core.stripe_objects import Amounts, Trial
from emails.kind import Kind, amount, charged
from emails.props import Billing, ChargeProps, Day, Link, NamedLink, Repository, Text
from emails.subjects import fit

Delivery = Literal["repository", "trial", "subscription", "pack", "download"]


class PurchaseConfirmationProps(ChargeProps):
    """After a successful checkout."""

    customer_email: EmailStr
    order_number: Text
    product_name: Text
    amount: Text  # already formatted, see core.money.format_amount
    product_type: Literal["link", "github"] = "link"
    billing: Billing | None = None
    purchase_date: Day | None = None
    download_links: tuple[NamedLink, ...] = ()
    repository: Repository | None = None
    invoice_url: Link | None = None
    products_url: Link | None = None
    dashboard_url: Link | None = None
    manage_url: Link | None = None
    # Stripe sold it as merchant of record (Managed Payments): the mail says so, and that the
    # receipt and invoice come from Stripe's Link.
    sold_by_stripe: bool = False
    charged: Text | None = None  # in the buyer's own currency, under Adaptive Pricing
    # A pack's credits, added to the buyer's balance by this purchase: (feature, amount).
    credits_added: tuple[tuple[Text, int], ...] = ()
    # A free trial: nothing was paid. It ends on `trial_end`; the first charge (`first_charge`,
    # when it can be said exactly) comes then with a card on file; without one Stripe does
    # `without_card` (cancel: access ends).
    trial_end: Day | None = None
    first_charge: Text | None = None
    has_card: bool = False
    without_card: Literal["cancel", "pause", "create_invoice"] = "cancel"

    @property
    def delivered_as(self) -> Delivery:
        """What the buyer now has, which the mail describes: a `github` product's repository
        (claimed with a GitHub username), a free trial, a plan that renews, a pack's credits,
        or a one-time purchase."""
        if self.product_type == "github":
            return "repository"
        if self.trial_end is not None:
            return "trial"
        if self.billing in ("month", "year"):
            return "subscription"
        if self.credits_added and not self.download_links:
            return "pack"
        return "download"

    @property
    def told(self) -> GrantWords:
        """The words for what was granted, as every page says them (access/grant_words.py)."""
        renews = self.billing in ("month", "year")
        return words(
            GrantFacts(
                kind="subscription" if renews or self.trial_end else "purchase",
                active=True,
                status="trialing" if self.trial_end else "active" if renews else "paid",
                trial_end=self.trial_end,
                price=self.first_charge,
                interval=self.billing if renews else None,
                credits=[Credits(feature_name(f), n) for f, n in self.credits_added],
                has_card=self.has_card,
                without_card=self.without_card,
            )
        )

    @property
    def credits_words(self) -> str:
        """`500 credits for generations`."""
        return counted([Credits(feature_name(f), n) for f, n in self.credits_added])

    @property
    def renews(self) -> bool:
        return self.billing in ("month", "year")


def subject(p: PurchaseConfirmationProps, _: Brand) -> str:
    if p.delivered_as == "trial" or (p.delivered_as == "repository" and p.trial_end):
        return fit("Your free trial has started: ", p.product_name)
    return fit("Order confirmed: ", p.product_name)


def _granted(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any]:
    """Sent from `app.access.granted`: only once the access is committed."""
    grant = event.object
    values: dict[str, Any] = {
        "customer_email": grant.get("email"),
        "order_number": _order_number(str(grant["checkout_session"])),
        "product_name": product.name if product else "Your purchase",
        "amount": amount(grant.get("amount_total"), grant.get("currency")),
        "purchase_date": grant.get("purchased_at"),
        "invoice_url": grant.get("receipt_url"),
        "sold_by_stripe": grant.get("merchant_of_record") is True,
    }
    values |= charged(Amounts.from_json(grant.get("amounts")))
    trial = Trial.from_json(grant.get("trial"))
    if trial is not None:
        values |= {
            "trial_end": trial.trial_end,
            "first_charge": amount(trial.first_charge, trial.currency)
            if trial.first_charge is not None
            else None,
            "has_card": trial.has_card,
            "without_card": trial.without_card,
        }
    about = _about(product) if product else {}
    if trial is not None and trial.interval:
        about["billing"] = trial.interval
    return values | about


def _about(product: EmailProduct) -> dict[str, Any]:
    """The product as the confirmation tells it: its name, kind and billing, and how to reach
    it (its repository, or its download); the sample's own links give way to it."""
    values: dict[str, Any] = {
        "product_name": product.name,
        "product_type": product.type,
        "billing": product.billing,
        "repository": None,
        "download_links": [],
        "credits_added": list(product.credits_added),
    }
    if product.type == "github" and product.github_repo:
        values["repository"] = product.github_repo
    if product.type == "link" and product.download_url:
        values["download_links"] = [{"label": product.name, "url": product.download_url}]
    return values


def _order_number(session_id: str) -> str:
    return "ORD-" + session_id.rsplit("_", 1)[-1][-10:].upper()


KIND = Kind(
    name="purchase-confirmation",
    props=PurchaseConfirmationProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "order_number": "ORD-2026-004817",
        "product_name": "Starter Kit Pro",
        # Bought with a coupon, the tax included in the price, paid in euros (Adaptive Pricing).
        "amount": "$129.00",
        "subtotal": "$149.00",
        "discount": "-$20.00",
        "tax_label": "Tax (included)",
        "tax": "$21.50",
        "tax_id": "DE123456789 (EU VAT)",
        "charged": "€121.26",
        "sold_by_stripe": False,
        "product_type": "link",
        "billing": "one_time",
        "purchase_date": date(2026, 11, 21),
        "download_links": [
            {
                "label": "Starter Kit Pro v2.4 (zip, 18 MB)",
                "url": f"{site}/downloads/starter-kit",
            },
            {"label": "Design assets (Figma)", "url": f"{site}/downloads/design-assets"},
        ],
        "repository": None,
        "invoice_url": "https://invoice.stripe.com/i/acct_1Acme/test_inv_4817",
        "credits_added": [("generations", 500)],
        # Paid, not a free trial: the trial's variant is the one the tests render.
        "trial_end": None,
        "first_charge": None,
        "has_card": True,
        "without_card": "cancel",
    },
    triggers={ACCESS_GRANTED: _granted},
    about_product=_about,
)
