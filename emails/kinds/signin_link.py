"""A guest buyer's account is ready: a one-time link signs them in.

The link itself is made when the e-mail is sent (it expires soon, and a new one voids the one
before it), never carried on the bus: the builder leaves `signin_url` to the sender.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime, EmailStr

from catalogue.rules import EmailProduct
from core.app_events import ACCOUNT_INVITED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps, Link, Text
from emails.subjects import fit


class SigninLinkProps(EmailProps):
    """A guest buyer's account is ready: a one-time link signs them in."""

    customer_email: EmailStr
    signin_url: Link
    # When the link stops working (None: it does not expire, as the local sign-in page).
    link_expires_at: AwareDatetime | None = None
    product_name: Text | None = None
    dashboard_url: Link | None = None


def subject(_: SigninLinkProps, brand: Brand) -> str:
    return fit("Sign in to ", brand.product_name)


def _invited(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any]:
    return {
        "customer_email": event.object.get("email"),
        "product_name": product.name if product else None,
    }


KIND = Kind(
    name="signin-link",
    props=SigninLinkProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "signin_url": "https://abcdefgh.supabase.co/auth/v1/verify?token=pkce_4817&type=magiclink"
        f"&redirect_to={site}/dashboard",
        "link_expires_at": datetime(2026, 11, 21, 15, 30, tzinfo=UTC),
        "product_name": "Starter Kit Pro",
    },
    sender="noreply",
    triggers={ACCOUNT_INVITED: _invited},
)
