"""A subscription was set to end (access kept until the period's end), or has ended."""

from __future__ import annotations

from datetime import date
from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import ACCESS_REVOKED
from core.brand import Brand
from core.events import Event
from core.stripe_objects import subscription_period_end
from emails.kind import Kind
from emails.props import Day, EmailProps, Link, Text
from emails.subjects import fit


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


def subject(p: SubscriptionCancelledProps, _: Brand) -> str:
    if p.access_ended:
        if p.product_name is None:
            return "Your subscription has ended"
        return fit("Subscription ended: ", p.product_name)
    if p.product_name is None:
        return "Your subscription has been cancelled"
    return fit("Subscription cancelled: ", p.product_name)


def _cancellation_scheduled(
    event: Event, product: EmailProduct | None, site: str
) -> dict[str, Any] | None:
    """`cancel_at_period_end` turned true: access stays until the period's end, and says so.

    Turning it back (the customer changed their mind) sends nothing: nothing was lost.
    """
    subscription = event.object
    turned_on = subscription.get("cancel_at_period_end") is True and (
        event.previous.get("cancel_at_period_end") is False
    )
    if not turned_on:
        return None
    end = subscription.get("cancel_at") or subscription_period_end(subscription)
    return {"product_name": product.name if product else None, "access_end_date": end}


def _access_ended(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any] | None:
    """Sent from `app.access.revoked` once the revocation of an ended subscription is committed."""
    revoked = event.object
    reason = revoked.get("reason")
    if reason not in ("subscription_ended", "payment_failed", "trial_ended"):
        return None
    return {
        "product_name": product.name if product else None,
        "access_end_date": revoked.get("ended_at"),
        "access_ended": True,
        # Stripe ended it (for want of payment, or a trial ran out): the customer chose
        # nothing, so nothing asks why.
        "unpaid": reason == "payment_failed",
        "trial_ended": reason == "trial_ended",
        "access_remains": revoked.get("access_remains") is True,
    }


KIND = Kind(
    name="subscription-cancelled",
    props=SubscriptionCancelledProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "product_name": "Team plan",
        "access_end_date": date(2026, 12, 20),
        "access_ended": False,
        "unpaid": False,
        "trial_ended": False,
        "access_remains": False,
        "feedback_url": f"{site}/feedback?topic=cancellation",
    },
    triggers={
        "customer.subscription.updated": _cancellation_scheduled,
        ACCESS_REVOKED: _access_ended,
    },
)
