"""A balance of credits fell under a tenth of what was granted: what is left, as of when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import CREDITS_LOW
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps, Link, Text
from emails.subjects import fit


class CreditsLowProps(EmailProps):
    """Told once a period, when a consumption first took the balance under 10% of the grant."""

    feature: Text
    balance: int
    granted: int
    as_of: datetime  # the consumption that took it there: the balance may be lower by now
    # A team's pool, which its seated members share (its name, its members' words, is left out).
    shared: bool = False
    dashboard_url: Link | None = None


def subject(p: CreditsLowProps, _: Brand) -> str:
    return fit("Your ", p.feature, " credits are running low")


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
    },
    triggers={CREDITS_LOW: _low},
)
