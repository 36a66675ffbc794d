"""A person deleted their account: what went, and what the books keep."""

from __future__ import annotations

from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import ACCOUNT_DELETED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps
from emails.subjects import fit


class AccountDeletedProps(EmailProps):
    """Nothing but the greeting: the mail says the same to everyone who leaves."""


def subject(_: AccountDeletedProps, brand: Brand) -> str:
    return fit("Your ", brand.product_name, " account is deleted")


def _deleted(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any]:
    return {}


KIND = Kind(
    name="account-deleted",
    props=AccountDeletedProps,
    subject=subject,
    sample=lambda site: {"customer_name": "Ada Lovelace"},
    triggers={ACCOUNT_DELETED: _deleted},
)
