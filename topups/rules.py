"""Automatic top-up as plain data: which charge a claim is, what Stripe's answer means, and what
the payer is told when it fails.

A consumption that leaves a balance below its holder's threshold claims the top-up (credits/
store.py, one in flight per account and feature, numbered: its `crossing`); the claim's charge
carries the account, the feature, the price and that number in its metadata and its idempotency
key, so a retried charge answers the first and its payment is matched to its claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.app_events import CREDITS_TOP_UP_FAILED
from core.events import Event, app_event

# Why a top-up is turned off: the bank declined the card, the card needs its holder's
# authentication (a charge without them cannot pass it), or no card is saved.
DECLINED = "card_declined"
AUTHENTICATION = "authentication_required"
NO_CARD = "no_payment_method"
# A payment intent in these states is paid, or will be without the customer (Stripe tells
# which with `payment_intent.succeeded` or `payment_intent.payment_failed`).
UNDER_WAY = frozenset({"succeeded", "processing"})
LARGEST_BELOW = 1_000_000_000


@dataclass(frozen=True)
class Claim:
    """One claimed top-up: whose, of which feature, and its number."""

    account_id: str
    feature: str
    crossing: int


def idempotency_key(claim: Claim) -> str:
    """The charge's idempotency key: one per claim, so a retry never charges twice."""
    return f"top-up-{claim.account_id}-{claim.feature}-{claim.crossing}"


def metadata(claim: Claim, price_id: str) -> dict[str, str]:
    """What the charge's payment intent carries, so its payment is matched to its claim."""
    return {
        "top_up_account": claim.account_id,
        "top_up_feature": claim.feature,
        "top_up_crossing": str(claim.crossing),
        "top_up_price": price_id,
    }


def claim_of_event(obj: Mapping[str, Any]) -> Claim | None:
    """The claim an `app.credits.top_up` announces."""
    crossing = obj.get("crossing")
    if not obj.get("account_id") or not obj.get("feature") or not isinstance(crossing, int):
        return None
    return Claim(str(obj["account_id"]), str(obj["feature"]), crossing)


@dataclass(frozen=True)
class Paid:
    """A top-up's payment intent as its event tells it."""

    claim: Claim
    price_id: str
    intent_id: str
    customer_id: str | None


def paid_of(intent: Mapping[str, Any]) -> Paid | None:
    """The top-up a payment intent's event is about (None: another payment, not ours)."""
    meta = intent.get("metadata") or {}
    crossing = str(meta.get("top_up_crossing") or "")
    if not (meta.get("top_up_account") and meta.get("top_up_feature") and crossing.isdigit()):
        return None
    if not meta.get("top_up_price") or not intent.get("id"):
        return None
    try:
        account = str(uuid.UUID(str(meta["top_up_account"])))
    except ValueError:
        return None
    customer = intent.get("customer")
    if isinstance(customer, Mapping):
        customer = customer.get("id")
    return Paid(
        claim=Claim(account, str(meta["top_up_feature"]), int(crossing)),
        price_id=str(meta["top_up_price"]),
        intent_id=str(intent["id"]),
        customer_id=customer if isinstance(customer, str) else None,
    )


def failure_of(status: str, code: str | None) -> str | None:
    """Why a charge that answered `status` (and `code`, a refusal's) failed, or None when it is
    paid or under way."""
    if code is None and status in UNDER_WAY:
        return None
    if code == AUTHENTICATION or status == "requires_action":
        return AUTHENTICATION
    return DECLINED


def failed_event(
    claim: Claim,
    *,
    to: Mapping[str, Any],
    pack_name: str,
    reason: str,
    at: datetime,
) -> tuple[Event, bytes]:
    """The announcement that a claim's top-up failed and was turned off: its id names the
    claim, so the payer is told once whichever of the charge and Stripe's event tells first."""
    obj = {**to, "feature": claim.feature, "pack_name": pack_name, "reason": reason}
    obj["at"] = at.isoformat()
    event_id = f"credits_top_up_failed_{claim.account_id}_{claim.feature}_{claim.crossing}"
    return app_event(CREDITS_TOP_UP_FAILED, event_id=event_id, obj=obj, created=at)
