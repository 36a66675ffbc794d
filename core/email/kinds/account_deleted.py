"""A person deleted their account: what went, and what the books keep."""

from __future__ import annotations

from typing import Any

from core.app_events import ACCOUNT_DELETED
from core.email.brand import Brand
from core.email.kind import Kind, ProductFacts
from core.email.props import EmailProps
from core.email.subjects import fit
from core.events import Event


class AccountDeletedProps(EmailProps):
    """Nothing but the greeting: the mail says the same to everyone who leaves."""


def subject(_: AccountDeletedProps, brand: Brand) -> str:
    return fit("Your ", brand.product_name, " account is deleted")


def _deleted(event: Event, _: ProductFacts | None, site: str) -> dict[str, Any]:
    return {}


KIND = Kind(
    name="account-deleted",
    props=AccountDeletedProps,
    subject=subject,
    sample=lambda site: {"customer_name": "Ada Lovelace"},
    triggers={ACCOUNT_DELETED: _deleted},
)
