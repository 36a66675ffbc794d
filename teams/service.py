"""Teams: create one, invite by e-mail, accept, change roles, remove, and set the seats.

The rules are teams/rules.py's; the rows are teams/store.py's, whose every membership
change recomputes the affected people's access in its own transaction. A stranger to a team is
told it does not exist (404); a member without the role is refused (403). E-mails are published
on the bus once the change is committed; who lost or got back a seat is told by teams/seats.py,
the one path the access cycle takes too when Stripe's events change the seats.
"""

from __future__ import annotations

import logging
import math
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from access import entitlements_store as entitlements
from access.entitlements_store import Held
from adapters.bus import EventBus, publish_or_unavailable
from adapters.db.pool import Connection, Database
from adapters.github_api import GitHubGateway
from adapters.tokens import User
from core.app_events import TEAM_INVITED
from core.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    ServiceError,
    TooManyRequests,
)
from core.events import app_event
from teams import rules, store
from teams import seats as seat_news
from teams.rules import Refusal, SeatCount
from teams.store import InvitationRow, MemberRow, Team

log = logging.getLogger(__name__)

TEAM_NOT_FOUND = "Team not found"


@dataclass(frozen=True)
class TeamView:
    team: Team
    members: list[MemberRow]
    invitations: list[InvitationRow]
    seats: SeatCount | None
    held: list[Held]


@dataclass(frozen=True)
class Links:
    """Where the invitation e-mail's link points, how long it works, and how many invitation
    mails (new or resent) a team sends in 24 hours, and a person from all their teams."""

    site_url: str
    ttl: timedelta
    daily_limit: int
    person_limit: int


def create_team(*, user: User, name: str, db: Database) -> Team:
    return store.create(db, owner_id=user.id, name=name)


def teams_of(*, user_id: str, db: Database) -> list[Team]:
    """The teams a person belongs to, with their role, access and seat in each."""
    return store.of_user(db, user_id)


def member_of(*, user: User, team_id: str, db: Database) -> Team:
    """The team as the caller sees it; 404 to anyone who is not a member."""
    team = store.membership(db, team_id, user.id) if _is_uuid(team_id) else None
    if team is None:
        raise NotFound(TEAM_NOT_FOUND)
    return team


def manager_of(*, user: User, team_id: str, db: Database) -> Team:
    """The team, for an owner or admin (billing, seats, invitations)."""
    team = member_of(user=user, team_id=team_id, db=db)
    if not rules.manages(team.role):
        raise Forbidden("Only the team's owners and admins may do this")
    return team


def view(*, user: User, team_id: str, db: Database) -> TeamView:
    team = member_of(user=user, team_id=team_id, db=db)
    return TeamView(
        team=team,
        members=store.members(db, team_id),
        invitations=store.pending_invitations(db, team_id),
        seats=store.seats(db, team_id),
        held=entitlements.of_account(db, team_id),
    )


def invite(
    *, user: User, team_id: str, email: str, role: str, db: Database, bus: EventBus, links: Links
) -> InvitationRow:
    team = member_of(user=user, team_id=team_id, db=db)
    _refuse(rules.invite_refusal(actor=team.role, role=role))
    inviter = _inviter(user, db)
    if any((m.email or "").lower() == email.lower() for m in store.members(db, team_id)):
        raise Conflict(f"{email} is already a member of this team")
    token = _token()
    try:
        invitation = store.invite(
            db,
            team_id=team_id,
            email=email,
            role=role,
            token_hash=rules.token_hash(token),
            invited_by=user.id,
            expires_at=datetime.now(UTC) + links.ttl,
            daily_limit=links.daily_limit,
            sender_limit=links.person_limit,
            # Asked again with the team held: a role changed since the check above counts.
            inviting=lambda actor: rules.invite_refusal(actor=actor, role=role),
        )
    except store.Refused as refused:
        raise _ERRORS[refused.refusal.kind](refused.refusal.message) from None
    except store.NoSeat as no_seat:
        raise Conflict(rules.no_seat_message(no_seat.seats)) from None
    except store.DailyLimit as limited:
        raise _too_many(limited) from None
    _send_invitation(team, invitation, token, inviter=inviter, bus=bus, links=links)
    return invitation


