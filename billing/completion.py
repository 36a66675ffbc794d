"""A checkout completed from its success page: the session read from Stripe and, once paid,
applied through the access cycle at once, instead of waiting for Stripe's webhook to travel the
bus (which still comes, and changes nothing applied here: see `access.checkouts.completion_event`).

Who may complete a session: its signed-in buyer (the session's `client_reference_id`), or
whoever holds the guest completion token put into its success URL (`billing.rules`). Anyone
else is told there is no such session, as for one that does not exist.

What each is told: the signed-in buyer, what GET /api/me answers them; a token's holder, only
what that session bought. A guest's purchase lands on the account of the e-mail typed on
Stripe's page, which nobody verified: it may be someone else's, so the token tells nothing of
that account (`SessionAnswer`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from access import purchases_store as purchases
from access.checkouts import (
    PAID_STATUSES,
    Checkout,
    checkout_change,
    checkout_from,
    completion_event,
)
from access.purchases_store import SessionGrant
from accounts.service import UserSummary, account_of
from adapters.db.pool import Database
from adapters.stripe_api import (
    PaymentsNotConfigured,
    PaymentsUnavailable,
    StripeCallFailed,
    StripeGateway,
)
from adapters.tokens import User
from billing.rules import completion_token_matches
from core.errors import Conflict, NotConfigured, NotFound, Unavailable
from core.events import Event

log = logging.getLogger(__name__)

# The access cycle for one event (`access.subscriber.AccessSubscriber`): its outcome, or raises.
Apply = Callable[[Event], str]

NOT_PAID = (
    "Checkout session {session} is not completed and paid yet (payment status {status}):"
    " access follows once Stripe confirms the payment; poll GET /api/me"
)
GUEST_PENDING = (
    "Checkout session {session} is paid; the buyer's account is being made: the sign-in link"
    " comes by e-mail"
)
NOT_APPLIED = (
    "The checkout could not be applied just now: access follows with Stripe's"
    " confirmation (a guest's sign-in link comes by e-mail)"
)


@dataclass(frozen=True)
class SessionAnswer:
    """What a guest token's holder is told: the session's own grant and nothing else."""

    session_id: str
    grant: SessionGrant | None  # None: not recorded on the account that paid


def complete_checkout(
    *,
    session_id: str,
    token: str | None,
    user: User | None,
    db: Database,
    stripe: StripeGateway,
    apply: Apply,
) -> UserSummary | SessionAnswer:
    """Once the paid session is applied: the signed-in buyer's account (what GET /api/me
    answers them), or for a guest token only the session's own grant. NotFound for a session
    Stripe does not know or the caller may not complete; Conflict while unpaid."""
    session = _session(stripe, session_id)
    if session is None:
        raise NotFound(f"No checkout session {session_id}")
    event = completion_event(session)
    checkout = checkout_from(event)
    if checkout is None:  # never: `completion_event` makes a checkout's event
        raise NotFound(f"No checkout session {session_id}")
    own = user is not None and checkout.user_id == user.id
    if not own and not (token and completion_token_matches(token, session.get("metadata"))):
        raise NotFound(f"No checkout session {session_id}")
    # A session still open may say `no_payment_required` (a trial) before the buyer has
    # finished: only a completed one is applied.
    status = session.get("payment_status")
    if session.get("status") != "complete" or status not in PAID_STATUSES:
        raise Conflict(NOT_PAID.format(session=session_id, status=status))
    try:
        outcome = apply(event)
    except Exception as exc:
        # The commit may stand with only its announcement lost (the webhook's event announces
        # it again): what the buyer has is read below either way.
        log.warning("completing checkout %s: %s", session_id, exc)
        outcome = None
    log.info("checkout %s completed from its success page: %s", session_id, outcome)
    if not own or user is None:
        return _session_answer(db, checkout, outcome)
    account = account_of(user, db=db)
    if outcome is None and not account.has_access:
        raise Unavailable(NOT_APPLIED)
    return account


def _session_answer(db: Database, checkout: Checkout, outcome: str | None) -> SessionAnswer:
    """The session's own grant, read on the account that paid; whose account that is (an
    address typed on Stripe's page may be anyone's) is never read here."""
    if purchases.buyer_of(db, checkout.session_id) is None:
        if checkout.user_id is None:
            raise Conflict(GUEST_PENDING.format(session=checkout.session_id))
        raise Unavailable(NOT_APPLIED)
    source = checkout_change(checkout).source_id
    grant = purchases.of_session(db, checkout.session_id, source)
    if outcome is None and (grant is None or not grant.active):
        raise Unavailable(NOT_APPLIED)
    return SessionAnswer(checkout.session_id, grant)


def _session(stripe: StripeGateway, session_id: str) -> dict[str, Any] | None:
    try:
        return stripe.checkout_session(session_id)
    except PaymentsNotConfigured as exc:
        raise NotConfigured(str(exc)) from exc
    except PaymentsUnavailable as exc:
        raise Unavailable("Payments are unavailable right now; please try again shortly") from exc
    except StripeCallFailed as exc:  # Stripe refused the id: it names no session of ours
        log.info("stripe refused checkout session %s: %s", session_id, exc)
        return None
