"""Someone of a team invited this address to join it: the link accepts the invitation.

The team's name and the inviter's name are what people typed, mailed from the product's own
sender to an address anyone may type: the mail quotes the name and says who invited, by the
address they signed in with, in the subject and the body."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime

from catalogue.rules import EmailProduct
from core.app_events import TEAM_INVITED
from core.brand import Brand
from core.events import Event
from emails.kind import Kind
from emails.props import Author, EmailProps, Link, Name, Text
from emails.subjects import ATTRIBUTED_SUBJECT_LIMIT, first_fitting


class TeamInvitationProps(EmailProps):
    """An invitation to a team: who invited, to which team, as what, and the link to accept."""

    team_name: Text
    inviter: Author
    role: Name
    accept_url: Link
    expires_at: AwareDatetime


def subject(p: TeamInvitationProps, brand: Brand) -> str:
    team = f'the team "{p.team_name}"'
    return first_fitting(
        f"{p.inviter} invited you to {team} on {brand.product_name}",
        f"{p.inviter.email} invited you to {team} on {brand.product_name}",
        f"{p.inviter.email} invited you to {team}",
    )


def _invited(event: Event, _: EmailProduct | None, site: str) -> dict[str, Any] | None:
    invitation = event.object
    inviter = invitation.get("inviter")
    if not isinstance(inviter, Mapping) or not inviter.get("email"):
        # Published by a revision that did not name the inviter's address (during a release):
        # not sent unattributed. The invitation stands; resending it mails it.
        return None
    return {
        "team_name": invitation["team_name"],
        "inviter": {"email": inviter["email"], "name": inviter.get("name")},
        "role": invitation["role"],
        "accept_url": invitation["accept_url"],
        "expires_at": invitation["expires_at"],
    }


KIND = Kind(
    name="team-invitation",
    props=TeamInvitationProps,
    subject=subject,
    sample=lambda site: {
        "customer_name": "Grace Hopper",
        "team_name": "Analytical Engines Ltd",
        "inviter": {"email": "ada@analytical.example.com", "name": "Ada Lovelace"},
        "role": "member",
        "accept_url": f"{site}/invitations/accept?token=pZ3v8Qm1xL0rT5yWk2nH7cJ4dF6gA9sE",
        "expires_at": datetime(2026, 11, 28, 15, 30, tzinfo=UTC),
    },
    triggers={TEAM_INVITED: _invited},
    subject_limit=ATTRIBUTED_SUBJECT_LIMIT,
)
