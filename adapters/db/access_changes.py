"""A batch of access changes in two round trips to Postgres: one function call claims the
events, locks their profiles and entitlements and reads them (sent with BEGIN), one statement
writes everything the batch decided (sent with COMMIT). Supabase is an internet hop away: each
round trip costs more than the statements do. The decisions are the caller's
(`subscribers.changes`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.db import entitlements, ledger, profiles
from adapters.db.pool import Statement
from adapters.db.profiles import Profile
from core.entitlements import Entitlement
from core.events import Event

_PROFILE_DATES = ("access_changed_at", "price_changed_at")
_ENTITLEMENT_DATES = ("current_period_end", "trial_end", "ended_at", "changed_at")

# The first round trip: the baseline migration defines the function.
READ = (
    "select public.access_claim(%(consumer)s, %(ids)s::text[], %(types)s::text[],"
    " %(created)s::timestamptz[], %(customers)s::text[]) as read"
)


@dataclass(frozen=True)
class Read:
    """What the first round trip found."""

    claimed: set[str]
    profiles: dict[str, Profile]  # by customer id, locked
    held: dict[str, list[Entitlement]]  # by user id, locked
    recorded: dict[str, str]  # the ledger's outcomes of events claimed before (redeliveries)
    # The profiles of the redeliveries' customers, as committed (not locked): whom a
    # redelivery announces to again.
    known: dict[str, Profile]


def read(consumer: str, items: Sequence[tuple[Event, str]]) -> Statement:
    """Claim these events (each with its customer id), lock the profiles of those claimed now
    and their entitlements, and read the outcomes of those claimed before."""
    return Statement(
        READ,
        {
            "consumer": consumer,
            "ids": [event.id for event, _ in items],
            "types": [event.type for event, _ in items],
            "created": [event.created for event, _ in items],
            "customers": [customer for _, customer in items],
        },
    )


def parse(answer: Mapping[str, Any] | None) -> Read:
    if answer is None or not isinstance(answer.get("read"), Mapping):
        raise RuntimeError("access_claim answered nothing")
    row = answer["read"]
    found: dict[str, list[Entitlement]] = {}
    locked = [_profile(p) for p in row["profiles"]]
    for profile in locked:
        found[profile.id] = []
    for held in row["held"]:
        entitlement = _entitlement(held)
        found.setdefault(entitlement.user_id, []).append(entitlement)
    return Read(
        claimed=set(row["claimed"]),
        profiles={p.customer_id: p for p in locked if p.customer_id},
        held=found,
        recorded=dict(row["recorded"]),
        known={p.customer_id: p for p in map(_profile, row["known"]) if p.customer_id},
    )


def write(
    consumer: str,
    *,
    changed: Sequence[Entitlement],
    adopted: Mapping[str, str],
    states: Mapping[str, tuple[Profile, str | None]],
    released: Sequence[str],
    settled: Mapping[str, str],
) -> Statement | None:
    """Everything a batch decided, as one statement of data-modifying CTEs (each on rows the
    others do not touch); None when there is nothing to write."""
    parts = entitlements.writes(changed, adopted=adopted)
    if states:
        parts.append((profiles.SAVE_STATES, list(profiles.state_columns(states))))
    if released:
        parts.append((ledger.RELEASE, [consumer, list(released)]))
    if settled:
        parts.append((ledger.SETTLE_MANY, [list(settled), list(settled.values()), consumer]))
    if not parts:
        return None
    ctes = ", ".join(f"w{n} as ({sql} returning 1)" for n, (sql, _) in enumerate(parts))
    counts = " + ".join(f"(select count(*) from w{n})" for n in range(len(parts)))  # noqa: S608
    params = [value for _, values in parts for value in values]
    return Statement(f"with {ctes} select {counts} as written", params)


def _profile(row: Mapping[str, Any]) -> Profile:
    return Profile.from_row({**row, **_dates(row, _PROFILE_DATES)})


def _entitlement(row: Mapping[str, Any]) -> Entitlement:
    fields = {**row, **_dates(row, _ENTITLEMENT_DATES), "user_id": str(row["user_id"])}
    return Entitlement(**fields)


def _dates(row: Mapping[str, Any], names: Sequence[str]) -> dict[str, datetime | None]:
    return {n: datetime.fromisoformat(row[n]) if row[n] else None for n in names}
