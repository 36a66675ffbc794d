"""Grant or revoke access from payment events: idempotent, safe against reordering, and
announced on the bus only once committed (the e-mails that speak of access follow those)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from adapters.accounts import Accounts
from adapters.db import access_changes, entitlements, ledger, products, profiles, purchases
from adapters.db.pool import Connection, Database, Statement
from adapters.db.profiles import Profile
from adapters.github_api import GitHubGateway
from adapters.stripe_api import (
    CheckoutFacts,
    PaymentsNotConfigured,
    StripeCallFailed,
    StripeGateway,
)
from core.access import (
    TRIAL_WILL_END,
    AccessChange,
    Checkout,
    access_change,
    checkout_change,
    checkout_from,
    end_reason,
    subscription_price,
)
from core.announcements import (
    Person,
    access_granted,
    access_revoked,
    account_invited,
    trial_ending,
)
from core.entitlements import REVOKED, still_held
from core.events import Event, is_app_event, stripe_id
from core.refunds import dispute_from, refund_from
from subscribers.changes import ChangeBatch, ProfileNotLinked, Result
from subscribers.envelope import outcome_fields
from subscribers.ordering import TieStatuses, apply_access, apply_plan, with_tie_statuses
from subscribers.refunds import apply_refund, record_dispute

log = logging.getLogger(__name__)

CONSUMER = "access"

Publish = Callable[[Event, bytes], None]


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
        elif event.type == TRIAL_WILL_END:
            outcome = self._trial_ending(event)
        else:
            outcome = self._ignore(event)
        log.info(
            "access: %s %s -> %s",
            event.type,
            event.id,
            outcome,
            extra=outcome_fields(CONSUMER, event, outcome),
        )
        return outcome

    def _checkout(self, event: Event, checkout: Checkout) -> str:
        # Fetched before the transaction: no row lock is held across the network call.
        facts = self._facts(checkout)
        if checkout.user_id is None and checkout.email:
            # A guest buyer gets an account, as the spec intends, so access has somewhere to live.
            self.accounts.ensure(email=checkout.email, name=checkout.name)
        claimed, outcome, profile = with_tie_statuses(
            self.stripe, partial(self._apply_checkout, event, checkout, facts.price_id)
        )
        if outcome == "granted" and profile is not None:
            self._announce_grant(event, checkout, profile, facts)
        return outcome if claimed else "duplicate"

    def _apply_checkout(
        self, event: Event, checkout: Checkout, price_id: str | None, tie_statuses: TieStatuses
    ) -> tuple[bool, str, Profile | None]:
        """One transaction: whether the event was claimed now, its outcome, the profile."""
        with self.db.transaction() as conn:
            profile: Profile | None
            claimed = ledger.claim(conn, consumer=CONSUMER, event=event)
            if claimed:
                outcome, profile = self._link(conn, event, checkout, price_id, tie_statuses)
                ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
            else:
                outcome = ledger.outcome(conn, consumer=CONSUMER, event=event) or "duplicate"
                profile = _checkout_profile(conn, checkout)
        return claimed, outcome, profile

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
        self,
        conn: Connection,
        event: Event,
        checkout: Checkout,
        price_id: str | None,
        tie_statuses: TieStatuses,
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
        change = checkout_change(replace(checkout, price_id=price_id))
        applied = apply_access(
            conn, event, profile, change, tie_statuses=tie_statuses, price_id=price_id
        )
        return applied.outcome, profile

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

    def apply_many(self, events: Sequence[Event]) -> list[str | Exception]:
        """Apply a batch of deliveries: each event's outcome, or what it failed with (to retry).

        The access changes among them (renewals, subscription changes: nearly all of a burst)
        are applied in one transaction (`ChangeBatch`); the other events one by one.
        """
        results: list[str | Exception] = [""] * len(events)
        changes: list[tuple[int, Event, AccessChange]] = []
        for n, event in enumerate(events):
            if (change := _batchable(event)) is not None:
                changes.append((n, event, change))
            else:
                results[n] = _attempt(partial(self, event))
        for n, outcome in self._apply_changes(changes):
            results[n] = outcome
        return results

    def _apply_changes(
        self, changes: Sequence[tuple[int, Event, AccessChange]]
    ) -> list[tuple[int, str | Exception]]:
        """In one transaction; should it fail, one by one, so that one bad event (or a deadlock
        with another batch, which Postgres breaks) does not hold back the others."""
        if len(changes) > 1:
            try:
                outcomes = self._changes([(event, change) for _, event, change in changes])
            except Exception as exc:
                log.warning("access: a batch of %d failed, one by one now: %s", len(changes), exc)
            else:
                _log_batch([event for _, event, _ in changes], outcomes)
                return [(n, outcome) for (n, _, _), outcome in zip(changes, outcomes, strict=True)]
        return [
            (n, _logged(event, _attempt(partial(self._change, event, change))))
            for n, event, change in changes
        ]

    def _change(self, event: Event, change: AccessChange) -> str:
        [outcome] = self._changes([(event, change)])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _changes(self, items: Sequence[tuple[Event, AccessChange]]) -> list[str | Exception]:
        """Apply access changes in one transaction, then announce the ends of subscriptions.

        A redelivery changes nothing and takes no row lock. A change whose customer has no
        profile yet fails with ProfileNotLinked and its claim is undone: it applies when retried.
        """
        batch, recorded = with_tie_statuses(self.stripe, partial(self._apply_batch, items))
        return [
            self._announced(event, change, result, batch)
            for (event, change), result in zip(items, batch.results(recorded), strict=True)
        ]

    def _apply_batch(
        self, items: Sequence[tuple[Event, AccessChange]], tie_statuses: TieStatuses
    ) -> tuple[ChangeBatch, dict[str, str]]:
        """One transaction in two round trips: claim, lock and read with the BEGIN; fold here;
        write and settle with the COMMIT. Stripe is not called in it."""
        read = access_changes.read(CONSUMER, [(e, c.customer_id) for e, c in items])

        def decide(
            row: dict[str, Any] | None,
        ) -> tuple[tuple[ChangeBatch, dict[str, str]], list[Statement]]:
            found = access_changes.parse(row)
            batch = ChangeBatch(items, found.claimed)
            unlinked = batch.apply(found.profiles, found.held, tie_statuses)
            batch.before = {**found.known, **batch.before}
            write = access_changes.write(
                CONSUMER,
                changed=list(batch.changed.values()),
                adopted=batch.adopted,
                states=batch.states,
                released=sorted(unlinked),
                settled={k: v for k, v in batch.settled.items() if k not in unlinked},
            )
            recorded = {k: v for k, v in found.recorded.items() if k in batch.redelivered}
            return (batch, recorded), [write] if write else []

        return self.db.read_then_write(read, decide)

    def _announced(
        self, event: Event, change: AccessChange, result: Result, batch: ChangeBatch
    ) -> str | Exception:
        """The item's outcome, once the end of its subscription is announced. A redelivery
        announces again, with the same ids, should the first try have failed after the commit
        (what it says of the rest of the customer's access is then read anew)."""
        if result.outcome == REVOKED:
            try:
                after = (
                    batch.ended.get(event.id)
                    or batch.before.get(change.customer_id)
                    or profiles.by_customer(self.db, change.customer_id)
                )
                self._announce_end(event, change, after)
            except Exception as exc:  # the bus did not take it: the delivery comes back
                return exc
        return result.outcome if result.claimed else "duplicate"

    def _announce_end(self, event: Event, change: AccessChange, after: Profile | None) -> None:
        if after is None or not after.email:
            return
        self.publish(
            *access_revoked(
                event,
                to=Person(email=after.email, name=after.name),
                customer_id=change.customer_id,
                price_id=subscription_price(event.object),
                reason=end_reason(event.object),
                access_remains=after.has_access,
            )
        )

    def _trial_ending(self, event: Event) -> str:
        """Announce a trial's coming end to its customer, unless its grant has ended already
        (cancelled during the trial); recorded once, announced again on a redelivery."""
        subscription_id = stripe_id(event.object.get("id"))
        customer_id = stripe_id(event.object.get("customer"))
        with self.db.transaction() as conn:
            claimed = ledger.claim(conn, consumer=CONSUMER, event=event)
            profile = profiles.lock_by_customer(conn, customer_id) if customer_id else None
            held = entitlements.lock_for_users(conn, [profile.id])[profile.id] if profile else []
            if profile is None or not profile.email:
                outcome = "ignored (no profile)"
            elif not still_held(held, subscription_id):
                outcome = "ignored (trial over)"
            else:
                outcome = "trial ending announced"
            if claimed:
                ledger.settle(conn, consumer=CONSUMER, event=event, outcome=outcome)
        if profile is not None and profile.email and outcome == "trial ending announced":
            to = Person(email=profile.email, name=profile.name)
            self.publish(*trial_ending(event, to=to, price_id=subscription_price(event.object)))
        return outcome if claimed else "duplicate"

    def _ignore(self, event: Event) -> str:
        """Recorded all the same: `events reconcile` then knows the event arrived."""
        with self.db.transaction() as conn:
            if ledger.claim(conn, consumer=CONSUMER, event=event):
                ledger.settle(conn, consumer=CONSUMER, event=event, outcome="ignored")
        return "ignored"


def _batchable(event: Event) -> AccessChange | None:
    """The access change `__call__` would apply to this event with `_change`, if any."""
    if is_app_event(event.type) or checkout_from(event) is not None:
        return None
    return access_change(event)


def _attempt(apply: Callable[[], str]) -> str | Exception:
    try:
        return apply()
    except Exception as exc:  # handed back to the bus, which retries or drops the delivery
        return exc


def _logged(event: Event, outcome: str | Exception) -> str | Exception:
    if isinstance(outcome, str):
        log.info(
            "access: %s %s -> %s",
            event.type,
            event.id,
            outcome,
            extra=outcome_fields(CONSUMER, event, outcome),
        )
    return outcome


def _log_batch(events: Sequence[Event], outcomes: Sequence[str | Exception]) -> None:
    """One line for the batch, with every event id in it: a line per event costs as much as
    applying it does in a batch (each event's outcome is in `processed_events` too)."""
    counts = Counter(o if isinstance(o, str) else type(o).__name__ for o in outcomes)
    log.info(
        "access: %d events in one transaction (%s): %s",
        len(events),
        ", ".join(f"{outcome} {n}" for outcome, n in sorted(counts.items())),
        " ".join(event.id for event in events),
    )


def _checkout_profile(conn: Connection, checkout: Checkout) -> Profile | None:
    if checkout.user_id:
        return profiles.lock_by_id(conn, checkout.user_id)
    if checkout.email:
        # A guest checkout: the buyer may already have an account under the same address.
        return profiles.lock_by_email(conn, checkout.email)
    return None
