"""Welcome after registration."""

from __future__ import annotations

from typing import Any

from pydantic import EmailStr, SecretStr

from catalogue.rules import EmailProduct
from core.app_events import ACCOUNT_CREATED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps, Link
from emails.subjects import fit


class NewSignupProps(EmailProps):
    """Welcome after registration."""

    customer_email: EmailStr | None = None
    temporary_password: SecretStr | None = None
    dashboard_url: Link | None = None
    signin_url: Link | None = None
    docs_url: Link | None = None


def subject(_: NewSignupProps, brand: Brand) -> str:
    return fit("Welcome to ", brand.product_name)


def _created(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any]:
    return {"customer_email": event.object.get("email")}


KIND = Kind(
    name="new-signup",
    props=NewSignupProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "temporary_password": "mauve-Otter-42-lantern",
        "docs_url": f"{site}/docs/getting-started",
    },
    triggers={ACCOUNT_CREATED: _created},
)
