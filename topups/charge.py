"""Automatic top-ups charged and granted, on the access target beside the access cycle.

    app.credits.top_up            a claim (credits/service.py): read the setting under the
                                  claim's row lock; still on, charge the pack off-session on the
                                  customer's saved card (its idempotency key: the claim's)
    payment_intent.succeeded      the pack's credits granted once (the intent is the grant's
                                  source), the claim released
    payment_intent.payment_failed top-up off, the claim released, the payer told (once a claim)

Never twice: a claim is charged under one idempotency key, whatever redelivers it (Stripe
answers a retried call with the first intent), and a claim whose intent is recorded is not
charged again. Never after turning off: the setting is read under the row's lock, which the
turn-off waits for. Stripe down: the delivery fails and comes back, the claim held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from adapters.db.pool import Database
from adapters.stripe_api import StripeGateway
from core.app_events import CREDITS_TOP_UP
from core.events import Event
from credits import store as credits
from topups import store
from topups.rules import (
    NO_CARD,
    Claim,
    claim_of_event,
    failed_event,
    failure_of,
    idempotency_key,
    metadata,
    paid_of,
)

log = logging.getLogger(__name__)

Publish = Callable[[Event, bytes], None]
SUCCEEDED = "payment_intent.succeeded"
FAILED = "payment_intent.payment_failed"
TYPES = frozenset({CREDITS_TOP_UP, SUCCEEDED, FAILED})


@dataclass(frozen=True)
class TopUps:
    db: Database
    stripe: StripeGateway
    publish: Publish

    def handle(self, event: Event) -> str | None:
        """What was done for a top-up's event; None for an event that is not a top-up's (a
        payment intent of a checkout: the access cycle records it as ignored). Raises while
        Stripe or the database fails: the delivery comes back."""
        if event.type == CREDITS_TOP_UP:
            claim = claim_of_event(event.object)
            return "ignored" if claim is None else self.charge(claim)
        if event.type not in (SUCCEEDED, FAILED):
            return None
        paid = paid_of(event.object)
        if paid is None:
            return None
        customer = store.customer_of(self.db, paid.claim.account_id)
        if customer is None or customer != paid.customer_id:
            # Not charged by this service on the account's customer (its metadata copied onto
            # another payment, or onto one of no customer for an account without one: this
            # service charges none such): nothing is granted or turned off for it.
            log.error("credits: %s names the top-up of %s but not its customer",
                      paid.intent_id, paid.claim.account_id)  # fmt: skip
            return "not a top-up of this account's customer"
        if event.type == SUCCEEDED:
            written = store.grant(
                self.db,
                paid.claim,
                price_id=paid.price_id,
                intent_id=paid.intent_id,
                at=event.created,
                event_id=event.id,
            )
            return "top-up granted" if written else "top-up granted before"
        with self.db.transaction() as conn:
            turned_off = store.failed(conn, paid.claim, paid.intent_id)
        if turned_off:
            error = event.object.get("last_payment_error") or {}
            code = error.get("code") if isinstance(error, dict) else None
            self._tell(paid.claim, paid.price_id, failure_of("requires_payment_method", code))
        return "top-up failed" if turned_off else "top-up failed before"

    def handle_many(self, events: Sequence[Event]) -> list[str | Exception | None]:
        outcomes: list[str | Exception | None] = []
        for event in events:
            try:
                outcomes.append(self.handle(event))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    def charge(self, claim: Claim) -> str:
        """Charge a claim once, if it is still the account's claim and top-up is still on."""
        with self.db.transaction() as conn:
            held = store.held(conn, claim)
            if held is None or held.crossing != claim.crossing or not held.claimed:
                return "top-up settled before"
            if held.payment_intent is not None:
                return "top-up charged before"
            if not held.enabled:
                store.release(conn, claim)
                return "top-up turned off before its charge"
            if not held.below:
                # The threshold lowered, or credits bought, since the claim: not what the holder
                # asked to be bought now. Released, so the next crossing claims again.
                store.release(conn, claim)
                return "top-up not needed: the balance is not below its threshold"
            pack = store.pack_in(conn, held.price_id)
            if (
                pack is None
                or not (pack.active and pack.top_up)
                or claim.feature not in pack.credits
            ):
                # The pack is no longer one for top-up (its metadata changed): nothing to buy.
                store.failed(conn, claim, None)
                log.warning("credits: top-up of %s off, %s is no longer a top-up pack",
                            claim.account_id, held.price_id)  # fmt: skip
                return "top-up off: the pack is not sold for top-up"
            method = (
                self.stripe.default_payment_method(held.customer_id) if held.customer_id else None
            )
            if method is None:
                store.failed(conn, claim, None)
                reason: str | None = NO_CARD
            else:
                answer = self.stripe.charge_off_session(
                    customer_id=str(held.customer_id),
                    payment_method=method,
                    amount=int(pack.price * 100),
                    currency=pack.currency or "usd",
                    description=f"Automatic top-up: {pack.name}",
                    metadata=metadata(claim, pack.price_id),
                    idempotency_key=idempotency_key(claim),
                )
                reason = failure_of(answer.status, answer.code)
                if reason is None and answer.id:
                    store.charged(conn, claim, answer.id)
                else:
                    store.failed(conn, claim, answer.id)
        if reason is not None:
            self._tell(claim, pack.price_id, reason, pack_name=pack.name)
            return f"top-up off: {reason}"
        return "top-up charged"

    def _tell(
        self, claim: Claim, price_id: str, reason: str | None, *, pack_name: str | None = None
    ) -> None:
        """The payer told that top-up failed and is off (the event's id names the claim)."""
        to = credits.contact(self.db, claim.account_id)
        if not to:
            log.warning("credits: top-up of %s failed, nobody to tell", claim.account_id)
            return
        if pack_name is None:
            found = store.pack(self.db, price_id)
            pack_name = found.name if found else price_id
        self.publish(
            *failed_event(
                claim,
                to=to,
                pack_name=pack_name,
                reason=reason or "card_declined",
                at=datetime.now(UTC),
            )
        )
