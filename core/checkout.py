"""The parameters of a Stripe Checkout Session, by the spec's eight rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["payment", "subscription"]
# The most seats one checkout sells (Stripe allows up to 999999; its default is 99).
MOST_SEATS = 10_000
BILLING_TYPE_FOR_MODE: dict[str, str] = {"payment": "one_time", "subscription": "subscription"}


@dataclass(frozen=True)
class Buyer:
    """What is known about the person checking out; all empty for a guest."""

    user_id: str | None = None
    email: str | None = None
    customer_id: str | None = None
    team_id: str | None = None  # buying for a team: its account pays (and is the customer)


@dataclass(frozen=True)
class Seats:
    """A per-seat price: how many seats to start with, and the fewest the buyer may choose
    (the members the team already has)."""

    quantity: int
    minimum: int


@dataclass(frozen=True)
class Offer:
    """What the product and the operator add to a checkout."""

    trial_days: int | None = None  # a free trial, for a subscription
    recovery: bool = True  # Stripe makes a link that reopens the cart once the session expires
    promotions_consent: bool = False  # Checkout asks for marketing consent where the law needs it


def session_params(
    *,
    price_id: str,
    mode: Mode,
    success_url: str,
    cancel_url: str,
    buyer: Buyer,
    coupon_id: str | None = None,
    offer: Offer = Offer(),
    seats: Seats | None = None,
) -> dict[str, Any]:
    """Build the `checkout.sessions.create` parameters."""
    item: dict[str, Any] = {"price": price_id, "quantity": 1}
    if seats is not None:
        # The buyer may add seats on Stripe's page, never go below the members already there.
        item = {
            "price": price_id,
            "quantity": max(seats.quantity, seats.minimum),
            "adjustable_quantity": {
                "enabled": True,
                "minimum": max(seats.minimum, 1),
                "maximum": max(MOST_SEATS, seats.quantity),
            },
        }
    team = {"team_id": buyer.team_id} if buyer.team_id else {}
    params: dict[str, Any] = {
        "mode": mode,
        "line_items": [item],
        "success_url": success_url,
        "cancel_url": cancel_url,
        # Read back by the access subscriber, so it need not fetch the line items.
        "metadata": {
            "price_id": price_id,
            **({"user_id": buyer.user_id} if buyer.user_id else {}),
            **team,
        },
    }
    if buyer.user_id:
        params["client_reference_id"] = buyer.user_id
    if coupon_id:
        # Stripe refuses `allow_promotion_codes` together with `discounts`.
        params["discounts"] = [{"coupon": coupon_id}]
    else:
        params["allow_promotion_codes"] = True
    params.update(_customer_params(mode=mode, buyer=buyer))
    params.update(_offer_params(mode=mode, offer=offer))
    return params


def _offer_params(*, mode: Mode, offer: Offer) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if offer.trial_days and mode == "subscription":
        # A trial asks for a card only if the customer wants to give one; without one Stripe
        # cancels the subscription as the trial ends, and access ends with it (and says why).
        extra["subscription_data"] = {
            "trial_period_days": offer.trial_days,
            "trial_settings": {"end_behavior": {"missing_payment_method": "cancel"}},
        }
        extra["payment_method_collection"] = "if_required"
    if offer.recovery:
        extra["after_expiration"] = {"recovery": {"enabled": True}}
    if offer.promotions_consent:
        extra["consent_collection"] = {"promotions": "auto"}
    return extra


def _customer_params(*, mode: Mode, buyer: Buyer) -> dict[str, Any]:
    if buyer.customer_id:
        return {"customer": buyer.customer_id}
    extra: dict[str, Any] = {"tax_id_collection": {"enabled": True}}
    if mode == "payment":
        extra["customer_creation"] = "always"
        extra["payment_intent_data"] = {"setup_future_usage": "on_session"}
    if buyer.email:
        extra["customer_email"] = buyer.email
    return extra


def mode_matches(mode: Mode, billing_type: str) -> bool:
    """Whether a checkout mode fits a product's billing type."""
    return BILLING_TYPE_FOR_MODE[mode] == billing_type
