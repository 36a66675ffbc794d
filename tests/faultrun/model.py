"""The fault run's scenario and its reference model, in plain Python, from a seed.

Customers live through random timelines (tests/faultrun/steps.py). Stripe sends each event one
to three times, in shuffled order: first the wave of checkouts that link customers to their
profiles, then everything else, cut into batches. A few ghost customers, whom no checkout ever
links, get a renewal each: their access changes can apply nowhere and must end as dead letters.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from tests.faultrun.steps import (
    STEPS,
    SUBSCRIPTION_PRICES,
    Customer,
    Planned,
    Timeline,
    renewal,
)

EPOCH = 1_735_689_600  # 2025-01-01: events are dated from here, whatever the day of the run
NEVER_LINKED = "no checkout ever linked this customer to a profile"


@dataclass(frozen=True)
class Profile:
    has_access: bool
    customer_id: str
    price_id: str | None


@dataclass(frozen=True)
class Scenario:
    seed: int
    customers: list[Customer]
    events: list[Planned]
    batches: list[list[Planned]]  # deliveries, in the order Stripe sends them

    @property
    def deliveries(self) -> int:
        return sum(len(batch) for batch in self.batches)

    def profiles(self) -> dict[str, Profile]:
        """Each linked customer's profile after all events, whatever the order of delivery:
        access while any grant (a subscription, a one-time purchase) is active, each grant as
        its newest change says; and the newest plan change (ordered on its own)."""
        expected = {}
        for customer in self.customers:
            if customer.user_id is None:
                continue
            mine = self._of(customer)
            prices = [e.price_id for e in mine if e.price_id]
            expected[customer.user_id] = Profile(
                has_access=any(self.grants(customer).values()),
                customer_id=customer.customer_id,
                price_id=prices[-1] if prices else None,
            )
        return expected

    def grants(self, customer: Customer) -> dict[str, bool]:
        """Each of the customer's grants, by source, active or not: its newest change wins."""
        found: dict[str, bool] = {}
        for e in self._of(customer):
            if e.grant is not None and e.source is not None:
                found[e.source] = e.grant
        return found

    def _of(self, customer: Customer) -> list[Planned]:
        return sorted((e for e in self.events if e.customer == customer), key=lambda e: e.created)

    def emails(self, outcomes: dict[str, str]) -> set[tuple[str, str, str]]:
        """(idempotency key, kind, recipient) of every e-mail the events call for, once each.

        A mail about an access change is due when access applied the change (`outcomes`, its
        ledger); whether an older change arrives after a newer one depends on delivery order.
        """
        return {
            (key, e.email, e.customer.email)
            for e in self.events
            if e.email
            and (key := e.email_key())
            and (e.announced_on is None or outcomes.get(e.event_id) == e.announced_on)
        }

    def announcements(self, outcomes: dict[str, str]) -> set[str]:
        """The ids of the application events access publishes for the changes it applied."""
        return {
            announced
            for e in self.events
            if (announced := e.announced_id()) and outcomes.get(e.event_id) == e.announced_on
        }

    def newest_changes(self) -> set[str]:
        """Each grant's newest change: never stale, whatever the order."""
        newest: dict[str, Planned] = {}
        for e in self.events:
            if e.customer.user_id is None or e.grant is None or e.source is None:
                continue
            if e.source not in newest or e.created > newest[e.source].created:
                newest[e.source] = e
        return {e.event_id for e in newest.values()}

    def sessions(self) -> list[dict[str, object]]:
        """The checkout sessions Stripe's API answers for (a refund asks for its checkout)."""
        return [e.session for e in self.events if e.session]

    def dead_letters(self) -> dict[str, str]:
        """The events whose access change may end as a dead letter, and why."""
        return {e.event_id: NEVER_LINKED for e in self.events if e.customer.user_id is None}


def generate(*, seed: int, customers: int, events: int, ghosts: int, batches: int) -> Scenario:
    rng = random.Random(seed)
    people = [_customer(rng, i, ghost=i >= customers) for i in range(customers + ghosts)]
    planned: list[Planned] = []
    lines = [
        Timeline(c, random.Random(rng.random()), EPOCH + rng.randint(0, 86_400)) for c in people
    ]
    for line in lines:
        if line.customer.user_id is None:
            line.subscription = f"sub_ghost{line.customer.index}"
            planned += renewal(line)
        else:  # a customer's life starts with a checkout
            line.events += _next(line)
            planned += line.events
    while len(planned) < events:
        line = rng.choice(lines[:customers])
        produced = _next(line)
        line.events += produced
        planned += produced
    first = [e for e in planned if e.links]
    rest = _cut(_sent(rng, [e for e in planned if not e.links and e.customer.user_id]), batches - 1)
    # One ghost renewal per batch, sent once: when several pushes fail together and nothing
    # else succeeds, the emulator stops retrying them (real Pub/Sub slows down, then goes on),
    # so they would never reach the dead-letter limit.
    for n, ghost in enumerate(e for e in planned if e.customer.user_id is None):
        batch = rest[n % len(rest)]
        batch.insert(rng.randrange(len(batch) + 1), ghost)
    _after(rng, rest, {e.event_id for e in first})
    return Scenario(seed=seed, customers=people, events=planned, batches=[_sent(rng, first), *rest])


def _after(rng: random.Random, batches: list[list[Planned]], sent_first: set[str]) -> None:
    """Move each delivery that waits for another event into the batch that event first goes
    out in, if it was cut into an earlier one: it could otherwise only wait, and end dead."""
    first: dict[str, int] = {}
    for index, batch in enumerate(batches):
        for e in batch:
            first.setdefault(e.event_id, index)
    for index, batch in enumerate(batches):
        for e in [e for e in batch if e.after and e.after not in sent_first]:
            assert e.after is not None
            if first[e.after] > index:
                batch.remove(e)
                later = batches[first[e.after]]
                later.insert(rng.randrange(len(later) + 1), e)


def _customer(rng: random.Random, index: int, *, ghost: bool) -> Customer:
    tag = "ghost" if ghost else "fr"
    return Customer(
        index=index,
        user_id=None if ghost else str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        email=f"{tag}{index}@example.com",
        name=f"Customer {index}",
        customer_id=f"cus_{tag}{index}",
        price_id=rng.choice(SUBSCRIPTION_PRICES),
    )


def _next(line: Timeline) -> list[Planned]:
    choices = [(weight, step) for weight, when, step in STEPS.values() if when(line)]
    weights = [weight for weight, _ in choices]
    [step] = line.rng.choices([step for _, step in choices], weights=weights)
    return step(line)


def _sent(rng: random.Random, events: Iterable[Planned]) -> list[Planned]:
    """Each event one to three times, shuffled: Stripe's at-least-once, in no set order."""
    copies = [e for e in events for _ in range(rng.randint(1, 3))]
    rng.shuffle(copies)
    return copies


def _cut(items: list[Planned], parts: int) -> list[list[Planned]]:
    size = -(-len(items) // parts)
    return [items[i : i + size] for i in range(0, len(items), size)]
