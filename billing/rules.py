"""The parameters of a Stripe Checkout Session: the price, URLs and metadata, then what the buyer,
the mode and the offer add (customer, discounts, trial, recovery, tax, local currencies)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["payment", "subscription"]
# Who handles tax (CHECKOUT_TAX): the founder outside Stripe, Stripe Tax, or Stripe as merchant of
# record (Managed Payments).
Tax = Literal["none", "stripe_tax", "managed_payments"]
# The most seats one checkout sells (Stripe allows up to 999999; its default is 99).
MOST_SEATS = 10_000
BILLING_TYPE_FOR_MODE: dict[str, str] = {"payment": "one_time", "subscription": "subscription"}

# Stripe replaces this template in `success_url` with the session's id as it redirects the buyer,
# so the success page can ask for its completion (POST /api/payments/complete-checkout).
SESSION_TEMPLATE = "{CHECKOUT_SESSION_ID}"
SESSION_PARAM = "session_id"
# A guest's proof that the session is theirs: a random token in the success URL, whose SHA-256
# digest the session's metadata keeps (so it is bound to that one session, and nobody reading
# Stripe's dashboard or this database can use it).
TOKEN_PARAM = "checkout_token"  # noqa: S105 - a parameter name
TOKEN_DIGEST_KEY = "completion_token_sha256"  # noqa: S105 - a metadata key


@dataclass(frozen=True)
class Buyer:
    """What is known about the person checking out; all empty for a guest."""

    user_id: str | None = None
    email: str | None = None
    customer_id: str | None = None
    team_id: str | None = None  # buying for a team: its account pays (and is the customer)


@dataclass(frozen=True)
class SeatChoice:
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
    tax: Tax = "none"
    adaptive_pricing: bool | None = None  # local currencies at Checkout; None: the dashboard's


def session_params(
    *,
    price_id: str,
    mode: Mode,
    success_url: str,
    cancel_url: str,
    buyer: Buyer,
    coupon_id: str | None = None,
    offer: Offer = Offer(),
    guest_token: str | None = None,
    seats: SeatChoice | None = None,
) -> dict[str, Any]:
    """Build the `checkout.sessions.create` parameters. `guest_token`: a guest's completion
    token (see `completion_token_matches`), put in the success URL, its digest in the metadata;
    `seats`: a per-seat price's quantity."""
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
    metadata = {
        "price_id": price_id,
        **({"user_id": buyer.user_id} if buyer.user_id else {}),
        **({"team_id": buyer.team_id} if buyer.team_id else {}),
    }
    if guest_token:
        metadata[TOKEN_DIGEST_KEY] = _digest(guest_token)
    params: dict[str, Any] = {
        "mode": mode,
        "line_items": [item],
        "success_url": completion_url(success_url, guest_token=guest_token),
        "cancel_url": cancel_url,
        # Read back by the access subscriber, so it need not fetch the line items.
        "metadata": metadata,
    }
    if buyer.user_id:
        params["client_reference_id"] = buyer.user_id
    if coupon_id:
        # Stripe refuses `allow_promotion_codes` together with `discounts`.
        params["discounts"] = [{"coupon": coupon_id}]
    else:
        params["allow_promotion_codes"] = True
    params.update(_customer_params(mode=mode, buyer=buyer, tax=offer.tax))
    params.update(_offer_params(mode=mode, offer=offer))
    params.update(tax_params(buyer=buyer, tax=offer.tax))
    if offer.adaptive_pricing is not None:
        params["adaptive_pricing"] = {"enabled": offer.adaptive_pricing}
    return params


def tax_params(*, buyer: Buyer, tax: Tax) -> dict[str, Any]:
    """What a tax choice adds to a session, as Stripe documents each.

    `stripe_tax`: `automatic_tax[enabled]` makes Checkout collect the billing address the
    calculation needs; `billing_address_collection=required` asks for the full address a tax
    invoice names; tax ids are collected (Checkout shows the field where one applies). For an
    existing customer Stripe refuses automatic tax unless the address typed at Checkout may be
    saved on the customer (`customer_update[address]=auto`, "Automatic tax calculation in
    Checkout requires a valid address on the Customer"), and refuses tax id collection unless
    the business name may be (`customer_update[name]=auto`, "Tax ID collection requires
    updating business name on the customer"); `customer_update` itself needs `customer`.

    `managed_payments`: `managed_payments[enabled]` only. Stripe, as merchant of record, sets
    the parameters of tax configuration, shipping and Connect itself and refuses them when
    they are sent (its "remove unsupported parameters" list), so none of the above is sent.
    """
    if tax == "managed_payments":
        return {"managed_payments": {"enabled": True}}
    if tax != "stripe_tax":
        return {}
    params: dict[str, Any] = {
        "automatic_tax": {"enabled": True},
        "billing_address_collection": "required",
        "tax_id_collection": {"enabled": True},
    }
    if buyer.customer_id:
        params["customer_update"] = {"address": "auto", "name": "auto"}
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


def _customer_params(*, mode: Mode, buyer: Buyer, tax: Tax) -> dict[str, Any]:
    if buyer.customer_id:
        return {"customer": buyer.customer_id}
    # A new customer's tax id is collected unless Stripe, as merchant of record, collects it.
    extra: dict[str, Any] = {}
    if tax != "managed_payments":
        extra["tax_id_collection"] = {"enabled": True}
    if mode == "payment":
        extra["customer_creation"] = "always"
        extra["payment_intent_data"] = {"setup_future_usage": "on_session"}
    if buyer.email:
        extra["customer_email"] = buyer.email
    return extra


def missing_tax_setting(tax: Tax, *, product: str, tax_code: str | None) -> str | None:
    """Why a product cannot be sold under this tax choice (naming it and the setting it
    lacks), or None. Managed Payments taxes a product by its tax code and Stripe refuses a
    session for a product without an eligible one. Stripe Tax needs none of its own: without a
    code it applies the preset of the Tax settings, without a price's tax behaviour their
    default one."""
    if tax == "managed_payments" and not tax_code:
        return (
            f"Product {product} has no tax code (tax_code): Managed Payments needs one eligible"
            " for it, set on the product in Stripe"
        )
    return None


def mode_matches(mode: Mode, billing_type: str) -> bool:
    """Whether a checkout mode fits a product's billing type."""
    return BILLING_TYPE_FOR_MODE[mode] == billing_type


def completion_url(success_url: str, *, guest_token: str | None = None) -> str:
    """The success URL carrying the session's id (Stripe fills the template in) unless it
    carries the template already, and a guest's completion token."""
    extra = [] if SESSION_TEMPLATE in success_url else [f"{SESSION_PARAM}={SESSION_TEMPLATE}"]
    if guest_token:
        extra.append(f"{TOKEN_PARAM}={guest_token}")
    if not extra:
        return success_url
    # Appended as text: the template's braces must reach Stripe as they are, not encoded.
    base, hash_mark, fragment = success_url.partition("#")
    joiner = "&" if "?" in base else "?"
    return base + joiner + "&".join(extra) + hash_mark + fragment


def completion_token_matches(token: str, metadata: Any) -> bool:
    """Whether `token` is the guest completion token of the session with this metadata."""
    digest = metadata.get(TOKEN_DIGEST_KEY) if isinstance(metadata, dict) else None
    return isinstance(digest, str) and hmac.compare_digest(_digest(token), digest)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
