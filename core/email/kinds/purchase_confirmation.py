"""After a checkout's access is committed: the order, and how to reach what was bought, told
from its kind: a repository to claim, a subscription that renews, or a one-time download."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import EmailStr

from core.app_events import ACCESS_GRANTED
from core.email.brand import Brand
from core.email.kind import Kind, ProductFacts, amount, charged
from core.email.props import Billing, ChargeProps, Day, Link, NamedLink, Repository, Text
from core.email.subjects import fit
from core.events import Event
from core.stripe_objects import Amounts

Delivery = Literal["repository", "subscription", "download"]


class PurchaseConfirmationProps(ChargeProps):
    """After a successful checkout."""

    customer_email: EmailStr
    order_number: Text
    product_name: Text
    amount: Text  # already formatted, see core.email.money.format_amount
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

    @property
    def delivered_as(self) -> Delivery:
        """What the buyer now has, which the mail describes: a `github` product's repository
        (claimed with a GitHub username), a plan that renews, or a one-time purchase's files."""
        if self.product_type == "github":
            return "repository"
        if self.billing in ("month", "year"):
            return "subscription"
        return "download"

    @property
    def renews(self) -> bool:
        return self.billing in ("month", "year")


def subject(p: PurchaseConfirmationProps, _: Brand) -> str:
    return fit("Order confirmed: ", p.product_name)


def _granted(event: Event, product: ProductFacts | None, site: str) -> dict[str, Any]:
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
    return values | _about(product) if product else values


def _about(product: ProductFacts) -> dict[str, Any]:
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
    },
    triggers={ACCESS_GRANTED: _granted},
    about_product=_about,
)
