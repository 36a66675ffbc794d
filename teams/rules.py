"""Teams: roles, who may do what, invitations' validity and the order seats are given in.

A team is an account of kind `team` (access/model.py) with members. Owners and admins
invite, remove and manage billing and seats; only owners change roles; a team always keeps an
owner. A per-seat plan's quantity is how many members hold a seat: owners first, then admins,
then members, each in the order they joined (`seat_holders`; the database gives the seats out in
the same order in `public.team_refresh`, and a test holds the two together).

A team's name is text its creator wrote that goes out in mails from the product's own sender, to
addresses anyone may type: it is short plain text (`name_problem`), every mail quotes it and
names who wrote it (emails/kinds/), and a team sends a bounded number of invitations a day,
and so does each person from all their teams together (a new team gives no new day).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from core.addresses import carries_address, has_hidden_characters

Role = Literal["owner", "admin", "member"]
ROLES: tuple[Role, ...] = get_args(Role)
_RANK: dict[str, int] = {"owner": 0, "admin": 1, "member": 2}


def manages(role: str) -> bool:
    """Whether this role invites, removes, and manages billing and seats."""
    return role in ("owner", "admin")


def changes_roles(role: str) -> bool:
    """Whether this role changes others' roles (and makes owners)."""
    return role == "owner"


@dataclass(frozen=True)
class Member:
    user_id: str
    role: str
    joined_at: datetime


def seat_order(members: Sequence[Member]) -> list[Member]:
    """The order seats are given in: owners, admins, members, each by when they joined."""
    return sorted(members, key=lambda m: (_RANK.get(m.role, 3), m.joined_at, m.user_id))


def seat_holders(members: Sequence[Member], total: int | None) -> set[str]:
    """Who holds a seat: everyone when the team sells no seats (`total` None)."""
    ordered = seat_order(members)
    return {m.user_id for m in (ordered if total is None else ordered[: max(total, 0)])}


@dataclass(frozen=True)
class SeatChange:
    """A member's seat taken (`has_seat` False) or given back, as the database recorded it."""

    id: int
    user_id: str
    has_seat: bool


def seat_news(
    changes: Sequence[SeatChange], *, seated: Mapping[str, bool], team_has_access: bool
) -> list[SeatChange]:
    """What each member is told of their seat changes not told yet: the latest, when it is
    still true now and differs from what they knew (a seat lost and given back before anyone
    was told is no news). A seat given back is news only while the team has access: a team
    whose subscription ended gives every member a seat of nothing."""
    first: dict[str, SeatChange] = {}
    latest: dict[str, SeatChange] = {}
    for change in sorted(changes, key=lambda c: c.id):
        first.setdefault(change.user_id, change)
        latest[change.user_id] = change
    news = []
    for user_id, change in latest.items():
        knew = not first[user_id].has_seat  # each change flips the seat
        if seated.get(user_id) != change.has_seat or change.has_seat == knew:
            continue
        if change.has_seat and not team_has_access:
            continue
        news.append(change)
    return news


# A team's name fits a subject line and a list beside what mails say of it.
NAME_LIMIT = 60
# Mails quote the name between straight double quotes: one inside could close the quote early.
_QUOTES = frozenset('"\u201c\u201d\u201e\u201f\u2033\uff02')


