"""What a person is told of one grant, in words: the one place that decides them.

Every page, mail and answer that describes a grant (GET /api/me's `summary`, the dashboard, the
success page, the purchase confirmation) says what this function says, so what is told follows
from what was granted: a comp (free, until when; who gave it is not told), a free trial (when it
ends, when the first charge comes and how much, or that without a card it ends), a credit pack
(what it added, what is left), a subscription, a one-time purchase, and any of them held through
a team's seat (the team named).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

# What a grant is, as a person would name it.
Told = Literal["comp", "trial", "pack", "subscription", "purchase"]
# What Stripe does when a trial ends with no payment method (`trial_settings.end_behavior`).
WithoutCard = Literal["cancel", "pause", "create_invoice"]

LABELS: dict[Told, str] = {
    "comp": "Complimentary",
    "trial": "Free trial",
    "pack": "Credit pack",
    "subscription": "Subscription",
    "purchase": "One-time purchase",
}
_NOUNS: dict[Told, str] = {
    "comp": "Complimentary access",
    "trial": "A free trial",
    "pack": "A credit pack",
    "subscription": "A subscription",
    "purchase": "A one-time purchase",
}


@dataclass(frozen=True)
class Credits:
    """An amount of one feature's credits; `name` as a person reads it (the feature's display
    name, else its key)."""

    name: str
    amount: int


@dataclass(frozen=True)
class GrantFacts:
    """What is known of one grant, as plain data; None: not known, and then not told."""

    kind: Literal["subscription", "purchase", "comp"]
    active: bool
    status: str  # Stripe's subscription status; `paid` or `refunded` for a purchase
    current_period_end: datetime | date | None = None  # a comp's end; a subscription's renewal
    cancel_at_period_end: bool = False
    trial_end: datetime | date | None = None
    ended_at: datetime | date | None = None
    team: str | None = None  # held through a seat of this team
    price: str | None = None  # one period's price, or the purchase's, already formatted
    interval: str | None = None  # month or year; None: one-time
    per_seat: bool = False  # `price` is a seat's
    credits: Sequence[Credits] = ()  # what a pack adds once
    balance: Sequence[Credits] = ()  # what is left now of those features
    has_card: bool | None = None  # a payment method is on file (None: not known)
    without_card: WithoutCard = "cancel"


@dataclass(frozen=True)
class GrantWords:
    """What a page or a mail says of a grant: what it is, and one summary to show as is."""

    told: Told
    label: str
    summary: str


def told_as(facts: GrantFacts) -> Told:
    """What the grant is to the person holding it."""
    if facts.kind == "comp":
        return "comp"
    if facts.kind == "purchase":
        return "pack" if facts.credits else "purchase"
    if facts.trial_end is not None and facts.status == "trialing":
        return "trial"
    return "subscription"


def words(facts: GrantFacts) -> GrantWords:
    """The words for one grant."""
    told = told_as(facts)
    # The team's name quoted: its members wrote it, and it may read like anything.
    noun = _NOUNS[told] + (f" through the team “{facts.team}”" if facts.team else "")
    rest = _RESTS[told](facts)
    return GrantWords(told=told, label=LABELS[told], summary=f"{noun}{rest}")


def _comp(f: GrantFacts) -> str:
    if not f.active:
        ended = f.ended_at or f.current_period_end
        return f", ended on {day(ended)}." if ended else ", ended."
    if f.current_period_end is None:
        return ", free with no end date: nothing is charged."
    return f", free until {day(f.current_period_end)}: nothing is charged."


def _trial(f: GrantFacts) -> str:
    end = day(f.trial_end)
    if not f.active:
        return f", ended on {day(f.ended_at or f.trial_end)}."
    if f.cancel_at_period_end:
        return f" until {end}, cancelled: it ends then and nothing is charged."
    if f.has_card is False:
        if f.without_card == "create_invoice":
            bill = f"the first invoice, {f.price}," if f.price else "the first invoice"
            return f" until {end}. No card on file: {bill} comes on {end}, to pay then."
        stop = "pauses" if f.without_card == "pause" else "ends"
        costs = f"; with one, the first charge, {f.price}, is on {end}" if f.price else ""
        return f" until {end}. No card on file: it {stop} then unless you add one{costs}."
    first = (
        f"The first charge, {f.price}, is on {end}" if f.price else f"The first charge is on {end}"
    )
    then = f", then one every {f.interval} until you cancel." if f.price and f.interval else "."
    unsure = " Without a card on file, it ends then instead." if f.has_card is None else ""
    return f" until {end}. {first}{then}{unsure}"


def _pack(f: GrantFacts) -> str:
    if not f.active:
        return ", refunded: its credits are taken back."
    added = f": {counted(f.credits)} added to your balance"
    left = f"; {counted(f.balance)} left now" if f.balance else ""
    return f"{added}{left}."


def _subscription(f: GrantFacts) -> str:
    renewal = day(f.current_period_end) if f.current_period_end else None
    if not f.active:
        return f", ended on {day(f.ended_at)}." if f.ended_at else ", ended."
    if f.cancel_at_period_end:
        return f", cancelled: it ends on {renewal}." if renewal else ", cancelled."
    if f.status == "past_due":
        return (
            ": the last payment failed. The card is being tried again, and access stays meanwhile."
        )
    costs = f": {_every(f)}" if f.price and f.interval else ""
    return f", renewing on {renewal}{costs}." if renewal else f", renewing{costs}."


def _purchase(f: GrantFacts) -> str:
    if not f.active:
        return ", refunded: its access has ended."
    return ": yours to keep, nothing renews."


_RESTS = {
    "comp": _comp,
    "trial": _trial,
    "pack": _pack,
    "subscription": _subscription,
    "purchase": _purchase,
}


def _every(f: GrantFacts) -> str:
    seat = " a seat" if f.per_seat else ""
    return f"{f.price}{seat} every {f.interval}"


def day(when: datetime | date | None) -> str:
    """A day as people read it: `Jan 31, 2027` (a datetime's own day, as stored: UTC)."""
    if when is None:
        return "a day not known yet"
    return f"{when:%b} {when.day}, {when.year}"


def plural(count: int, one: str, many: str | None = None) -> str:
    """`1 seat`, `3 seats`: a count with its noun, thousands grouped."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def counted(credits: Sequence[Credits]) -> str:
    """`500 credits for Generations and 1 credit for Exports`."""
    parts = [f"{plural(c.amount, 'credit')} for {c.name}" for c in credits]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def feature_name(key: str, names: Mapping[str, str] | None = None) -> str:
    """A feature as a person reads it: its display name (Stripe's Entitlements feature `name`)
    when the catalogue has one, else its key; a repository feature, the repository."""
    if names and names.get(key):
        return names[key]
    if key.startswith("github:"):
        return f"the {key.removeprefix('github:')} repository"
    return key
