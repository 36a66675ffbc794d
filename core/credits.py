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
