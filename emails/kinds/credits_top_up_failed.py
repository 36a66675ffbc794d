"""An automatic top-up could not be charged (`app.credits.top_up_failed`): the bank declined the
saved card, the card needs its holder's authentication, or no card is saved. Top-up is turned
off for the feature before this is sent, so the mail says so, and where to buy a pack or turn it
on again; nothing was charged for this top-up."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import CREDITS_TOP_UP_FAILED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import EmailProps, Link, Text
from emails.subjects import fit


class CreditsTopUpFailedProps(EmailProps):
    """Told once per top-up claimed (the event's id names the account, feature and claim)."""

    feature: Text
    pack_name: Text  # the pack top-up was to buy
    at: datetime  # when the charge was refused
    # Why: the card needs the holder's authentication (a bank's check a charge made without them
    # cannot pass), or no card is saved; else the bank declined it.
    authentication: bool = False
    no_card: bool = False
    # A team's pool, which its seated members share (its name, its members' words, is left out).
    shared: bool = False
    manage_url: Link | None = None


def subject(p: CreditsTopUpFailedProps, _: Brand) -> str:
    return fit("Auto top-up of ", p.feature, " credits is off")


def _failed(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any] | None:
    obj = event.object
    if not obj.get("feature") or not obj.get("pack_name"):
        return None
    return {
        "feature": obj["feature"],
        "pack_name": obj["pack_name"],
        "at": obj.get("at") or event.created,
        "authentication": obj.get("reason") == "authentication_required",
        "no_card": obj.get("reason") == "no_payment_method",
        "shared": bool(obj.get("team_name")),
    }


KIND = Kind(
    name="credits-top-up-failed",
    props=CreditsTopUpFailedProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Ada Lovelace",
        "feature": "generations",
        "pack_name": "500 generations",
        "at": datetime(2026, 11, 21, 14, 30),
        "authentication": False,
        "no_card": False,
        "shared": True,
    },
    triggers={CREDITS_TOP_UP_FAILED: _failed},
)