def revoke(*, user: User, team_id: str, invitation_id: str, db: Database) -> None:
    manager_of(user=user, team_id=team_id, db=db)
    if not (
        _is_uuid(invitation_id) and store.revoke(db, team_id=team_id, invitation_id=invitation_id)
    ):
        raise NotFound("No pending invitation with this id in this team")


def resend(
    *, user: User, team_id: str, invitation_id: str, db: Database, bus: EventBus, links: Links
) -> InvitationRow:
    """A new token and expiry for a pending (or expired) invitation: the old link stops. An
    expired one takes a seat again, refused (409) as a new invitation is when none is left."""
    team = manager_of(user=user, team_id=team_id, db=db)
    inviter = _inviter(user, db)
    token = _token()
    try:
        renewed = (
            store.renew(
                db,
                team_id=team_id,
                invitation_id=invitation_id,
                token_hash=rules.token_hash(token),
                expires_at=datetime.now(UTC) + links.ttl,
                sent_by=user.id,
                daily_limit=links.daily_limit,
                sender_limit=links.person_limit,
            )
            if _is_uuid(invitation_id)
            else None
        )
    except store.NoSeat as no_seat:
        raise Conflict(rules.no_seat_message(no_seat.seats)) from None
    except store.DailyLimit as limited:
        raise _too_many(limited) from None
    if renewed is None:
        raise NotFound("No pending invitation with this id in this team")
    _send_invitation(team, renewed, token, inviter=inviter, bus=bus, links=links)
    return renewed


def invitation(*, token: str, db: Database) -> store.Invited:
    """What a pending invitation's link tells whoever holds it (the mail's reader): the team,
    the role and who sent it, as the mail says them. Refused (400) once it is no longer
    pending, as accepting it would be."""
    hashed = rules.token_hash(token)
    _refuse(rules.pending_refusal(store.invitation_by_hash(db, hashed), now=datetime.now(UTC)))
    found = store.invited(db, hashed)
    if found is None:  # deleted since it was read
        _refuse(rules.pending_refusal(None, now=datetime.now(UTC)))
    assert found is not None
    return found


def accept(
    *, user: User, token: str, db: Database, bus: EventBus, github: GitHubGateway
) -> tuple[str, str]:
    """Join the team the token invites to; (team id, role). Any refusal changes nothing."""
    hashed = rules.token_hash(token)
    invitation = store.invitation_by_hash(db, hashed)
    email = (store.names(db, [user.id]).get(user.id) or {}).get("email") or user.email
    _refuse(rules.acceptance_refusal(invitation, email=email, now=datetime.now(UTC)))
    assert invitation is not None  # refused above otherwise
    try:
        accepted = store.accept(
            db,
            team_id=invitation.team_id,
            token_hash=hashed,
            user_id=user.id,
            joining=lambda owners: rules.joining_refusal(owners_staying=owners),
        )
    except LookupError:  # accepted or revoked since it was read
        raise InvalidRequest(rules.USED.message) from None
    except store.Refused as refused:
        raise _ERRORS[refused.refusal.kind](refused.refusal.message) from None
    publish_seat_changes(accepted.team_id, db=db, bus=bus, github=github)
    role = store.membership(db, accepted.team_id, user.id)
    return accepted.team_id, role.role if role else accepted.role


def change_role(
    *,
    user: User,
    team_id: str,
    member_id: str,
    role: str,
    db: Database,
    bus: EventBus,
    github: GitHubGateway,
) -> None:
    member_of(user=user, team_id=team_id, db=db)
    with db.transaction() as conn:
        actor, target = _roles(conn, team_id, user.id, member_id)
        _refuse(
            rules.role_change_refusal(
                actor=actor, target_role=target, new_role=role, owners=store.owners(conn, team_id)
            )
        )
        store.set_role(conn, team_id, member_id, role)
    publish_seat_changes(team_id, db=db, bus=bus, github=github)


