"""The fault run's scenario and its reference model, in plain Python, from a seed.

Customers live through random timelines (tests/faultrun/steps.py). Stripe sends each event one
to three times, in shuffled order: first the wave of checkouts that link customers to their
profiles, then everything else, cut into batches. A few ghost customers, whom no checkout ever
links, get a renewal each: their access changes can apply nowhere and must end as dead letters.

Now and then someone signed out buys once under a customer's address (a guest checkout with a
new Stripe customer): the customer's account gets the purchase and keeps its own link.

Some customers are teams (tests/faultrun/teams.py): a customer owns each, buys seats or a one-time
purchase for it, and people join, leave, are removed and change roles between the batches. A
person's access is their own grants' or a team's where they hold a seat.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from tests.faultrun.steps import (
    SEAT_PRICE,
    STEPS,
    SUBSCRIPTION_PRICES,
    TEAM_STEPS,
    Customer,
    Planned,
    Timeline,
    renewal,
)
from tests.faultrun.teams import Op, Person, Roster, plan_round, rosters

EPOCH = 1_735_689_600  # 2025-01-01: events are dated from here, whatever the day of the run
NEVER_LINKED = "no checkout ever linked this customer to a profile"


@dataclass(frozen=True)
class Profile:
    has_access: bool
    customer_id: str | None  # None: a member who never bought anything
    price_id: str | None


@dataclass(frozen=True)
class Scenario:
    seed: int
    customers: list[Customer]  # the teams' accounts among them (`team` set)
    events: list[Planned]
    batches: list[list[Planned]]  # deliveries, in the order Stripe sends them
    people: list[Person] = field(default_factory=list)  # members who buy nothing themselves
    # The membership changes made before each batch, and once more after the last.
    rounds: list[list[Op]] = field(default_factory=list)

    @property
    def deliveries(self) -> int:
        return sum(len(batch) for batch in self.batches)

    @property
    def teams(self) -> list[Customer]:
        """The teams' accounts, by their number."""
        return sorted((c for c in self.customers if c.team is not None), key=lambda c: c.team or 0)

    def owners(self) -> list[Person]:
        """Each team's owner, who created it and buys for it."""
        return [Person(str(t.user_id), t.email, t.name) for t in self.teams]

    def profiles(self) -> dict[str, Profile]:
        """Each person's profile after all events, whatever the order of delivery: access
        while any grant of their own (a subscription, a one-time purchase) is active, each grant
        as its newest change says, or a grant of a team where they hold a seat; and the newest
        plan change of their own (ordered on its own)."""
        seated = self.seated_access()
        expected = {}
        for customer in self.customers:
            if customer.user_id is None or customer.team is not None:
                continue
            mine = self._of(customer)
            prices = [e.price_id for e in mine if e.price_id]
            expected[customer.user_id] = Profile(
                has_access=any(self.grants(customer).values()) or customer.user_id in seated,
                customer_id=customer.customer_id,
                price_id=prices[-1] if prices else None,
            )
        for person in self.people:
            expected[person.user_id] = Profile(person.user_id in seated, None, None)
        return expected

    def grants(self, customer: Customer, sent: set[str] | None = None) -> dict[str, bool]:
        """Each of the customer's grants, by source, active or not: its newest change wins
        (among the events `sent` so far, when given)."""
        found: dict[str, bool] = {}
        for e in self._of(customer):
            if e.grant is not None and e.source is not None and _among(e, sent):
                found[e.source] = e.grant
        return found

    def seats(self, team: Customer, sent: set[str] | None = None) -> int | None:
        """The team's seats: its subscription's newest quantity (ordered on its own; one until
        Stripe names one) while a per-seat subscription is active; None (everyone holds one)
        otherwise."""
        grants = self.grants(team, sent)  # a subscription's is keyed by its id, `sub_...`
        if not any(active for source, active in grants.items() if source.startswith("sub_")):
            return None
        said = [e.quantity for e in self._of(team) if e.quantity is not None and _among(e, sent)]
        return said[-1] if said else 1

    def members(self, upto: int | None = None) -> dict[tuple[int, str], tuple[str, bool]]:
        """(team, member) -> (role, holds a seat) after every change and event, or as round
        `upto` of membership changes left them (made once the batches before it settled)."""
        sent = None if upto is None else self.sent_before(upto)
        done = self.rounds if upto is None else self.rounds[: upto + 1]
        found = {}
        for team, roster in zip(self.teams, rosters(self.owners(), done), strict=True):
            assert team.team is not None
            seated = roster.seated(self.seats(team, sent))
            for user, member in roster.members.items():
                found[(team.team, user)] = (member.role, user in seated)
        return found

    def seated_access(self, upto: int | None = None) -> set[str]:
        """The people who hold a seat in a team with access (as round `upto` left them)."""
        sent = None if upto is None else self.sent_before(upto)
        return {
            user
            for (k, user), (_, seat) in self.members(upto).items()
            if seat and any(self.grants(self.teams[k], sent).values())
        }

    def access(self, upto: int) -> dict[str, bool]:
        """Each team member's access as round `upto` of membership changes left it: their own
        grants' (as the batches before it set them) or a seated team's."""
        sent = self.sent_before(upto)
        seated = self.seated_access(upto)
        own = {
            c.user_id: any(self.grants(c, sent).values())
            for c in self.customers
            if c.user_id is not None and c.team is None
        }
        return {user: own.get(user, False) or user in seated for _, user in self.members(upto)}

    def sent_before(self, index: int) -> set[str]:
        """The events delivered (and settled) before batch `index`."""
        return {e.event_id for batch in self.batches[:index] for e in batch}

    def _of(self, customer: Customer) -> list[Planned]:
        return sorted((e for e in self.events if e.customer == customer), key=lambda e: e.created)

    def emails(self, outcomes: dict[str, str]) -> set[tuple[str, str, str]]:
        """(idempotency key, kind, recipient) of every e-mail the events call for, once each.

        A mail about an access change is due when access applied the change (`outcomes`, its
        ledger); whether an older change arrives after a newer one depends on delivery order.
        """
        due = [
            e
            for e in self.events
            if e.email and (e.announced_on is None or outcomes.get(e.event_id) == e.announced_on)
        ]
        mails = {(key, str(e.email), e.customer.email) for e in due if (key := e.email_key())}
        # A guest's checkout also sends its address a sign-in link, under its session.
        return mails | {
            (f"invited_{e.session['id']}/signin-link", "signin-link", e.customer.email)
            for e in due
            if e.guest and e.session
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


def generate(
    *, seed: int, customers: int, events: int, ghosts: int, batches: int, teams: int = 0
) -> Scenario:
    rng = random.Random(seed)
    people = [_customer(rng, i, ghost=i >= customers) for i in range(customers + ghosts)]
    owners = rng.sample(people[:customers], teams)
    people += [_team(people[-1].index + 1 + k, k, owner) for k, owner in enumerate(owners)]
    planned: list[Planned] = []
    lines = [
        Timeline(c, random.Random(rng.random()), EPOCH + rng.randint(0, 86_400)) for c in people
    ]
    living = [line for line in lines if line.customer.user_id is not None]
    for line in lines:
        if line.customer.user_id is None:
            line.subscription = f"sub_ghost{line.customer.index}"
            planned += renewal(line)
        else:  # a customer's life starts with a checkout
            line.events += _next(line)
            planned += line.events
    while len(planned) < events:
        line = rng.choice(living)
        produced = _next(line)
        line.events += produced
        planned += produced
    first = [e for e in planned if e.links]
    rest = _cut(_sent(rng, [e for e in planned if not e.links and e.customer.user_id]), batches - 1)
    _after(rng, rest, {e.event_id for e in first})
    # Each ghost renewal is sent once, alone, in a batch of its own after the others. The
    # emulator retries a push that can only fail up to the dead-letter limit only while it fails
    # alone: with others failing beside it, it stops retrying some (real Pub/Sub slows down, then
    # goes on), and the replay that restarts them starts their count of attempts again.
    alone = [[e] for e in planned if e.customer.user_id is None]
    scenario = Scenario(
        seed=seed, customers=people, events=planned, batches=[_sent(rng, first), *rest, *alone]
    )
    return _with_teams(rng, scenario, owners=teams)


def _with_teams(rng: random.Random, scenario: Scenario, *, owners: int) -> Scenario:
    """The scenario with its membership changes: a round before each batch (the first before
    any event, as teams are made), and one after the last."""
    if not owners:
        return scenario
    extra = [_person(rng, n) for n in range(2 * owners)]
    buyers = [c for c in scenario.customers if c.user_id is not None and c.team is None]
    pool = [*(Person(str(c.user_id), c.email, c.name) for c in buyers), *extra]
    teams = [Roster() for _ in scenario.teams]
    for roster, owner in zip(teams, scenario.owners(), strict=True):
        roster.join(owner.user_id, "owner")
    rounds = []
    for index in range(len(scenario.batches) + 1):
        sent = scenario.sent_before(index)

        def seats(k: int, sent: set[str] = sent) -> int | None:
            return scenario.seats(scenario.teams[k], sent)

        rounds.append(plan_round(rng, scenario.owners(), teams, pool, seats, first=index == 0))
    return replace(scenario, people=extra, rounds=rounds)


def _among(e: Planned, sent: set[str] | None) -> bool:
    return sent is None or e.event_id in sent


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


def _team(index: int, number: int, owner: Customer) -> Customer:
    """A team's account: its owner buys for it, and hears of its purchases."""
    return Customer(
        index=index,
        user_id=owner.user_id,
        email=owner.email,
        name=owner.name,
        customer_id=f"cus_team{number}",
        price_id=SEAT_PRICE,
        team=number,
    )


def _person(rng: random.Random, n: int) -> Person:
    """Someone who joins teams and buys nothing."""
    user_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return Person(user_id, f"member{n}@example.com", f"Member {n}")


def _next(line: Timeline) -> list[Planned]:
    steps = STEPS if line.customer.team is None else TEAM_STEPS
    choices = [(weight, step) for weight, when, step in steps.values() if when(line)]
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
