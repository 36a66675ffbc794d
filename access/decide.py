"""A batch of changes folded over the accounts it locked: the plan of what to write and what to
announce, decided without I/O.

The events claimed now are applied oldest first (Stripe's `created`, then the id), each over
the state the ones before left; an older change to a grant than the one applied is stale and
changes nothing, a plan change is ordered on its own. A redelivery (claimed before) changes
nothing and is announced again, with the same ids, should the first announcement have been
lost after its commit. What only Stripe can settle (a tie's status; whether a refunded payment
came from a checkout not recorded yet) is asked for (`Plan.asks`): the caller rolls back, asks
Stripe with no transaction open and decides again with the answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from access import revenue
from access.announcements import (
    Announcement,
    Recipient,
    access_granted,
    access_revoked,
    account_invited,
    trial_ending,
)
from access.changes import Change, TrialEnding
from access.checkouts import (
    AccessChange,
    Checkout,
    checkout_change,
    end_reason,
    refund_change,
    subscription_price,
)
from access.entitlements import (
    GRANTED,
    REVOKED,
    Entitlement,
    GrantChange,
    Ordering,
    StatusNeededAtTie,
    Stepped,
    find,
    has_access,
    last_change,
    ordering,
    step,
    still_held,
)
from access.model import Account, State, billing_customer, by_customer, paying_account
from access.refunds import Dispute, Refund
from access.revenue import Cancellation, Level, Movement
from catalogue import events as catalogue
from core.events import Event
from credits.rules import CreditEnd, CreditGrant

LINKED_UNPAID = "linked (unpaid)"
TRIAL_ANNOUNCED = "trial ending announced"


class ProfileNotLinked(RuntimeError):
    """No account matches the event yet (its checkout may still be on the way): retry later."""


class PurchaseNotRecorded(RuntimeError):
    """Stripe knows the checkout the refund is about, this service not yet: retry later."""


@dataclass(frozen=True)
class Pending:
    """One delivery of the batch and the changes its event calls for."""

    event: Event
    changes: Sequence[Change]


@dataclass(frozen=True)
class Answers:
    """What Stripe said, asked before the transaction."""

    statuses: Mapping[str, str | None] = field(default_factory=dict)  # subscription -> status
    prices: Mapping[str, str | None] = field(default_factory=dict)  # subscription -> its price
    checkouts: Mapping[str, bool] = field(default_factory=dict)  # payment intent -> has one
    receipts: Mapping[str, str | None] = field(default_factory=dict)  # session -> receipt URL


@dataclass(frozen=True)
class Asks:
    """What Stripe must be asked before the batch can be decided."""

    statuses: frozenset[str] = frozenset()
    checkouts: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.statuses or self.checkouts)


@dataclass(frozen=True)
class RefundRecord:
    purchase_id: str
    amount_refunded: int
    refunded_at: datetime | None


@dataclass(frozen=True)
class PurchaseRecord:
    checkout: Checkout
    account_id: str
    user_id: str | None  # who paid, for the books


@dataclass(frozen=True)
class CancellationRecord:
    """A subscription's cancellation as of an event: `cancellation` None when it was withdrawn
    (the customer resumed before the period's end)."""

    subscription_id: str
    account_id: str | None
    cancellation: Cancellation | None
    at: datetime
    rank: int
    event_id: str
    since: datetime | None = None  # when it was asked for, of those the batch saw


@dataclass
class Plan:
    """What a batch does: each delivery's result, the rows to write, then what to announce
    and undo elsewhere once committed (by the index of the delivery it belongs to)."""

    results: list[str | Exception]
    grants: dict[str, Entitlement] = field(default_factory=dict)  # by source id
    # Account id -> its state after the batch and the last event that set its access.
    accounts: dict[str, tuple[Account, str | None]] = field(default_factory=dict)
    purchases: list[PurchaseRecord] = field(default_factory=list)
    refunds: list[RefundRecord] = field(default_factory=list)
    disputes: list[tuple[Dispute, datetime]] = field(default_factory=list)
    catalogue: list[catalogue.CatalogueWrite] = field(default_factory=list)  # oldest first
    settled: dict[str, str] = field(default_factory=dict)  # event id -> outcome
    released: list[str] = field(default_factory=list)  # claims undone: retried later
    announcements: list[tuple[int, Announcement]] = field(default_factory=list)
    removals: list[tuple[int, str, str]] = field(default_factory=list)  # GitHub: repo, user
    quantities: dict[str, int] = field(default_factory=dict)  # a team's account id -> seats
    quantity_at: dict[str, datetime] = field(default_factory=dict)  # when Stripe said each
    links: dict[str, str] = field(default_factory=dict)  # a customer seen first -> its account
    # The teams whose seats or repositories the delivery may have changed: their members are
    # told once committed (teams/seats.py), again on a redelivery (told once all the same).
    teams: list[tuple[int, str]] = field(default_factory=list)
    # Credits granted by paid periods and packs, and taken back by an end or a refund.
    credit_grants: list[CreditGrant] = field(default_factory=list)
    credit_ends: list[CreditEnd] = field(default_factory=list)
    asks: Asks = field(default_factory=Asks)
    # The revenue metrics: each subscription's MRR after the batch, how it moved (once per
    # event), and its cancellation as the newest event says it.
    levels: dict[str, tuple[Level, str | None, str]] = field(default_factory=dict)
    movements: list[Movement] = field(default_factory=list)
    cancellations: dict[str, CancellationRecord] = field(default_factory=dict)


class _Ask(Exception):  # a request, not a failure
    def __init__(self, *, status: str | None = None, checkout: str | None = None) -> None:
        self.status, self.checkout = status, checkout


def decide(batch: Sequence[Pending], state: State, answers: Answers) -> Plan:
    """The plan for a batch, given what the first round trip read and what Stripe said."""
    fold = _Fold(state, answers, Plan(results=[""] * len(batch)))
    first: dict[str, int] = {}
    for n, pending in enumerate(batch):
        first.setdefault(pending.event.id, n)
    fresh = {
        n for n, p in enumerate(batch) if p.event.id in state.claimed and first[p.event.id] == n
    }
    for n in sorted(fresh, key=lambda n: (batch[n].event.created, batch[n].event.id)):
        fold.apply(n, batch[n])
    fold.plan.asks = Asks(frozenset(fold.statuses), frozenset(fold.checkouts))
    for n, pending in enumerate(batch):
        if first[pending.event.id] != n:  # the same event twice in one batch: a copy
            earlier = fold.plan.results[first[pending.event.id]]
            copy: str | Exception = "duplicate" if pending.changes else "ignored"
            fold.plan.results[n] = earlier if isinstance(earlier, Exception) else copy
        elif n not in fresh:
            fold.again(n, pending)
    return fold.plan


class _Fold:
    def __init__(self, state: State, answers: Answers, plan: Plan) -> None:
        self.state, self.answers, self.plan = state, answers, plan
        self.current: dict[str, Account] = {a.id: a for a in state.accounts}
        self.grants = {a.id: tuple(state.held.get(a.id, ())) for a in state.accounts}
        self.set_by: dict[str, str] = {}
        # What Stripe must be asked: subscriptions at a tie, payment intents of refunds.
        self.statuses: set[str] = set()
        self.checkouts: set[str] = set()
        self.levels: dict[str, Level] = dict(state.levels)

    def apply(self, n: int, pending: Pending) -> None:
        event = pending.event
        outcomes: list[str] = []
        try:
            for change in pending.changes:
                outcomes.append(self._change(n, event, change))
        except _Ask as ask:  # the plan is not written: decided again once Stripe answered
            self.statuses.update([ask.status] if ask.status else [])
            self.checkouts.update([ask.checkout] if ask.checkout else [])
            return
        except (ProfileNotLinked, PurchaseNotRecorded) as exc:
            self.plan.results[n] = exc
            self.plan.released.append(event.id)  # its claim is undone: it applies when retried
            return
        outcome = ", ".join(outcomes) if outcomes else "ignored"
        self.plan.results[n] = self.plan.settled[event.id] = outcome

    def _change(self, n: int, event: Event, change: Change) -> str:
        if isinstance(change, AccessChange):
            return self._grant_change(n, event, change)
        if isinstance(change, Checkout):
            return self._checkout(n, event, change)
        if isinstance(change, Refund):
            return self._refund(n, event, change)
        if isinstance(change, TrialEnding):
            return self._trial(n, event, change)
        if isinstance(change, catalogue.CatalogueChange):
            write, outcome = catalogue.decide(event, change)
            self.plan.catalogue.append(write)
            return outcome
        self.plan.disputes.append((change, event.created))
        return "dispute recorded"

    def _grant_change(self, n: int, event: Event, change: AccessChange) -> str:
        account = by_customer(list(self.current.values()), change.customer_id)
        if account is None and change.customer_id in self.state.erased:
            # Its person deleted their account (the cancellation their deletion asked for, a
            # late renewal): nothing is left to grant or end, and a retry would find nothing.
            # Its revenue still ends.
            self._revenue(event, change, None)
            return "ignored: the customer's account was deleted"
        if account is None:
            raise ProfileNotLinked(f"no profile for customer {change.customer_id} yet")
        self._team(n, account)
        stepped, after = self._step(account, event, change.change, price_id=change.price_id)
        if account.kind == "team" and change.quantity is not None:
            self._quantity(account.id, change.quantity, event.created)
        if stepped.applied:
            self._credits_of_period(account, event, change, stepped.entitlement)
        if stepped.ended_now:
            self._announce_end(n, event, change, after)
        self._revenue(event, change, account.id)
        return stepped.outcome

    def _revenue(self, event: Event, change: AccessChange, account_id: str | None) -> None:
        """The subscription's MRR and cancellation as this event says them, ordered on their
        own (like a plan change: an invoice newer than an upgrade does not make it stale)."""
        snap = change.revenue
        if snap is None:
            return
        sub = snap.subscription_id
        level = self.levels.get(sub)
        if not revenue.newer(event.created, snap.rank, level):
            return
        said = revenue.monthly(snap, self.state.prices)
        if said is not None:
            currency, amount = said
            movement = revenue.moved(
                level,
                currency,
                amount,
                ended=snap.ended,
                event_id=event.id,
                subscription_id=sub,
                account_id=account_id,
                at=event.created,
            )
            if movement is not None:
                self.plan.movements.append(movement)
            money = currency or (level.currency if level else None)
            if money is not None:
                now = Level(money, amount, event.created, snap.rank)
                self.levels[sub] = now
                self.plan.levels[sub] = (now, account_id, event.id)
        told = snap.cancellation
        prior = self.plan.cancellations.get(sub)
        if told is not None and prior is not None and prior.cancellation is not None:
            told = Cancellation(
                told.feedback or prior.cancellation.feedback,
                told.has_comment or prior.cancellation.has_comment,
                told.reason or prior.cancellation.reason,
            )
            since = prior.since
        else:
            since = event.created if told is not None else None
        self.plan.cancellations[sub] = CancellationRecord(
            sub, account_id, told, event.created, snap.rank, event.id, since
        )

    def _credits_of_period(
        self, account: Account, event: Event, change: AccessChange, grant: Entitlement
    ) -> None:
        """A paid period grants its credits (the period before ends with them); a
        subscription's end ends its period's credits, and any granted earlier in the batch."""
        subscription = change.subscription_id
        if not grant.active:
            self.plan.credit_grants = [
                g for g in self.plan.credit_grants if g.subscription_id != subscription
            ]
            self.plan.credit_ends.append(CreditEnd(subscription, None, event.created))
            return
        paid = change.paid
        price = (paid.price_id if paid else None) or grant.price_id
        if paid is None or price is None:
            return
        starts = datetime.fromtimestamp(paid.start, UTC) if paid.start else event.created
        ends = datetime.fromtimestamp(paid.end, UTC) if paid.end else grant.current_period_end
        if not paid.top_up:  # the newest period of a batch is the one that counts
            self.plan.credit_grants = [
                g for g in self.plan.credit_grants if g.subscription_id != subscription
            ]
        self.plan.credit_grants.append(
            CreditGrant(
                account.id,
                f"{subscription}@{paid.invoice_id}",
                subscription,
                price,
                starts,
                ends,
                event.id,
                top_up=paid.top_up,
            )
        )

    def _checkout(self, n: int, event: Event, checkout: Checkout) -> str:
        account = paying_account(
            list(self.current.values()),
            account_id=checkout.account_id,
            user_id=checkout.user_id,
            email=checkout.email,
            customer_id=checkout.customer_id,
        )
        if account is None:
            raise ProfileNotLinked(f"no profile for checkout {checkout.session_id}")
        self._team(n, account)
        linked = self._link(account, event, checkout)
        self._keep(account, linked)
        # Who paid, for the books: a team's purchase is the team's, whoever created the team.
        buyer = account.owner_id if account.kind == "personal" else checkout.user_id
        self.plan.purchases.append(PurchaseRecord(checkout, account.id, buyer))
        if not checkout.paid:
            # The plan chosen, ordered like any plan change: an older checkout arriving late
            # must not put the customer back on its price.
            if checkout.price_id:
                self._keep(linked, _plan_after(linked, event, checkout.price_id))
            return LINKED_UNPAID
        stepped, after = self._step(
            linked, event, checkout_change(checkout), price_id=checkout.price_id
        )
        if account.kind == "team" and checkout.subscription_id and checkout.quantity is not None:
            # The seats bought, at once (the success page), dated when the checkout opened:
            # Stripe's subscription events (the same quantity, then every change) are newer,
            # so a checkout event delivered late never undoes a seat change made since.
            self._quantity(account.id, checkout.quantity, _opened(event, checkout))
        if stepped.outcome == GRANTED and not checkout.subscription_id and checkout.price_id:
            # A pack: its credits, once (the success page's completion and Stripe's own event
            # grant the same source); a subscription's come with its paid periods.
            self.plan.credit_grants.append(
                CreditGrant(
                    linked.id,
                    checkout.session_id,
                    None,
                    checkout.price_id,
                    _opened(event, checkout),
                    None,
                    event.id,
                )
            )
        if stepped.outcome == GRANTED:
            self._announce_grant(n, event, checkout, after)
        return stepped.outcome

    def _link(self, account: Account, event: Event, checkout: Checkout) -> Account:
        """The checkout's customer becomes the account's when no account has it yet (a customer
        never moves to another account), and the billing customer follows `billing_customer`.
        A team's checkout is made only through the API, by one of its owners or admins."""
        customer = checkout.customer_id
        if customer and by_customer(list(self.current.values()), customer) is None:
            self.plan.links[customer] = account.id
            account = replace(account, customers=(*account.customers, customer))
        signed_in = checkout.user_id is not None or checkout.account_id is not None
        billing = billing_customer(
            account, customer_id=customer, signed_in=signed_in, opened_at=_opened(event, checkout)
        )
        return replace(account, customer_id=billing)

    def _refund(self, n: int, event: Event, refund: Refund) -> str:
        """Record the refund; a full one of a one-time purchase ends what it granted and takes
        its repository back (after the commit, and again on a redelivery)."""
        intent = refund.payment_intent
        purchase = self.state.purchases.get(intent) if intent else None
        if purchase is not None and purchase.account_id and purchase.account_id not in self.current:
            # Its checkout committed after the claim looked for the purchase and before it read
            # it: the account it granted was neither locked nor read, so nothing here could end
            # that grant. Recording the refund now would settle it with the access still on.
            raise PurchaseNotRecorded(
                f"the purchase paid with {intent} was recorded while it was claimed: retried"
            )
        if purchase is None and intent and refund.invoice_id is None:
            if intent not in self.answers.checkouts:
                raise _Ask(checkout=intent)
            if self.answers.checkouts[intent]:
                raise PurchaseNotRecorded(f"the checkout paid with {intent} is not recorded yet")
        if purchase is None:
            return "refund of no purchase recorded"  # a renewal's charge, or one made elsewhere
        self._take_back(n, refund, intent)
        self.plan.refunds.append(
            RefundRecord(
                purchase.id, refund.amount_refunded, event.created if refund.full else None
            )
        )
        if not refund.full:
            return "partial refund recorded"
        account = self.current.get(purchase.account_id or "")
        self._team(n, account)
        if not purchase.one_time or account is None:
            return "refunded"
        # What is left of a refunded pack is taken back (what was used stays used).
        self.plan.credit_ends.append(CreditEnd(None, purchase.session_id, event.created))
        stepped, _ = self._step(account, event, refund_change(purchase.session_id), price_id=None)
        return f"refunded, access {stepped.outcome}"

    def _trial(self, n: int, event: Event, trial: TrialEnding) -> str:
        """A trial's coming end is announced unless its grant has ended (cancelled during it)."""
        account = by_customer(list(self.current.values()), trial.customer_id)
        if account is None or not account.email:
            return "ignored (no profile)"
        if not still_held(self.grants.get(account.id, ()), trial.subscription_id):
            return "ignored (trial over)"
        self._announce_trial(n, event, trial, account)
        return TRIAL_ANNOUNCED

    def again(self, n: int, pending: Pending) -> None:
        """A redelivery: nothing is applied; what its first delivery announced is announced
        again, with the same ids, and a refunded repository taken back again."""
        event = pending.event
        self.plan.results[n] = "duplicate" if pending.changes else "ignored"
        recorded = self.state.recorded.get(event.id)
        accounts = [*self.state.accounts, *self.state.known]
        for change in pending.changes:
            if isinstance(change, AccessChange):
                self._team(n, by_customer(accounts, change.customer_id))
            elif isinstance(change, Checkout):
                self._team(n, _by_id(accounts, change.account_id))
            elif isinstance(change, Refund):
                purchase = self.state.purchases.get(change.payment_intent or "")
                self._team(n, _by_id(accounts, purchase.account_id if purchase else None))
            if isinstance(change, AccessChange) and recorded == REVOKED:
                self._announce_end(n, event, change, by_customer(accounts, change.customer_id))
            elif isinstance(change, Checkout) and recorded == GRANTED:
                found = paying_account(
                    accounts,
                    account_id=change.account_id,
                    user_id=change.user_id,
                    email=change.email,
                    customer_id=change.customer_id,
                )
                self._announce_grant(n, event, change, found)
            elif isinstance(change, TrialEnding) and recorded == TRIAL_ANNOUNCED:
                found = by_customer(accounts, change.customer_id)
                if found is not None:
                    self._announce_trial(n, event, change, found)
            elif isinstance(change, Refund):
                self._take_back(n, change, change.payment_intent)

    def _step(
        self, account: Account, event: Event, change: GrantChange, *, price_id: str | None
    ) -> tuple[Stepped, Account]:
        """One change to one of the account's grants, unless a newer change to it was applied;
        the account's access derived from all its grants, and its plan as the event says unless
        a newer plan change was applied (each is ordered on its own)."""
        after = account if price_id is None else _plan_after(account, event, price_id)
        held = self.grants.get(account.id, ())
        current = find(held, change)
        try:
            stepped = step(
                current,
                change,
                account_id=account.id,
                created=event.created,
                event_id=event.id,
                tie_statuses=self.answers.statuses,
                tie_prices=self.answers.prices,
            )
        except StatusNeededAtTie as needed:
            raise _Ask(status=needed.subscription_id) from None
        if stepped.applied:
            now = (*(e for e in held if e is not current), stepped.entitlement)
            self.grants[account.id] = now
            self.plan.grants[stepped.entitlement.source_id] = stepped.entitlement
            self.set_by[account.id] = event.id
            after = replace(after, has_access=has_access(now), access_changed_at=last_change(now))
            self._keep(account, after, force=True)
        elif current is not None and stepped.entitlement != current:  # a price filled in
            self.grants[account.id] = (*(e for e in held if e is not current), stepped.entitlement)
            self.plan.grants[stepped.entitlement.source_id] = stepped.entitlement
            self._keep(account, after, force=True)  # the account's write gives seats out again
        else:
            self._keep(account, after)
        return stepped, after

    def _team(self, n: int, account: Account | None) -> None:
        if account is not None and account.kind == "team":
            self.plan.teams.append((n, account.id))

    def _quantity(self, account_id: str, quantity: int, created: datetime) -> None:
        """A team's seats, ordered on their own like a plan change: a newer change to the grant
        that names no quantity (an invoice) does not make an older quantity stale; the write
        keeps the newest (`Plan.quantity_at`)."""
        if ordering(created, self.plan.quantity_at.get(account_id)) is Ordering.NEWER:
            self.plan.quantities[account_id] = quantity
            self.plan.quantity_at[account_id] = created

    def _keep(self, before: Account, after: Account, *, force: bool = False) -> None:
        if after != before or force:
            self.current[after.id] = after
            self.plan.accounts[after.id] = (after, self.set_by.get(after.id))

    def _take_back(self, n: int, refund: Refund, intent: str | None) -> None:
        purchase = self.state.purchases.get(intent) if intent else None
        if not (refund.full and purchase and purchase.one_time):
            return
        if purchase.repository and purchase.github_username:
            self.plan.removals.append((n, purchase.repository, purchase.github_username))

    def _announce_grant(
        self, n: int, event: Event, checkout: Checkout, account: Account | None
    ) -> None:
        email = checkout.email or (account.email if account else None)
        if not email:
            return
        to = Recipient(email=email, name=checkout.name or (account.name if account else None))
        receipt = self.answers.receipts.get(checkout.session_id)
        self.plan.announcements.append(
            (
                n,
                access_granted(
                    event, checkout, to=to, price_id=checkout.price_id, receipt_url=receipt
                ),
            )
        )
        if checkout.user_id is None:
            self.plan.announcements.append(
                (n, account_invited(event, checkout, to=to, price_id=checkout.price_id))
            )

    def _announce_end(
        self, n: int, event: Event, change: AccessChange, after: Account | None
    ) -> None:
        if after is None or not after.email:
            return
        self.plan.announcements.append(
            (
                n,
                access_revoked(
                    event,
                    to=Recipient(email=after.email, name=after.name),
                    customer_id=change.customer_id,
                    price_id=subscription_price(event.object),
                    reason=end_reason(event.object),
                    access_remains=after.has_access or after.comped,
                ),
            )
        )

    def _announce_trial(self, n: int, event: Event, trial: TrialEnding, account: Account) -> None:
        if account.email:
            to = Recipient(email=account.email, name=account.name)
            self.plan.announcements.append((n, trial_ending(event, to=to, price_id=trial.price_id)))


def _opened(event: Event, checkout: Checkout) -> datetime:
    """When the checkout session was created (Stripe's `created`), else its event's time."""
    return datetime.fromtimestamp(checkout.created, UTC) if checkout.created else event.created


def _by_id(accounts: Sequence[Account], account_id: str | None) -> Account | None:
    return next((a for a in accounts if account_id and a.id == account_id), None)


def _plan_after(account: Account, event: Event, price_id: str) -> Account:
    """The account on `price_id` unless a plan change as new or newer was applied (at a tie,
    which Stripe's `created` cannot order, the first applied stays)."""
    if ordering(event.created, account.price_changed_at) is Ordering.NEWER:
        return replace(account, price_id=price_id, price_changed_at=event.created)
    return account
