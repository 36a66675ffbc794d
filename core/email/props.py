"""Typed props of each transactional e-mail kind: what a template may be given."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    EmailStr,
    SecretStr,
    StringConstraints,
)

from core.addresses import web_url

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
Billing = Literal["one_time", "month", "year"]
_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


def _to_date(value: Any) -> Any:
    # Stripe sends Unix timestamps; a datetime keeps its own (aware) calendar day.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC).date()
    if isinstance(value, datetime):
        return value.date()
    return value


def _repository(value: str) -> str:
    if not _REPOSITORY.fullmatch(value) or value.endswith((".git", "/.", "/..")):
        raise ValueError("must be a GitHub repository as owner/name")
    return value


Link = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=2000), AfterValidator(web_url)
]
Day = Annotated[date, BeforeValidator(_to_date)]
Repository = Annotated[str, StringConstraints(strip_whitespace=True), AfterValidator(_repository)]


def _greeting_name(value: Any) -> Any:
    # Stripe and profiles often have no name; a missing or odd name must not stop the e-mail.
    if value is None or (isinstance(value, str) and not value.strip()):
        return "there"
    return value.strip()[:100] if isinstance(value, str) else value


class EmailProps(BaseModel):
    """Common base: unknown props are refused so a typo fails instead of vanishing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    customer_name: Annotated[Name, BeforeValidator(_greeting_name)] = "there"


class NamedLink(BaseModel):
    """A labelled link, e.g. a download or a documentation page."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: Text
    url: Link


class PurchaseConfirmationProps(EmailProps):
    """After a successful checkout."""

    customer_email: EmailStr
    order_number: Text
    product_name: Text
    amount: Text  # already formatted, see core.email.render.format_amount
    product_type: Literal["link", "github"] = "link"
    billing: Billing | None = None
    purchase_date: Day | None = None
    download_links: tuple[NamedLink, ...] = ()
    repository: Repository | None = None
    invoice_url: Link | None = None
    products_url: Link | None = None
    dashboard_url: Link | None = None


class PaymentFailedProps(EmailProps):
    """A renewal or invoice payment was declined."""

    amount: Text
    product_name: Text | None = None
    failure_reason: Text | None = None
    next_attempt_date: Day | None = None
    update_payment_url: Link | None = None
    invoice_url: Link | None = None


class InvoicePaidProps(EmailProps):
    """A recurring payment succeeded."""

    amount: Text
    invoice_number: Text
    product_name: Text | None = None
    paid_date: Day | None = None
    period_start: Day | None = None
    period_end: Day | None = None
    next_billing_date: Day | None = None
    receipt_url: Link | None = None
    dashboard_url: Link | None = None


class NewSignupProps(EmailProps):
    """Welcome after registration."""

    customer_email: EmailStr | None = None
    temporary_password: SecretStr | None = None
    dashboard_url: Link | None = None
    signin_url: Link | None = None
    docs_url: Link | None = None


class GithubAccessGrantedProps(EmailProps):
    """A repository invitation was sent to the buyer's GitHub account."""

    repository: Repository
    product_name: Text | None = None
    github_username: Name | None = None
    docs_links: tuple[NamedLink, ...] = ()

    @property
    def repository_url(self) -> str:
        """The repository's page on GitHub."""
        return f"https://github.com/{self.repository}"

    @property
    def clone_url(self) -> str:
        """The HTTPS URL for `git clone`."""
        return f"{self.repository_url}.git"

    @property
    def invitation_url(self) -> str:
        """Where GitHub lets the invitee accept a pending collaborator invitation."""
        return f"{self.repository_url}/invitations"


class CheckoutExpiredProps(EmailProps):
    """An abandoned checkout session expired."""

    product_name: Text
    checkout_url: Link
    # True: the link is Stripe's recovery link, which reopens the same cart (until
    # `link_expires`); False: it is the pricing page, where a new checkout starts.
    recovers_cart: bool = False
    link_expires: Day | None = None
    product_description: Text | None = None
    amount: Text | None = None
    billing: Billing | None = None


class SubscriptionCancelledProps(EmailProps):
    """A subscription was set to end (access kept until `access_end_date`), or has ended."""

    product_name: Text | None = None
    access_end_date: Day | None = None
    access_ended: bool = False
    # Ended by Stripe after the last failed payment, not by the customer.
    unpaid: bool = False
    # Ended by Stripe because a free trial ran out with no payment method on file.
    trial_ended: bool = False
    # The customer keeps access through another purchase or subscription.
    access_remains: bool = False
    reactivate_url: Link | None = None
    feedback_url: Link | None = None


class TrialEndingProps(EmailProps):
    """A free trial ends in three days (Stripe's `customer.subscription.trial_will_end`)."""

    trial_end_date: Day
    product_name: Text | None = None
    # What the first period will cost, when it can be said exactly (no discount).
    amount: Text | None = None
    billing: Billing | None = None
    discounted: bool = False
    plus_tax: bool = False  # Stripe Tax adds tax on top of the amount
    has_payment_method: bool = False
    # What Stripe does at the trial's end with no payment method (the subscription's
    # `trial_settings.end_behavior.missing_payment_method`).
    without_card: Literal["cancel", "pause", "create_invoice"] = "cancel"
    manage_url: Link | None = None


class SigninLinkProps(EmailProps):
    """A guest buyer's account is ready: a one-time link signs them in."""

    customer_email: EmailStr
    signin_url: Link
    # When the link stops working (None: it does not expire, as the local sign-in page).
    link_expires_at: AwareDatetime | None = None
    product_name: Text | None = None
    dashboard_url: Link | None = None


# Link props left empty point at these pages of the site.
DEFAULT_PATHS: dict[str, str] = {
    "dashboard_url": "/dashboard",
    "products_url": "/dashboard/products",
    "update_payment_url": "/dashboard",
    "reactivate_url": "/dashboard",
    "manage_url": "/dashboard",
    "signin_url": "/signin",
}
