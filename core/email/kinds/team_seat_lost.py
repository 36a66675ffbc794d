"""A team's seats fell below its members: this member keeps their membership, not the access."""

from __future__ import annotations

from typing import Any

from core.app_events import TEAM_SEAT_LOST
from core.email.brand import Brand
from core.email.kind import Kind, ProductFacts
from core.email.props import EmailProps, Text
from core.email.subjects import fit
from core.events import Event


class TeamSeatLostProps(EmailProps):
    """Which team, and how many seats it has now."""

    team_name: Text
    seats: int


def subject(p: TeamSeatLostProps, _: Brand) -> str:
    return fit("Your seat in ", p.team_name, " ended")


def _lost(event: Event, _: ProductFacts | None, site: str) -> dict[str, Any]:
    return {"team_name": event.object["team_name"], "seats": event.object["seats"]}


KIND = Kind(
    name="team-seat-lost",
    props=TeamSeatLostProps,
    subject=subject,
    sample={"customer_name": "Grace Hopper", "team_name": "Analytical Engines Ltd", "seats": 2},
    triggers={TEAM_SEAT_LOST: _lost},
)
