"""The parameters of a Stripe Checkout Session, by the spec's eight rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["payment", "subscription"]
BILLING_TYPE_FOR_MODE: dict[str, str] = {"payment": "one_time", "subscription": "subscription"}


@dataclass(frozen=True)
class Buyer:
    """What is known about the person checking out; all empty for a guest."""

    user_id: str | None = None
    email: str | None = None
    customer_id: str | None = None


def session_params(
    *,
    price_id: str,
    mode: Mode,
    success_url: str,
    cancel_url: str,
    buyer: Buyer,
    coupon_id: str | None = None,
) -> dict[str, Any]:
    """Build the `checkout.sessions.create` parameters."""
    params: dict[str, Any] = {
        "mode": mode,
        "line_items": [{"price": price_id, "quantity": 1}],
        "success_url": success_url,
        "cancel_url": cancel_url,
        # Read back by the access subscriber, so it need not fetch the line items.
        "metadata": {"price_id": price_id, **({"user_id": buyer.user_id} if buyer.user_id else {})},
    }
    if buyer.user_id:
        params["client_reference_id"] = buyer.user_id
    if coupon_id:
        # Stripe refuses `allow_promotion_codes` together with `discounts`.
        params["discounts"] = [{"coupon": coupon_id}]
    else:
        params["allow_promotion_codes"] = True
    params.update(_customer_params(mode=mode, buyer=buyer))
    return params


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
