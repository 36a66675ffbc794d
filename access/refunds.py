"""Refunds and disputes of charges, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.events import Event, stripe_id
from core.stripe_objects import charge_invoice, charge_payment_intent


@dataclass(frozen=True)
class Refund:
    """A charge refunded in full (`full`) or in part; `amount_refunded` is the running total."""

    charge_id: str
    payment_intent: str | None
    invoice_id: str | None
    amount_refunded: int
    full: bool


@dataclass(frozen=True)
class Dispute:
    """A chargeback the card holder's bank opened; the admin answers it in Stripe."""

    id: str
    charge_id: str | None
    payment_intent: str | None
    amount: int | None
    currency: str | None
    reason: str | None
    status: str | None
    respond_by: int | None


def refund_from(event: Event) -> Refund | None:
    """The refund a `charge.refunded` event reports."""
    if event.type != "charge.refunded":
        return None
    charge = event.object
    refunded = charge.get("amount_refunded")
    return Refund(
        charge_id=str(charge.get("id")),
        payment_intent=charge_payment_intent(charge),
        # Unknown at the current versions: the subscriber then asks Stripe (has_checkout_for).
        invoice_id=charge_invoice(charge),
        amount_refunded=refunded if isinstance(refunded, int) else 0,
        # Stripe sets `refunded` only once the whole amount has been given back.
        full=charge.get("refunded") is True,
    )


def dispute_from(event: Event) -> Dispute | None:
    """The dispute a `charge.dispute.created` event opens."""
    if event.type != "charge.dispute.created":
        return None
    dispute = event.object
    evidence = dispute.get("evidence_details")
    due = evidence.get("due_by") if isinstance(evidence, dict) else None
    return Dispute(
        id=str(dispute.get("id")),
        charge_id=stripe_id(dispute.get("charge")),
        payment_intent=stripe_id(dispute.get("payment_intent")),
        amount=_int(dispute.get("amount")),
        currency=dispute.get("currency") if isinstance(dispute.get("currency"), str) else None,
        reason=dispute.get("reason") if isinstance(dispute.get("reason"), str) else None,
        status=dispute.get("status") if isinstance(dispute.get("status"), str) else None,
        respond_by=_int(due),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
