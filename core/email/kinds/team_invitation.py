"""Someone of a team invited this address to join it: the link accepts the invitation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime

from core.app_events import TEAM_INVITED
from core.email.brand import Brand
from core.email.kind import SAMPLE_SITE, Kind, ProductFacts
from core.email.props import EmailProps, Link, Name, Text
from core.email.subjects import fit
from core.events import Event


class TeamInvitationProps(EmailProps):
    """An invitation to a team: who invited, to which team, as what, and the link to accept."""

    team_name: Text
    inviter_name: Name | None = None
    role: Name
    accept_url: Link
    expires_at: AwareDatetime


def subject(p: TeamInvitationProps, _: Brand) -> str:
    return fit("You are invited to join ", p.team_name)


def _invited(event: Event, _: ProductFacts | None, site: str) -> dict[str, Any]:
    invitation = event.object
    return {
        "team_name": invitation["team_name"],
        "inviter_name": invitation.get("inviter_name"),
        "role": invitation["role"],
        "accept_url": invitation["accept_url"],
        "expires_at": invitation["expires_at"],
    }


KIND = Kind(
    name="team-invitation",
    props=TeamInvitationProps,
    subject=subject,
    sample={
        "customer_name": "Grace Hopper",
        "team_name": "Analytical Engines Ltd",
        "inviter_name": "Ada Lovelace",
        "role": "member",
        "accept_url": f"{SAMPLE_SITE}/invitations/accept?token=pZ3v8Qm1xL0rT5yWk2nH7cJ4dF6gA9sE",
        "expires_at": datetime(2026, 11, 28, 15, 30, tzinfo=UTC),
    },
    triggers={TEAM_INVITED: _invited},
)
