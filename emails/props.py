"""What every kind's props are made of (each kind's model is in its module, `emails/kinds/`):
the base model, the value types, and where empty links point."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
)

from core.addresses import carries_address, has_hidden_characters, web_url

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


class ChargeProps(EmailProps):
    """A mail that tells what was paid: beside its total, the breakdown Stripe gave (each
    already formatted, see `emails.kind.charged`)."""

    subtotal: Text | None = None
    discount: Text | None = None
    tax: Text | None = None
    tax_label: Text = "Tax"
    tax_id: Text | None = None  # the buyer's, as they typed it at Checkout


class NamedLink(BaseModel):
    """A labelled link, e.g. a download or a documentation page."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: Text
    url: Link


def _plain_name(value: Any) -> Any:
    # A person's name is whatever they typed at sign-up: shown beside their address only when it
    # is plain text, so it cannot pass for a link or for another address than theirs.
    if not isinstance(value, str):
        return value
    name = value.strip()
    if not name or len(name) > 100 or has_hidden_characters(name) or carries_address(name):
        return None
    return name


class Author(BaseModel):
    """Who wrote text a mail quotes (a team's name), as the mail names them: the address they
    signed in with, and their name when it is plain text. Shown as `Eve (eve@example.com)`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    email: Annotated[
        str, StringConstraints(strip_whitespace=True, max_length=254, pattern=r"^[^\s@]+@[^\s@]+$")
    ]
    name: Annotated[Name | None, BeforeValidator(_plain_name)] = None

    def __str__(self) -> str:
        return f"{self.name} ({self.email})" if self.name else self.email


class NamedTeam(BaseModel):
    """A team as a mail names it: its name, quoted, beside who wrote it (its creator)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Text
    named_by: Author


# Link props left empty point at these pages of the site.
DEFAULT_PATHS: dict[str, str] = {
    "dashboard_url": "/dashboard",
    "products_url": "/dashboard/products",
    "update_payment_url": "/dashboard",
    "reactivate_url": "/dashboard",
    "manage_url": "/dashboard",
    "signin_url": "/signin",
}
