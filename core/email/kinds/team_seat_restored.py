"""Seats were added to a team: this member, who had none, holds one again."""

from __future__ import annotations

from typing import Any

from core.app_events import TEAM_SEAT_RESTORED
from core.email.brand import Brand
from core.email.kind import Kind, ProductFacts
from core.email.props import EmailProps, Text
from core.email.subjects import fit
from core.events import Event


class TeamSeatRestoredProps(EmailProps):
    """Which team gave the seat back."""

    team_name: Text


def subject(p: TeamSeatRestoredProps, _: Brand) -> str:
    return fit("Your seat in ", p.team_name, " is back")


def _restored(event: Event, _: ProductFacts | None, site: str) -> dict[str, Any]:
    return {"team_name": event.object["team_name"]}


KIND = Kind(
    name="team-seat-restored",
    props=TeamSeatRestoredProps,
    subject=subject,
    sample={"customer_name": "Grace Hopper", "team_name": "Analytical Engines Ltd"},
    triggers={TEAM_SEAT_RESTORED: _restored},
)
