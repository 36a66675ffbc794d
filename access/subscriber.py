"""Access from payment events, in one cycle for a batch of one or many deliveries.

    changes = the table's changes of each event (access/changes.py)   # Stripe asked here
    state   = claim the events, lock and read their accounts                # round trip 1
    plan    = decide(changes, state)                                         # pure (decide.py)
    write the plan, settle the ledger                                        # round trip 2
    publish what was committed, and a team's members' seat changes

Applied once per event (the ledger is claimed and settled inside both round trips), ordered per
grant, and announced on the bus only once committed (the e-mails that speak of access follow
those). The in-process bus, a push and the pull consumer all come here; none of them opens a
transaction, calls Stripe under a lock, or decides anything.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from access import features_store as features
from access import store as billing
from access.changes import Change, to_changes
from access.checkouts import Checkout
from access.decide import Answers, Asks, Pending, Plan, decide
from access.features import SUMMARY_UPDATED, disagreement, summary_from
from access.refunds import Dispute
from adapters.accounts import Accounts
from adapters.bus.envelope import outcome_fields
from adapters.db.pool import Database, Statement
from adapters.github_api import GitHubGateway
from adapters.stripe_api import (
    CheckoutFacts,
    PaymentsNotConfigured,
    StripeCallFailed,
    StripeGateway,
)
from catalogue import writes as catalogue
from catalogue.events import CatalogueChange
from core.events import Event, is_app_event

log = logging.getLogger(__name__)

CONSUMER = "access"
# Rounds of asking Stripe for one batch (each asks for everything the round found missing).
MOST_ROUNDS = 8

Publish = Callable[[Event, bytes], None]


class PublishSeatChanges(Protocol):
    """Tells a team's members of their seat changes once committed, as the team routes do
    (`teams/seats.py` `publish_changes`, given by the composition root)."""

    def __call__(
        self, team_id: str, *, db: Database, publish: Publish, github: GitHubGateway
    ) -> None: ...


class _Asking(Exception):  # a request, not a failure: rolls the first round trip back
    def __init__(self, asks: Asks) -> None:
        super().__init__("Stripe must be asked first")
        self.asks = asks


@dataclass(frozen=True)
class AccessSubscriber:
    """Runs the access cycle. After the commit it publishes what changed (`publish` raises
    PublishError if the bus does not take it, so the delivery fails and comes back); a
    redelivery the ledger calls done publishes the same application events again, same ids."""

    db: Database
    stripe: StripeGateway
    accounts: Accounts
    github: GitHubGateway
    publish: Publish
    publish_seat_changes: PublishSeatChanges
    # Grants or turns off the automatic top-ups Stripe says were paid or failed
    # (`payment_intent.*`): each event's outcome, None for one that is not a top-up's
    # (topups/charge.py, given by the composition root). Such an event still settles in the
    # ledger here (it changes no access).
    top_ups: Callable[[Sequence[Event]], Sequence[str | Exception | None]] | None = None

    def __call__(self, event: Event) -> str:
        [outcome] = self.apply_many([event])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def apply_many(self, events: Sequence[Event]) -> list[str | Exception]:
        """Each delivery's outcome, or what it failed with (that one alone is retried).

        The batch is one transaction; should it fail as a whole (Stripe down at a tie, a
        deadlock with another batch, which Postgres breaks), each event goes alone, so one
        bad event does not hold back the others.
        """
        results: list[str | Exception] = ["ignored"] * len(events)
        topped = self._top_ups(events)
        batch: list[tuple[int, Pending]] = []
        receipts: dict[str, str | None] = {}
        for n, event in enumerate(events):
            if isinstance(topped.get(n), Exception):
                results[n] = topped[n]  # Stripe or the database failed: the delivery comes back
                continue
            if is_app_event(event.type):
                continue  # the application's own announcements change no access
            try:
                changes = [self._prepared(c, receipts) for c in to_changes(event)]
            except Exception as exc:  # Stripe or Supabase Auth failed: retried
                results[n] = exc
                continue
            batch.append((n, Pending(event, changes)))
        answers = Answers(receipts=receipts)
        pending = [p for _, p in batch]
        try:
            outcomes = self._cycle(pending, answers) if pending else []
        except Exception as exc:
            if len(pending) < 2:
                outcomes = [exc] * len(pending)
            else:
                log.warning("access: a batch of %d failed, one by one now: %s", len(pending), exc)
                outcomes = [_attempt(self._cycle, [p], answers) for p in pending]
        for (n, _), outcome in zip(batch, outcomes, strict=True):
            # A top-up's payment event is settled in the ledger by the cycle; its outcome is
            # the top-up's.
            found = topped.get(n)
            results[n] = (
                found if isinstance(found, str) and not isinstance(outcome, Exception) else outcome
            )
        for n, event in enumerate(events):
            if event.type == SUMMARY_UPDATED and not isinstance(results[n], Exception):
                results[n] = _attempt_check(self._check_features, event, results[n])
        _log(events, results)
        return results

    def _top_ups(self, events: Sequence[Event]) -> dict[int, str | Exception]:
        """The top-ups' outcomes of these payment intents' events, by position (none for
        other events, nor for a payment that is not a top-up's)."""
        concerned = [n for n, e in enumerate(events) if e.type.startswith("payment_intent.")]
        if not concerned or self.top_ups is None:
            return {}
        outcomes = self.top_ups([events[n] for n in concerned])
        return {
            n: outcome
            for n, outcome in zip(concerned, outcomes, strict=True)
            if outcome is not None
        }

    def _prepared(self, change: Change, receipts: dict[str, str | None]) -> Change:
        """A change with what Stripe knows of it, asked before any transaction; a guest
        buyer's account made, so access has somewhere to live; a changed product as Stripe
        holds it now."""
        if isinstance(change, CatalogueChange) and change.needs_stripe:
            return replace(change, found=self.stripe.product_now(change.product_id or ""))
        if not isinstance(change, Checkout):
            return change
        facts = self._facts(change)
        receipts[change.session_id] = facts.receipt_url
        if change.user_id is None and change.email:
            self.accounts.ensure(email=change.email, name=change.name)
        return replace(change, price_id=facts.price_id, quantity=facts.quantity, trial=facts.trial)

    def _facts(self, checkout: Checkout) -> CheckoutFacts:
        """The price (Payment Links and the dashboard set no metadata), the receipt link, and
        a team's one-time purchase's quantity (the lifetime seats it bought, which the buyer
        may change on Stripe's page: only its line item says)."""
        known = CheckoutFacts(
            price_id=checkout.price_id,
            receipt_url=None,
            quantity=checkout.quantity,
            trial=checkout.trial,
        )
        has_receipt = bool(checkout.invoice_id or checkout.payment_intent)
        seats_unknown = (
            checkout.account_id is not None
            and checkout.subscription_id is None
            and checkout.quantity is None
        )
        # A subscription's checkout of nothing is most likely a free trial: its end and first
        # charge are what its buyer is told, instead of a payment.
        trial_unknown = (
            checkout.subscription_id is not None
            and checkout.trial is None
            and checkout.amount_total == 0
        )
        if (
            checkout.price_id
            and not seats_unknown
            and not trial_unknown
            and not (checkout.paid and has_receipt)
        ):
            return known
        try:
            found = self.stripe.checkout_facts(checkout.session_id)
        except (PaymentsNotConfigured, StripeCallFailed) as exc:
            if checkout.price_id is None or seats_unknown:
                raise
            # Access does not wait on a receipt link: the confirmation goes without it.
            log.warning("no receipt link for %s: %s", checkout.session_id, exc)
            return known
        return CheckoutFacts(
            price_id=checkout.price_id or found.price_id,
            receipt_url=found.receipt_url,
            quantity=checkout.quantity or found.quantity,
            trial=checkout.trial or found.trial,
        )

    def _cycle(self, batch: Sequence[Pending], answers: Answers) -> list[str | Exception]:
        """One transaction in two round trips, then the announcements. When the plan needs
        what only Stripe knows, the transaction rolls back, Stripe is asked with none open,
        and the batch is decided again with the answers."""
        for _ in range(MOST_ROUNDS):
            try:
                plan = self.db.read_then_write(
                    billing.claim_and_read(CONSUMER, batch),
                    partial(self._decided, batch, answers),
                )
            except _Asking as asking:
                answers = self._ask(asking.asks, answers)
                continue
            return self._published(batch, plan)
        raise RuntimeError(f"Stripe asked {MOST_ROUNDS} times for one batch")

    def _decided(
        self, batch: Sequence[Pending], answers: Answers, row: dict[str, Any] | None
    ) -> tuple[Plan, list[Statement]]:
        plan = decide(batch, billing.parse(row), answers)
        if plan.asks:
            raise _Asking(plan.asks)
        write = billing.write(CONSUMER, plan)
        return plan, [*catalogue.statements(plan.catalogue), *([write] if write else [])]

    def _check_features(self, event: Event) -> None:
        """Stripe's features of a customer against the ones derived here, once the batch is
        committed: Stripe stays the judge of what was paid, a difference says the catalogue
        is out of date (or a subscription event still on its way)."""
        summary = summary_from(event)
        if summary.customer_id is None:
            return
        ours = features.of_customer_subscriptions(self.db, summary.customer_id)
        differs = disagreement(summary, ours) if ours is not None else None
        if differs is not None:
            log.error(
                "features of customer %s differ: Stripe's active entitlements %s, derived here"
                " %s: the catalogue is out of date, or a subscription event is on its way",
                differs.customer_id,
                differs.stripe,
                differs.ours,
                extra={"customer_id": differs.customer_id, "event_id": event.id},
            )

    def _ask(self, asks: Asks, answers: Answers) -> Answers:
        statuses, prices = dict(answers.statuses), dict(answers.prices)
        for subscription_id in asks.statuses:
            status, price = self.stripe.subscription_now(subscription_id)
            statuses[subscription_id], prices[subscription_id] = status, price
        checkouts = dict(answers.checkouts)
        for intent in asks.checkouts:
            checkouts[intent] = self.stripe.has_checkout_for(intent)
        return replace(answers, statuses=statuses, prices=prices, checkouts=checkouts)

    def _published(self, batch: Sequence[Pending], plan: Plan) -> list[str | Exception]:
        """Each outcome once what it announces is on the bus, a refunded repository taken
        back and a team's seat changes told; a failure there fails the delivery alone (the
        commit stands; the redelivery announces again, with the same ids)."""
        results = list(plan.results)
        for n, (event, data) in plan.announcements:
            if isinstance(results[n], Exception):
                continue
            try:
                self.publish(event, data)
            except Exception as exc:  # the bus did not take it: the delivery comes back
                results[n] = exc
        for n, repository, username in plan.removals:
            try:  # GitHub's removal is idempotent: again on every redelivery
                self.github.remove(repository=repository, username=username)
            except Exception as exc:
                results[n] = exc
        by_team: dict[str, list[int]] = {}
        for n, team_id in plan.teams:
            by_team.setdefault(team_id, []).append(n)
        for team_id, deliveries in by_team.items():
            try:  # the seats a quantity or an end changed, told as a team route tells them
                self.publish_seat_changes(
                    team_id, db=self.db, publish=self.publish, github=self.github
                )
            except Exception as exc:  # told on the redelivery (once: keyed by the change)
                for n in deliveries:
                    if not isinstance(results[n], Exception):
                        results[n] = exc
        for dispute, _ in plan.disputes:
            _log_for_the_admin(dispute)
        return results


def _attempt(
    cycle: Callable[[Sequence[Pending], Answers], list[str | Exception]],
    batch: Sequence[Pending],
    answers: Answers,
) -> str | Exception:
    try:
        [outcome] = cycle(batch, answers)
    except Exception as exc:  # handed back to the bus, which retries or drops the delivery
        return exc
    return outcome


def _attempt_check(
    check: Callable[[Event], None], event: Event, outcome: str | Exception
) -> str | Exception:
    try:
        check(event)
    except Exception as exc:  # the database could not be read: the delivery comes back
        return exc
    return outcome


def _log_for_the_admin(dispute: Dispute) -> None:
    """Once, when the dispute is recorded: the admin answers it in Stripe's dashboard."""
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


def _log(events: Sequence[Event], outcomes: Sequence[str | Exception]) -> None:
    """A line per event, and a batch says which events shared its transaction."""
    log_outcomes(events, outcomes)
    if len(events) > 1:
        counts = Counter(o if isinstance(o, str) else type(o).__name__ for o in outcomes)
        log.info(
            "access: %d events in one transaction (%s): %s",
            len(events),
            ", ".join(f"{outcome} {n}" for outcome, n in sorted(counts.items())),
            " ".join(event.id for event in events),
        )


def log_outcomes(events: Sequence[Event], outcomes: Sequence[str | Exception]) -> None:
    """A line per event the access target handled (the cycle's, an overage report's, a
    deletion's), whatever the size of its batch: the log-based metrics count them
    (ops/monitoring: events applied by outcome, duplicates); a failure is logged by the bus,
    with what it does about it."""
    for event, outcome in zip(events, outcomes, strict=True):
        if isinstance(outcome, str):
            log.info(
                "access: %s %s -> %s",
                event.type,
                event.id,
                outcome,
                extra=outcome_fields(CONSUMER, event, outcome),
            )
