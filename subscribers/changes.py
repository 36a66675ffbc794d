"""Access changes folded over the profiles and entitlements they lock, to be written at once.

A batch of renewals and subscription changes costs Postgres about what one change does: two
round trips (`adapters.db.access_changes`), one that claims the events and locks and reads
their profiles and entitlements, one that writes what the fold decided. The rules are
`ordering.decide`'s, applied in the events' order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from adapters.db.profiles import Profile
from core.access import AccessChange
from core.entitlements import Entitlement
from core.events import Event
from subscribers.ordering import TieStatuses, decide


class ProfileNotLinked(RuntimeError):
    """No profile matches the event yet (its checkout may still be on the way): retry later."""


@dataclass(frozen=True)
class Result:
    """What became of one item: its outcome or the error to retry it with, and whether this
    delivery applied it (False: a redelivery, whose outcome is the one recorded before)."""

    outcome: str | Exception
    claimed: bool


@dataclass
class ChangeBatch:
    """The items of one transaction and what applying them does, before anything is written."""

    items: Sequence[tuple[Event, AccessChange]]
    claimed: set[str]
    # The profiles by customer, as locked (a redelivery's: as committed): whom an announcement
    # goes to, and whether they keep other access.
    before: dict[str, Profile] = field(default_factory=dict)
    # Profile id -> its state after the batch and the last event that set its access.
    states: dict[str, tuple[Profile, str | None]] = field(default_factory=dict)
    # The entitlements the batch changed, by source id, and the carried-over rows it adopted.
    changed: dict[str, Entitlement] = field(default_factory=dict)
    adopted: dict[str, str] = field(default_factory=dict)
    # Event id -> the profile after it, for the events whose change ended a grant.
    ended: dict[str, Profile] = field(default_factory=dict)
    settled: dict[str, str] = field(default_factory=dict)
    _fresh: dict[str, int] = field(default_factory=dict)
    _results: dict[int, str | Exception] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for n, (event, _) in enumerate(self.items):
            if event.id in self.claimed:
                self._fresh.setdefault(event.id, n)

    @property
    def redelivered(self) -> set[str]:
        """Events this transaction did not claim: applied before (or being applied elsewhere)."""
        return {event.id for event, _ in self.items} - self._fresh.keys()

    def apply(
        self,
        locked: Mapping[str, Profile],
        held: Mapping[str, Sequence[Entitlement]],
        tie_statuses: TieStatuses,
    ) -> set[str]:
        """Fold the claimed changes, oldest first, over the locked profiles and their
        entitlements (`held`, by user); returns the claimed events whose customer has no
        profile (their claims are to be undone)."""
        self.before = dict(locked)
        current = dict(locked)
        grants = {user: tuple(found) for user, found in held.items()}
        set_by: dict[str, str] = {}
        unlinked: set[str] = set()
        for n in sorted(self._fresh.values(), key=self._age):
            event, change = self.items[n]
            profile = current.get(change.customer_id)
            if profile is None:
                self._results[n] = ProfileNotLinked(
                    f"no profile for customer {change.customer_id} yet"
                )
                unlinked.add(event.id)
                continue
            applied = decide(
                profile,
                grants.get(profile.id, ()),
                event,
                change.change,
                tie_statuses=tie_statuses,
                price_id=change.price_id,
            )
            current[change.customer_id] = applied.profile
            grants[profile.id] = applied.held
            if applied.access_event_id:
                set_by[profile.id] = applied.access_event_id
                self.changed[applied.stepped.entitlement.source_id] = applied.stepped.entitlement
            if applied.adopted:
                self.adopted[applied.adopted[0]] = applied.adopted[1]
            if applied.stepped.ended_now:
                self.ended[event.id] = applied.profile
            if applied.writes(profile):
                self.states[profile.id] = (applied.profile, set_by.get(profile.id))
            self._results[n] = self.settled[event.id] = applied.outcome
        return unlinked

    def results(self, recorded: Mapping[str, str]) -> list[Result]:
        """Each item's result, in order; `recorded`: the ledger's outcomes of redeliveries."""
        results = []
        for n, (event, _) in enumerate(self.items):
            first = self._fresh.get(event.id)
            if first == n:
                results.append(Result(self._results[n], claimed=True))
            elif first is not None:  # the same event twice in one batch: the copy is a duplicate
                earlier = self._results[first]
                results.append(Result(earlier, claimed=isinstance(earlier, Exception)))
            else:
                results.append(Result(recorded.get(event.id) or "duplicate", claimed=False))
        return results

    def _age(self, n: int) -> tuple[object, str]:
        event = self.items[n][0]
        return event.created, event.id
