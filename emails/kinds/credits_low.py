"""What was used of a grant of credits reached one of the founder's thresholds (CREDITS_ALERTS:
`app.credits.threshold`), or, announced by the previous release, fell under a tenth of what was
granted (`app.credits.low`): what is left, as of when, and what comes next, true for a period's
credits, a pack, a team's pool and a plan billed on a meter alike."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import CREDITS_LOW, CREDITS_THRESHOLD
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps, Link, Text
from emails.subjects import fit


class CreditsLowProps(EmailProps):
    """Told once a threshold and period, when a consumption first took what was used there."""

    feature: Text
    balance: int
    granted: int
    as_of: datetime  # the consumption that took it there: the balance may be lower by now
    # A team's pool, which its seated members share (its name, its members' words, is left out).
    shared: bool = False
    # The threshold reached (percent of the grant used); None: the previous release's "under a
    # tenth", which said nothing more of what comes next.
    percent: int | None = None
    used: int | None = None
    resets_at: datetime | None = None  # when what is left of the period's credits ends
    billed: bool = False  # a meter bills what goes beyond the credits, as overage
    cap: int | None = None  # the overage units it bills per period at most
    dashboard_url: Link | None = None


def subject(p: CreditsLowProps, _: Brand) -> str:
    if p.percent is None:
        return fit("Your ", p.feature, " credits are running low")
    if p.balance <= 0:
        return fit("Your ", p.feature, " credits are used up")
    return fit(f"You have used {p.percent}% of your ", p.feature, " credits")


def _low(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any] | None:
    obj = event.object
    if not isinstance(obj.get("balance"), int) or not isinstance(obj.get("granted"), int):
        return None
    return {
        "feature": obj.get("feature"),
        "balance": obj["balance"],
        "granted": obj["granted"],
        "as_of": obj.get("at") or event.created,
        "shared": bool(obj.get("team_name")),
    }


def _threshold(event: Event, product: EmailProduct | None, site: str) -> dict[str, Any] | None:
    found = _low(event, product, site)
    obj = event.object
    if found is None or not isinstance(obj.get("percent"), int):
        return None
    return {
        **found,
        "percent": obj["percent"],
        "used": obj.get("used"),
        "resets_at": obj.get("resets_at"),
        "billed": bool(obj.get("billed")),
        "cap": obj.get("cap"),
    }


KIND = Kind(
    name="credits-low",
    props=CreditsLowProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "feature": "generations",
        "balance": 9,
        "granted": 100,
        "as_of": datetime(2026, 11, 21, 14, 30),
        "shared": True,
        "percent": 90,
        "used": 91,
        "resets_at": datetime(2026, 12, 1, 0, 0),
        "billed": False,
        "cap": None,
    },
    triggers={CREDITS_LOW: _low, CREDITS_THRESHOLD: _threshold},
)
