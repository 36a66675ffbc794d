"""Grant or revoke access from payment events: idempotent, safe against reordering, and
announced on the bus only once committed (the e-mails that speak of access follow those)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from adapters.accounts import Accounts
from adapters.db import ledger, products, profiles, purchases
from adapters.db.pool import Connection, Database
from adapters.db.profiles import Profile
from adapters.github_api import GitHubGateway
from adapters.stripe_api import (
    CheckoutFacts,
    PaymentsNotConfigured,
    StripeCallFailed,
    StripeGateway,
)
from core.access import AccessChange, Checkout, access_change, checkout_from, subscription_price
from core.announcements import Person, access_granted, access_revoked, account_invited
from core.events import Event, is_app_event
from core.refunds import dispute_from, refund_from
from subscribers.ordering import apply_access, apply_plan
from subscribers.refunds import apply_refund, record_dispute

log = logging.getLogger(__name__)

CONSUMER = "access"

Publish = Callable[[Event, bytes], None]


class ProfileNotLinked(RuntimeError):
    """No profile matches the event yet (its checkout may still be on the way): retry later."""


@dataclass(frozen=True)
class AccessSubscriber:
    """Applies the spec's state table to `profiles`, once per event.

    After each commit it publishes what changed (`publish` raises PublishError if the bus does
    not take it, so the delivery fails and comes back); a redelivery the ledger calls done
    publishes the same application events again, with the same ids.
    """

    db: Database
    stripe: StripeGateway
    accounts: Accounts
    github: GitHubGateway
    publish: Publish

    def __call__(self, event: Event) -> str:
        if is_app_event(event.type):
            outcome = "ignored"
        elif (checkout := checkout_from(event)) is not None:
            outcome = self._checkout(event, checkout)
        elif (change := access_change(event)) is not None:
            outcome = self._change(event, change)
        elif (refund := refund_from(event)) is not None:
            outcome = apply_refund(
                event, refund, db=self.db, stripe=self.stripe, github=self.github
            )
        elif (dispute := dispute_from(event)) is not None:
            outcome = record_dispute(event, dispute, db=self.db)
        else:
            outcome = self._ignore(event)
        log.info("access: %s %s -> %s", event.type, event.id, outcome)
        return outcome

    def _checkout(self, event: Event, checkout: Checkout) -> str:
        # Fetched before the transaction: no row lock is held across the network call.
        facts = self._facts(checkout)
        if checkout.user_id is None and checkout.email:
            # A guest buyer gets an account, as the spec intends, so access has somewhere to live.
            self.accounts.ensure(email=checkout.email, name=checkout.name)
        with self.db.transaction() as conn:
            profile: Profile | None
            claimed = ledger.claim(conn, consumer=CONSUMER, event=event)
            if claimed:
                outcome, profile = self._link(conn, event, checkout, facts.price_id)
                ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
            else:
                outcome = ledger.outcome(conn, consumer=CONSUMER, event=event) or "duplicate"
                profile = _checkout_profile(conn, checkout)
        if outcome == "granted" and profile is not None:
            self._announce_grant(event, checkout, profile, facts)
        return outcome if claimed else "duplicate"

    def _facts(self, checkout: Checkout) -> CheckoutFacts:
        """The price (Payment Links and the dashboard set no metadata) and the receipt link."""
        known = CheckoutFacts(price_id=checkout.price_id, receipt_url=None)
        has_receipt = bool(checkout.invoice_id or checkout.payment_intent)
        if checkout.price_id and not (checkout.paid and has_receipt):
            return known
        try:
            found = self.stripe.checkout_facts(checkout.session_id)
        except (PaymentsNotConfigured, StripeCallFailed) as exc:
            if checkout.price_id is None:
                raise
            # Access does not wait on a receipt link: the confirmation goes without it.
            log.warning("no receipt link for %s: %s", checkout.session_id, exc)
            return known
        return CheckoutFacts(
            price_id=checkout.price_id or found.price_id, receipt_url=found.receipt_url
        )

    def _link(
        self, conn: Connection, event: Event, checkout: Checkout, price_id: str | None
    ) -> tuple[str, Profile]:
        profile = _checkout_profile(conn, checkout)
        if profile is None:
            raise ProfileNotLinked(f"no profile for checkout {checkout.session_id}")
        profiles.link_customer(conn, profile.id, customer_id=checkout.customer_id)
        product = products.by_price(conn, price_id) if price_id else None
        purchases.record(
            conn, checkout, user_id=profile.id, product_id=product.id if product else None
        )
        if not checkout.paid:
            # The plan chosen, ordered like any plan change: an older checkout arriving late
            # must not put the customer back on its price.
            if price_id:
                apply_plan(conn, event, profile, price_id=price_id)
            return "linked (unpaid)", profile
        outcome = apply_access(
            conn,
            event,
            profile,
            grant=True,
            subscription_id=checkout.subscription_id,
            stripe=self.stripe,
            price_id=price_id,
        )
        return outcome, profile

    def _announce_grant(
        self, event: Event, checkout: Checkout, profile: Profile, facts: CheckoutFacts
    ) -> None:
        email = checkout.email or profile.email
        if not email:
            return
        to = Person(email=email, name=checkout.name or profile.name)
        self.publish(
            *access_granted(
                event, checkout, to=to, price_id=facts.price_id, receipt_url=facts.receipt_url
            )
        )
        if checkout.user_id is None:
            self.publish(*account_invited(event, to=to, price_id=facts.price_id))

    def _change(self, event: Event, change: AccessChange) -> str:
        profile: Profile | None = None
        with self.db.transaction() as conn:
            claimed = ledger.claim(conn, consumer=CONSUMER, event=event)
            if claimed:
                profile = profiles.lock_by_customer(conn, change.customer_id)
                outcome = self._apply_change(conn, event, change, profile)
            else:
                # A redelivery changes nothing: it takes no row lock.
                outcome = ledger.outcome(conn, consumer=CONSUMER, event=event) or "duplicate"
        if event.type == "customer.subscription.deleted" and outcome == "revoked":
            # Announced again on a redelivery, with the same ids, should the first try have
            # failed after the commit.
            found = profile or profiles.by_customer(self.db, change.customer_id)
            self._announce_end(event, change, found)
        return outcome if claimed else "duplicate"

    def _apply_change(
        self, conn: Connection, event: Event, change: AccessChange, profile: Profile | None
    ) -> str:
        if profile is None:
            raise ProfileNotLinked(f"no profile for customer {change.customer_id} yet")
        outcome = apply_access(
            conn,
            event,
            profile,
            grant=change.grant,
            subscription_id=change.subscription_id,
            stripe=self.stripe,
            price_id=change.price_id,
        )
        ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
        return outcome

    def _announce_end(self, event: Event, change: AccessChange, profile: Profile | None) -> None:
        if profile is None or not profile.email:
            return
        self.publish(
            *access_revoked(
                event,
                to=Person(email=profile.email, name=profile.name),
                customer_id=change.customer_id,
                price_id=subscription_price(event.object),
                reason="subscription_ended",
            )
        )

    def _ignore(self, event: Event) -> str:
        """Recorded all the same: `events reconcile` then knows the event arrived."""
        with self.db.transaction() as conn:
            if ledger.claim(conn, consumer=CONSUMER, event=event):
                ledger.settle(conn, consumer=CONSUMER, event=event, outcome="ignored")
        return "ignored"


def _checkout_profile(conn: Connection, checkout: Checkout) -> Profile | None:
    if checkout.user_id:
        return profiles.lock_by_id(conn, checkout.user_id)
    if checkout.email:
        # A guest checkout: the buyer may already have an account under the same address.
        return profiles.lock_by_email(conn, checkout.email)
    return None
