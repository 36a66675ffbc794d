"""A checkout completed from its success page: the session read from Stripe and, once paid,
applied through the access cycle at once, instead of waiting for Stripe's webhook to travel the
bus (which still comes, and changes nothing applied here: see `core.access.completion_event`).

Who may complete a session: its signed-in buyer (the session's `client_reference_id`), or
whoever holds the guest completion token put into its success URL (`core.checkout`). Anyone
else is told there is no such session, as for one that does not exist.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from adapters.db import purchases
from adapters.db.pool import Database
from adapters.stripe_api import (
    PaymentsNotConfigured,
    PaymentsUnavailable,
    StripeCallFailed,
    StripeGateway,
)
from adapters.tokens import User
from core.access import PAID_STATUSES, checkout_from, completion_event
from core.checkout import completion_token_matches
from core.events import Event
from services.account import Account, account_of
from services.errors import Conflict, NotConfigured, NotFound, Unavailable

log = logging.getLogger(__name__)

# The access cycle for one event (`subscribers.access.AccessSubscriber`): its outcome, or raises.
Apply = Callable[[Event], str]

NOT_PAID = (
    "Checkout session {session} is not completed and paid yet (payment status {status}):"
    " access follows once Stripe confirms the payment; poll GET /api/me"
)
GUEST_PENDING = (
    "Checkout session {session} is paid; the buyer's account is being made: the sign-in link"
    " comes by e-mail"
)


def complete_checkout(
    *,
    session_id: str,
    token: str | None,
    user: User | None,
    db: Database,
    stripe: StripeGateway,
    apply: Apply,
) -> Account:
    """What GET /api/me answers the buyer once the paid session is applied. NotFound for a
    session Stripe does not know or the caller may not complete; Conflict while unpaid."""
    session = _session(stripe, session_id)
    if session is None:
        raise NotFound(f"No checkout session {session_id}")
    event = completion_event(session)
    checkout = checkout_from(event)
    own = user is not None and checkout is not None and checkout.user_id == user.id
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
    buyer = user if own and user is not None else _buyer(db, session_id)
    account = account_of(buyer, db=db) if buyer is not None else None
    if account is None and checkout is not None and checkout.user_id is None:
        raise Conflict(GUEST_PENDING.format(session=session_id))
    if account is None or (outcome is None and not account.has_access):
        raise Unavailable(
            "The checkout could not be applied just now: access follows with Stripe's"
            " confirmation (a guest's sign-in link comes by e-mail)"
        )
    return account


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


def _buyer(db: Database, session_id: str) -> User | None:
    """A guest's account, made by the cycle for the address they paid with."""
    buyer = purchases.buyer_of(db, session_id)
    return User(id=buyer, email=None) if buyer else None