def remove_member(
    *,
    user: User,
    team_id: str,
    member_id: str,
    db: Database,
    bus: EventBus,
    github: GitHubGateway,
) -> None:
    """Remove a member (or leave): the team's access ends for them in the same transaction, and
    their seat's repositories right after."""
    member_of(user=user, team_id=team_id, db=db)
    with db.transaction() as conn:
        actor, target = _roles(conn, team_id, user.id, member_id)
        _refuse(
            rules.removal_refusal(
                actor=actor,
                target_role=target,
                self_removal=member_id == user.id,
                owners=store.owners(conn, team_id),
            )
        )
        store.remove(conn, team_id, member_id)
    _take_repositories(team_id, [member_id], db=db, github=github)
    publish_seat_changes(team_id, db=db, bus=bus, github=github)


def _inviter(user: User, db: Database) -> dict[str, str | None]:
    """Who the invitation mail says sent it: the address they signed in with, and their name;
    refused (403) to someone signed in without an address."""
    row = store.names(db, [user.id]).get(user.id) or {}
    email = row.get("email") or user.email
    if not email:
        _refuse(rules.NO_SENDER_ADDRESS)
    return {"email": email, "name": row.get("name")}


def _too_many(limited: store.DailyLimit) -> TooManyRequests:
    message = (
        rules.daily_invitations_message(limited.limit)
        if limited.whose == "team"
        else rules.personal_daily_invitations_message(limited.limit)
    )
    return TooManyRequests(
        message,
        retry_after=math.ceil(limited.retry_after.total_seconds()),
    )


def _send_invitation(
    team: Team,
    invitation: InvitationRow,
    token: str,
    *,
    inviter: dict[str, str | None],
    bus: EventBus,
    links: Links,
) -> None:
    # The token travels on the bus to the e-mail sender only: the table keeps its hash.
    event, data = app_event(
        TEAM_INVITED,
        event_id=f"team_invitation_{invitation.id}_{rules.token_hash(token)[:16]}",
        obj={
            "email": invitation.email,
            "team_name": team.name,
            "inviter": inviter,
            "role": invitation.role,
            "accept_url": f"{links.site_url.rstrip('/')}/invitations/accept?token={token}",
            "expires_at": invitation.expires_at.isoformat(),
        },
        created=datetime.now(UTC),
    )
    publish_or_unavailable(
        bus,
        event,
        data,
        told="The invitation is recorded, but its e-mail could not be queued: resend it shortly",
    )


def _take_repositories(
    team_id: str, user_ids: list[str], *, db: Database, github: GitHubGateway
) -> None:
    """Take the team's repositories back from these people's GitHub accounts (committed first:
    a GitHub failure is logged and the grant kept, so it is visible and can be removed again)."""
    for repository, username in store.repository_grants(db, team_id, user_ids):
        try:
            github.remove(repository=repository, username=username)
        except Exception as exc:  # GitHub down or unconfigured: the membership change stands
            log.warning("could not remove %s from %s: %s", username, repository, exc)
            continue
        for user_id in user_ids:
            store.release_repository(db, team_id=team_id, user_id=user_id, repository=repository)


def publish_seat_changes(
    team_id: str, *, db: Database, bus: EventBus, github: GitHubGateway
) -> None:
    """Tell who lost or got back a seat, and move the repositories with the seats; a failure
    leaves the change standing (what is left is told with the team's next change or event)."""
    try:
        seat_news.publish_changes(team_id, db=db, publish=bus.publish, github=github)
    except seat_news.SeatsNotTold as exc:
        log.warning("%s", exc)


def _roles(conn: Connection, team_id: str, user_id: str, member_id: str) -> tuple[str, str]:
    """The caller's role and the member's, with the team held until the transaction ends."""
    store.lock(conn, team_id)
    actor = store.role_of(conn, team_id, user_id)
    target = store.role_of(conn, team_id, member_id) if _is_uuid(member_id) else None
    if actor is None or target is None:
        raise NotFound("No member with this id in this team")
    return actor, target


_ERRORS: dict[str, type[ServiceError]] = {
    "forbidden": Forbidden,
    "conflict": Conflict,
    "invalid": InvalidRequest,
}


def _refuse(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise _ERRORS[refusal.kind](refusal.message)


def _token() -> str:
    return secrets.token_urlsafe(32)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
