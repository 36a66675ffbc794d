"""The words for a grant as GET /api/me answers them: a stored grant's facts gathered for
`access.grant_words`, which decides what is said."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from access.entitlements_store import Held
from access.grant_words import Credits, GrantFacts, GrantWords, feature_name, words
from core.money import format_major
from credits.rules import Credits as HeldCredits


def of_held(
    held: Held,
    credits: Sequence[HeldCredits] = (),
    names: Mapping[str, str] | None = None,
) -> GrantWords:
    """The words for one grant the person has, with the balance of the pool it fills (a pack's
    credits go to the account that holds it: the person's own, or the team's)."""
    e = held.entitlement
    names = {**(held.feature_names or {}), **(names or {})}
    added = sorted((held.pack_credits or {}).items())
    pool = [c for c in credits if c.team_id == held.team_id]
    balance = [
        Credits(feature_name(f, names), c.balance) for f, _ in added for c in pool if c.feature == f
    ]
    price = (
        format_major(held.price, held.currency)
        if held.price is not None and held.currency
        else None
    )
    return words(
        GrantFacts(
            kind=e.kind,
            active=e.active,
            status=e.status,
            current_period_end=e.current_period_end,
            cancel_at_period_end=e.cancel_at_period_end,
            trial_end=e.trial_end,
            ended_at=e.ended_at,
            team=held.team_name,
            price=price,
            interval=held.billing_interval,
            per_seat=held.per_seat,
            credits=[Credits(feature_name(f, names), n) for f, n in added],
            balance=balance,
        )
    )
