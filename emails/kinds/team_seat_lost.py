"""A team's seats fell below its members: this member keeps their membership, not the access."""

from __future__ import annotations

from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import TEAM_SEAT_LOST
from core.brand import Brand
from core.events import Event
from emails.kind import Kind, named_team
from emails.props import EmailProps, NamedTeam
from emails.subjects import fit


class TeamSeatLostProps(EmailProps):
    """Which team (quoted, with who named it), and how many seats it has now."""

    team: NamedTeam | None = None
    seats: int


def subject(p: TeamSeatLostProps, brand: Brand) -> str:
    # The team's name is someone's words: the body quotes it beside them, the subject names none.
    return fit("Your team seat on ", brand.product_name, " ended")


def _lost(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any]:
    return {"team": named_team(event.object), "seats": event.object["seats"]}


KIND = Kind(
    name="team-seat-lost",
    props=TeamSeatLostProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Grace Hopper",
        "team": {
            "name": "Analytical Engines Ltd",
            "named_by": {"email": "ada@analytical.example.com", "name": "Ada Lovelace"},
        },
        "seats": 2,
    },
    triggers={TEAM_SEAT_LOST: _lost},
)
