"""Credits as plain data: what a consumption answered, and when a balance is low.

A consumption is decided in Postgres in one statement (`public.credit_take`, under the grants'
row locks: the only place that can decide it without a race); this module says what each of its
answers means to the caller, and the rules over balances that need no lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

State = Literal["consumed", "reserved", "released", "refused", "conflict", "unknown"]
# A balance under this share of what was granted is low: its holder is told once a period.
LOW_SHARE = 0.1
LONGEST_KEY = 100  # Stripe's meter event identifier holds at most 100 characters


@dataclass(frozen=True)
class Taken:
    """What one consumption (or its settling) answered: `first` false when its key had
    answered before (nothing more was taken)."""

    state: State
    feature: str
    balance: int = 0
    overage: int = 0  # units beyond the credits, billed on the account's meter
    first: bool = False

    @property
    def allowed(self) -> bool:
        return self.state in ("consumed", "reserved", "released")


@dataclass(frozen=True)
class Credits:
    """An account's credits of one feature, as a person sees them."""

    feature: str
    balance: int
    granted: int
    used: int
    resets_at: datetime | None  # when the current period's credits end; None: a pack's only
    team_id: str | None  # the team whose pool it is; None: the person's own


def not_enough(feature: str) -> str:
    """The refusal a consumption beyond the balance answers."""
    return f"Not enough {feature} credits"


def fell_low(*, before: int, after: int, granted: int) -> bool:
    """Whether this consumption took the balance under `LOW_SHARE` of the grant for the first
    time (later ones, already under, do not: the holder is told once)."""
    line = granted * LOW_SHARE
    return granted > 0 and before >= line > after


@dataclass(frozen=True)
class CreditGrant:
    """Credits a paid period or a pack grants: the products at `price_id` say which and how
    many (`public.products.credits`), so a grant is written once per source and feature."""

    account_id: str
    source: str  # `<subscription>@<invoice>` for a paid period, the checkout session for a pack
    subscription_id: str | None
    price_id: str
    starts_at: datetime
    ends_at: datetime | None  # the period's end; None for a pack (its expiry is the product's)
    event_id: str


@dataclass(frozen=True)
class CreditEnd:
    """Credits taken back at `at`: a subscription's period credits when it ends, or what is
    left of one pack (`source`) when it is refunded in full."""

    subscription_id: str | None
    source: str | None
    at: datetime