def name_problem(name: str) -> str | None:
    """What is wrong with this team name (None: nothing). A name is plain text a mail can quote
    whole: no link or address anyone could follow, nothing hidden, no line breaks."""
    if not name.strip():
        return "Team name is required"
    too_long = f"Team name is longer than {NAME_LIMIT} characters"
    if len(name) > 4 * NAME_LIMIT:  # not read for links: the look takes longer as text grows
        return too_long
    if has_hidden_characters(name):
        return "Team name must not contain line breaks or control characters"
    if carries_address(name):
        return "Team name must not contain a link or an e-mail address"
    if any(c in _QUOTES for c in name):
        return "Team name must not contain double quotes (e-mails quote it)"
    if len(name) > NAME_LIMIT:
        return too_long
    return None


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: `forbidden` (the role does not allow it), `conflict` (it would
    break a rule of the team's), `invalid` (what it names is no good)."""

    kind: Literal["forbidden", "conflict", "invalid"]
    message: str


LAST_OWNER = Refusal(
    "conflict", "A team keeps at least one owner: make another member an owner first"
)


def removal_refusal(
    *, actor: str, target_role: str, self_removal: bool, owners: int
) -> Refusal | None:
    """Why `actor` may not remove this member (None: they may). A member may leave; a team keeps
    at least one owner."""
    if target_role == "owner" and owners <= 1:
        return LAST_OWNER
    if self_removal:
        return None
    if not manages(actor):
        return Refusal("forbidden", "Only owners and admins remove members")
    if target_role == "owner" and actor != "owner":
        return Refusal("forbidden", "Only owners remove an owner")
    return None


# A team whose every owner is deleting their account closes with the last of them: no one joins
# it meanwhile, or they would be a member of a team that closes under them.
CLOSING = Refusal(
    "conflict", "This team is closing: its owner is deleting their account. Ask for a new team"
)


def joining_refusal(*, owners_staying: int) -> Refusal | None:
    """Why no one may join the team now (None: they may): `owners_staying` counts its owners
    whose account deletion is not under way."""
    return CLOSING if owners_staying == 0 else None


def role_change_refusal(
    *, actor: str, target_role: str, new_role: str, owners: int
) -> Refusal | None:
    """Why `actor` may not give this member `new_role` (None: they may)."""
    if not changes_roles(actor):
        return Refusal("forbidden", "Only owners change roles")
    if target_role == "owner" and new_role != "owner" and owners <= 1:
        return LAST_OWNER
    return None


def invite_refusal(*, actor: str | None, role: str) -> Refusal | None:
    """Why `actor` (None: no longer a member) may not invite someone as `role` (None: they
    may)."""
    if actor is None or not manages(actor):
        return Refusal("forbidden", "Only owners and admins invite")
    if role == "owner" and actor != "owner":
        return Refusal("forbidden", "Only owners invite an owner")
    return None


# Every invitation mail names who sent it by the address they signed in with.
NO_SENDER_ADDRESS = Refusal(
    "forbidden", "Invitations name their sender by e-mail address: sign in with one to invite"
)


@dataclass(frozen=True)
class SeatCount:
    total: int
    used: int  # members plus pending invitations


def no_seat_message(seats: SeatCount) -> str:
    """What an invitation past the seats is told: how many there are and how to add some."""
    taken = (
        "The one seat of this team is taken"
        if seats.total == 1
        else f"All {seats.total:,} seats of this team are taken"
    )
    return (
        f"{taken} (members and pending invitations): add seats on the team's page or in its"
        " billing portal, or revoke an invitation"
    )


def daily_invitations_message(limit: int) -> str:
    """What an invitation past the team's daily limit is told."""
    plural = "invitation" if limit == 1 else "invitations"
    return (
        f"This team reached its daily invitation limit: {limit} {plural} (sent or resent) in"
        " 24 hours. Try again later"
    )


def personal_daily_invitations_message(limit: int) -> str:
    """What an invitation past its sender's daily limit (across all their teams) is told: a
    new team gives no new day."""
    plural = "invitation" if limit == 1 else "invitations"
    return (
        f"You reached your daily invitation limit: {limit} {plural} (sent or resent) in"
        " 24 hours, across all your teams. Try again later"
    )


def token_hash(token: str) -> str:
    """How an invitation's token is stored: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Invitation:
    team_id: str
    email: str
    role: str
    expires_at: datetime
    accepted_at: datetime | None
    revoked_at: datetime | None


def pending_refusal(invitation: Invitation | None, *, now: datetime) -> Refusal | None:
    """Why this invitation is not pending any more, whoever asks (None: it is)."""
    if invitation is None:
        return Refusal("invalid", "This invitation is not known: ask for a new one")
    if invitation.accepted_at is not None:
        return USED
    if invitation.revoked_at is not None:
        return Refusal("invalid", "This invitation was revoked")
    if invitation.expires_at <= now:
        return Refusal("invalid", "This invitation has expired: ask for a new one")
    return None


def acceptance_refusal(
    invitation: Invitation | None, *, email: str | None, now: datetime
) -> Refusal | None:
    """Why this invitation cannot be accepted by this signed-in address (None: it can)."""
    if invitation is None:
        return Refusal("invalid", "This invitation is not known: ask for a new one")
    if invitation.accepted_at is not None:
        return USED
    if invitation.revoked_at is not None:
        return Refusal("invalid", "This invitation was revoked")
    if invitation.expires_at <= now:
        return Refusal("invalid", "This invitation has expired: ask for a new one")
    if not email or email.strip().lower() != invitation.email.strip().lower():
        return Refusal(
            "forbidden",
            "This invitation is for another e-mail address: sign in with the invited one",
        )
    return None


USED = Refusal("invalid", "This invitation was already used")
