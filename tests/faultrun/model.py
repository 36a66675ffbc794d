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

from tests.faultrun.steps import STEPS, Customer, Planned, Timeline, renewal

EPOCH = 1_735_689_600  # 2025-01-01: events are dated from here, whatever the day of the run
PRICES = ("price_demo_team_monthly", "price_fr_plus_monthly", "price_fr_plus_yearly")
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
        """Each linked customer's profile after all events: the newest change of each wins."""
        expected = {}
        for customer in self.customers:
            if customer.user_id is None:
                continue
            mine = sorted(
                (e for e in self.events if e.customer == customer), key=lambda e: e.created
            )
            grants = [e.grant for e in mine if e.grant is not None]
            prices = [e.price_id for e in mine if e.price_id is not None]
            expected[customer.user_id] = Profile(
                has_access=grants[-1] if grants else False,
                customer_id=customer.customer_id,
                price_id=prices[-1] if prices else None,
            )
        return expected

    def emails(self) -> set[tuple[str, str, str]]:
        """(idempotency key, kind, recipient) of every e-mail the events call for, once each."""
        return {
            (f"{e.event_id}/{e.email}", e.email, e.customer.email) for e in self.events if e.email
        }

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
    return Scenario(seed=seed, customers=people, events=planned, batches=[_sent(rng, first), *rest])


def _customer(rng: random.Random, index: int, *, ghost: bool) -> Customer:
    tag = "ghost" if ghost else "fr"
    return Customer(
        index=index,
        user_id=None if ghost else str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        email=f"{tag}{index}@example.com",
        name=f"Customer {index}",
        customer_id=f"cus_{tag}{index}",
        price_id=rng.choice(PRICES),
    )


def _next(line: Timeline) -> list[Planned]:
    live = line.subscription is not None
    choices = [(weight, step) for weight, needs, step in STEPS.values() if needs == live]
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
