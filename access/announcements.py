"""The application events the access subscriber publishes after it commits an access change.

Each id derives from what happened, so a redelivery republishes the very same message and the
e-mail subscriber (at most one e-mail per event and kind) sends nothing twice. A checkout's
announcements are keyed by its session, not by the event that applied it: the success page's
completion (`billing/completion.py`) and Stripe's `checkout.session.completed` apply
the same checkout under two event ids, and its buyer is told once, whichever comes first.
"""

from __future__ import annotations

from dataclasses import dataclass

from access.checkouts import Checkout
from core.app_events import ACCESS_GRANTED, ACCESS_REVOKED, ACCOUNT_INVITED, TRIAL_ENDING
from core.events import Event, app_event

Announcement = tuple[Event, bytes]

GRANTED, REVOKED, INVITED, TRIAL = "granted_", "revoked_", "invited_", "trial_"
_PREFIXES = (GRANTED, REVOKED, INVITED, TRIAL)
# Keyed by the checkout's session (the rest by the Stripe event's id).
_BY_SESSION = (GRANTED, INVITED)


def announced_ids(event_id: str, session_id: str | None = None) -> tuple[str, ...]:
    """Every id a mail about this Stripe event may be sent under: its own, an announcement's
    (a checkout's, given its session, under the session's)."""
    keys = (event_id, session_id) if session_id else (event_id,)
    return (event_id, *(prefix + key for key in keys for prefix in _PREFIXES))


def about(key: str) -> str:
    """What the mail sent under `key` (`sent_emails.event_id`) was about, in plain words: a
    checkout's announcement, `checkout cs_X`; a Stripe event's own mail or announcement,
    `event evt_X`; any other key (the app's own events) as it is."""
    for prefix in _PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            rest = key.removeprefix(prefix)
            return f"checkout {rest}" if prefix in _BY_SESSION else f"event {rest}"
    return f"event {key}" if key.startswith("evt_") else key


@dataclass(frozen=True)
class Recipient:
    email: str
    name: str | None


def access_granted(
    source: Event,
    checkout: Checkout,
    *,
    to: Recipient,
    price_id: str | None,
    receipt_url: str | None,
) -> Announcement:
    """A checkout's access is committed: the purchase confirmation may say so."""
    return app_event(
        ACCESS_GRANTED,
        event_id=GRANTED + checkout.session_id,
        obj={
            "email": to.email,
            "name": to.name,
            "customer": checkout.customer_id,
            "checkout_session": checkout.session_id,
            "price_id": price_id,
            "amount_total": checkout.amount_total,
            "currency": checkout.currency,
            "purchased_at": checkout.created or int(source.created.timestamp()),
            "receipt_url": receipt_url,
            "amounts": checkout.amounts.as_json() if checkout.amounts else None,
            "merchant_of_record": checkout.merchant_of_record,
            # A free trial: the confirmation tells its end and first charge, not a payment.
            "trial": checkout.trial.as_json() if checkout.trial else None,
        },
        created=source.created,
    )


def access_revoked(
    source: Event,
    *,
    to: Recipient,
    customer_id: str,
    price_id: str | None,
    reason: str,
    access_remains: bool,
) -> Announcement:
    """The end of a subscription's access is committed (`reason`: see
    `access.checkouts.end_reason`); `access_remains`: the customer keeps access through another
    purchase or subscription."""
    ended = source.object.get("ended_at")
    return app_event(
        ACCESS_REVOKED,
        event_id=REVOKED + source.id,
        obj={
            "email": to.email,
            "name": to.name,
            "customer": customer_id,
            "price_id": price_id,
            "reason": reason,
            "access_remains": access_remains,
            "ended_at": ended if isinstance(ended, int) else int(source.created.timestamp()),
        },
        created=source.created,
    )


def account_invited(
    source: Event, checkout: Checkout, *, to: Recipient, price_id: str | None
) -> Announcement:
    """A guest buyer's account exists and has access: send them a way to sign in."""
    return app_event(
        ACCOUNT_INVITED,
        event_id=INVITED + checkout.session_id,
        obj={"email": to.email, "name": to.name, "price_id": price_id},
        created=source.created,
    )


def trial_ending(source: Event, *, to: Recipient, price_id: str | None) -> Announcement:
    """A trial the customer still holds ends soon: the subscription as Stripe sent it says
    when, what it will cost and what happens without a payment method."""
    return app_event(
        TRIAL_ENDING,
        event_id=TRIAL + source.id,
        obj={
            "email": to.email,
            "name": to.name,
            "price_id": price_id,
            "subscription": dict(source.object),
        },
        created=source.created,
    )
