"""Seats were added to a team: this member, who had none, holds one again."""

from __future__ import annotations

from typing import Any

from catalogue.rules import EmailProduct
from core.app_events import TEAM_SEAT_RESTORED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind, named_team
from emails.props import EmailProps, NamedTeam
from emails.subjects import fit


class TeamSeatRestoredProps(EmailProps):
    """Which team gave the seat back (quoted, with who named it)."""

    team: NamedTeam | None = None


def subject(p: TeamSeatRestoredProps, brand: Brand) -> str:
    # The team's name is someone's words: the body quotes it beside them, the subject names none.
    return fit("Your team seat on ", brand.product_name, " is back")


def _restored(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any]:
    return {"team": named_team(event.object)}


KIND = Kind(
    name="team-seat-restored",
    props=TeamSeatRestoredProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Grace Hopper",
        "team": {
            "name": "Analytical Engines Ltd",
            "named_by": {"email": "ada@analytical.example.com", "name": "Ada Lovelace"},
        },
    },
    triggers={TEAM_SEAT_RESTORED: _restored},
)
