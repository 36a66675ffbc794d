"""Teams in the fault run: who joins, leaves, is removed or changes role between two batches of
Stripe events (through the API, in a fixed order), and who holds a seat by the rules.

A team's owner (its creator, who stays an owner throughout) buys for it; members are drawn from
the customers and from people who never buy anything themselves. Each round of changes happens
once the batch before it has settled, so the seats it meets are the model's after that batch: an
invitation past them is refused (409) and changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

ROLES = ("owner", "admin", "member")
_RANK = {role: n for n, role in enumerate(ROLES)}


@dataclass(frozen=True)
class Person:
    """Someone with a profile who may be a member."""

    user_id: str
    email: str
    name: str


@dataclass(frozen=True)
class Op:
    """One membership change through the API and the status its route answers."""

    kind: Literal["invite", "accept", "remove", "role"]
    team: int
    actor: Person  # who calls the route (the invitee accepts; a member who leaves removes self)
    person: Person  # who is invited, accepts, is removed or gets the role
    status: int
    role: str | None = None

    def describe(self) -> str:
        what = f"{self.kind} {self.person.email}" + (f" as {self.role}" if self.role else "")
        return f"team {self.team}: {what} by {self.actor.email}"


@dataclass
class Member:
    role: str
    joined: int  # the order of joining; joining again is a new join


@dataclass
class Roster:
    """A team's members as the changes so far left them."""

    members: dict[str, Member] = field(default_factory=dict)
    joins: int = 0

    def apply(self, op: Op) -> None:
        if op.status >= 300:
            return  # refused: nothing changed
        who = op.person.user_id
        if op.kind == "accept":
            assert op.role is not None
            self.join(who, op.role)
        elif op.kind == "remove":
            del self.members[who]
        elif op.kind == "role":
            assert op.role is not None
            self.members[who].role = op.role

    def join(self, user_id: str, role: str) -> None:
        self.joins += 1
        self.members[user_id] = Member(role, self.joins)

    def seated(self, total: int | None) -> set[str]:
        """Seats go to owners, then admins, then members, each in the order they joined;
        everyone holds one when the team sells no seats (`total` None)."""
        order = sorted(
            self.members, key=lambda u: (_RANK[self.members[u].role], self.members[u].joined)
        )
        return set(order if total is None else order[:total])


def rosters(owners: Sequence[Person], rounds: Sequence[Sequence[Op]]) -> list[Roster]:
    """Each team's members after these rounds of changes."""
    found = []
    for owner in owners:
        roster = Roster()
        roster.join(owner.user_id, "owner")
        found.append(roster)
    for ops in rounds:
        for op in ops:
            found[op.team].apply(op)
    return found


def plan_round(
    rng: random.Random,
    owners: Sequence[Person],
    teams: list[Roster],
    pool: Sequence[Person],
    seats: Callable[[int], int | None],
    *,
    first: bool,
) -> list[Op]:
    """One round of changes, applied to `teams` as they are planned: removals and role changes,
    then invitations (a seat each while pending), then their acceptances, in that order."""
    ops: list[Op] = []
    accepts: list[Op] = []
    by_id = {p.user_id: p for p in [*pool, *owners]}
    for k, (owner, roster) in enumerate(zip(owners, teams, strict=True)):
        changes = []
        if not first and rng.random() < 0.45:
            changes.append(_removal(rng, k, owner, roster, by_id))
            roster.apply(changes[-1])
        if not first and rng.random() < 0.35:
            changes.append(_role_change(rng, k, owner, roster, by_id))
            roster.apply(changes[-1])
        ops += changes
        pending, total = 0, seats(k)
        invited = rng.randint(2, 3) if first else rng.choice([0, 1, 1, 2])
        candidates = [p for p in pool if p.user_id not in roster.members]
        for person in rng.sample(candidates, min(invited, len(candidates))):
            admins = [by_id[u] for u, m in roster.members.items() if m.role == "admin"]
            inviter = rng.choice([owner, *admins])
            role = "admin" if rng.random() < 0.25 else "member"
            has_seat = total is None or len(roster.members) + pending < total
            ops.append(Op("invite", k, inviter, person, 201 if has_seat else 409, role))
            if has_seat:
                pending += 1
                accepts.append(Op("accept", k, person, person, 200, role))
    for op in accepts:
        teams[op.team].apply(op)
    return [*ops, *accepts]


def _removal(
    rng: random.Random, k: int, owner: Person, roster: Roster, by_id: dict[str, Person]
) -> Op:
    others = [u for u in roster.members if u != owner.user_id]
    if not others:
        return Op("remove", k, owner, owner, 409)  # the last owner cannot leave
    target = rng.choice(others)
    role = roster.members[target].role
    admins = [u for u, m in roster.members.items() if m.role == "admin" and u != target]
    draw = rng.random()
    if draw < 0.3:
        actor = by_id[target]  # leaves
    elif role == "member" and admins and draw < 0.6:
        actor = by_id[rng.choice(admins)]
    else:
        actor = owner
    return Op("remove", k, actor, by_id[target], 204)


def _role_change(
    rng: random.Random, k: int, owner: Person, roster: Roster, by_id: dict[str, Person]
) -> Op:
    others = [u for u in roster.members if u != owner.user_id]
    if not others:
        return Op("role", k, owner, owner, 409, "member")  # the last owner stays one
    target = rng.choice(others)
    current = roster.members[target].role
    role = rng.choice([r for r in ROLES if r != current])
    return Op("role", k, owner, by_id[target], 200, role)
