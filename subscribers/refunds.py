"""Refunds and disputes, for the access subscriber: recorded once, access and repository
taken back after a full refund of a one-time purchase."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from adapters.db import disputes, ledger, profiles, purchases
from adapters.db.pool import Connection, Database
from adapters.db.purchases import PaidPurchase
from adapters.github_api import GitHubGateway
from adapters.stripe_api import StripeGateway
from core.access import refund_change
from core.events import Event
from core.refunds import Dispute, Refund
from subscribers.ordering import apply_access

log = logging.getLogger(__name__)

CONSUMER = "access"


class PurchaseNotRecorded(RuntimeError):
    """Stripe knows the checkout the refund is about, this service not yet: retry later."""


def apply_refund(
    event: Event, refund: Refund, *, db: Database, stripe: StripeGateway, github: GitHubGateway
) -> str:
    """Record the refund; a full one of a one-time purchase revokes what it granted."""
    intent = refund.payment_intent
    purchase = purchases.by_payment_intent(db, intent) if intent else None
    if (
        purchase is None
        and intent
        and refund.invoice_id is None
        and stripe.has_checkout_for(intent)
    ):
        raise PurchaseNotRecorded(f"the checkout paid with {intent} is not recorded yet")
    with db.transaction() as conn:
        if ledger.claim(conn, consumer=CONSUMER, event=event):
            outcome = _record(conn, event, refund, purchase)
            ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
        else:
            outcome = "duplicate"
    # After the commit, and again on a redelivery: GitHub's removal is idempotent.
    if refund.full and purchase and purchase.one_time:
        _remove_collaborator(purchase, github)
    return outcome


def _remove_collaborator(purchase: PaidPurchase, github: GitHubGateway) -> None:
    if purchase.repository and purchase.github_username:
        github.remove(repository=purchase.repository, username=purchase.github_username)


def _record(
    conn: Connection,
    event: Event,
    refund: Refund,
    purchase: PaidPurchase | None,
) -> str:
    if purchase is None:
        return "refund of no purchase recorded"  # a renewal's charge, or one made elsewhere
    purchases.record_refund(
        conn,
        purchase.id,
        amount_refunded=refund.amount_refunded,
        refunded_at=event.created if refund.full else None,
    )
    if not refund.full:
        return "partial refund recorded"
    if not purchase.one_time or purchase.user_id is None:
        return "refunded"
    profile = profiles.lock_by_id(conn, purchase.user_id)
    if profile is None:
        return "refunded"
    # A purchase's grant: no subscription to ask Stripe about, a tie keeps the refund's end.
    applied = apply_access(
        conn, event, profile, refund_change(purchase.session_id), tie_statuses={}
    )
    return f"refunded, access {applied.outcome}"


def record_dispute(event: Event, dispute: Dispute, *, db: Database) -> str:
    """Keep the dispute and tell the admin, through the log, once."""
    with db.transaction() as conn:
        if not ledger.claim(conn, consumer=CONSUMER, event=event):
            return "duplicate"
        disputes.record(conn, dispute, opened_at=event.created)
        ledger.settle(conn, consumer=CONSUMER, event=event, outcome="dispute recorded")
    due = (
        datetime.fromtimestamp(dispute.respond_by, tz=UTC).date().isoformat()
        if dispute.respond_by
        else "the date Stripe shows"
    )
    log.warning(
        "dispute %s opened on charge %s (%s %s, reason %s): answer it in Stripe's dashboard by %s",
        dispute.id,
        dispute.charge_id,
        dispute.amount,
        (dispute.currency or "").upper(),
        dispute.reason,
        due,
    )
    return "dispute recorded"
