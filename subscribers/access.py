"""Grant or revoke access from payment events: idempotent, and safe against reordering."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapters.accounts import Accounts
from adapters.db import ledger, products, profiles, purchases
from adapters.db.pool import Connection, Database
from adapters.db.profiles import Profile
from adapters.stripe_api import StripeGateway
from core.access import (
    AccessChange,
    Checkout,
    Ordering,
    access_change,
    checkout_from,
    grant_at_tie,
    ordering,
)
from core.events import Event

log = logging.getLogger(__name__)

CONSUMER = "access"


class ProfileNotLinked(RuntimeError):
    """No profile matches the event yet (its checkout may still be on the way): retry later."""


@dataclass(frozen=True)
class AccessSubscriber:
    """Applies the spec's state table to `profiles`, once per event."""

    db: Database
    stripe: StripeGateway
    accounts: Accounts

    def __call__(self, event: Event) -> str:
        if (checkout := checkout_from(event)) is not None:
            outcome = self._checkout(event, checkout)
        elif (change := access_change(event)) is not None:
            outcome = self._change(event, change)
        else:
            outcome = "ignored"
        log.info("access: %s %s -> %s", event.type, event.id, outcome)
        return outcome

    def _checkout(self, event: Event, checkout: Checkout) -> str:
        # Fetched before the transaction: no row lock is held across the network call.
        price_id = checkout.price_id or self.stripe.checkout_price_id(checkout.session_id)
        if checkout.user_id is None and checkout.email:
            self._ensure_account(checkout.email, checkout.name)
        with self.db.transaction() as conn:
            if not ledger.claim(conn, consumer=CONSUMER, event=event):
                return "duplicate"
            profile = _checkout_profile(conn, checkout)
            if profile is None:
                raise ProfileNotLinked(f"no profile for checkout {checkout.session_id}")
            profiles.link_customer(
                conn, profile.id, customer_id=checkout.customer_id, price_id=price_id
            )
            product = products.by_price(conn, price_id) if price_id else None
            purchases.record(
                conn, checkout, user_id=profile.id, product_id=product.id if product else None
            )
            outcome = "linked (unpaid)"
            if checkout.paid:
                outcome = self._apply(
                    conn, event, profile, grant=True, subscription_id=checkout.subscription_id
                )
            ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
            return outcome

    def _ensure_account(self, email: str, name: str | None) -> None:
        """A guest buyer gets an account, as the spec intends, so access has somewhere to live."""
        if profiles.by_email(self.db, email) is None:
            self.accounts.invite(email=email, name=name)

    def _change(self, event: Event, change: AccessChange) -> str:
        with self.db.transaction() as conn:
            if not ledger.claim(conn, consumer=CONSUMER, event=event):
                return "duplicate"
            profile = profiles.lock_by_customer(conn, change.customer_id)
            if profile is None:
                raise ProfileNotLinked(f"no profile for customer {change.customer_id} yet")
            outcome = self._apply(
                conn, event, profile, grant=change.grant, subscription_id=change.subscription_id
            )
            ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
            return outcome

    def _apply(
        self,
        conn: Connection,
        event: Event,
        profile: Profile,
        *,
        grant: bool,
        subscription_id: str | None,
    ) -> str:
        order = ordering(event.created, profile.access_changed_at)
        if order is Ordering.STALE:
            return "stale"
        if order is Ordering.TIE:
            status = self.stripe.subscription_status(subscription_id) if subscription_id else None
            grant = grant_at_tie(wanted=grant, subscription_status=status)
        profiles.set_access(
            conn, profile.id, grant=grant, changed_at=event.created, event_id=event.id
        )
        return "granted" if grant else "revoked"


def _checkout_profile(conn: Connection, checkout: Checkout) -> Profile | None:
    if checkout.user_id:
        return profiles.lock_by_id(conn, checkout.user_id)
    if checkout.email:
        # A guest checkout: the buyer may already have an account under the same address.
        return profiles.lock_by_email(conn, checkout.email)
    return None
