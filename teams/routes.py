"""Teams: /api/teams (create, read), their invitations, members and seats, and
/api/invitations/accept."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, WithJsonSchema, field_validator

from access.answers import EntitlementAnswer, entitlement_answer
from access.entitlements_store import Held
from api.deps import Collaborators, caller, container
from api.fields import required_text
from api.identity import require_user
from api.operations import COMMON, LIMITED, ErrorAnswer, documented
from api.parsing import EMAIL_SCHEMA, RequestModel, json_object, validate
from core.addresses import email_address
from teams import service as teams
from teams.rules import NAME_LIMIT, Role, name_problem
from teams.store import InvitationRow

bp = Blueprint("teams", __name__)


# A team's routes: a stranger is told it does not exist, a member without the role is refused.
TEAM = {401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON}

_ROLE_SCHEMA = {"type": "string", "enum": ["owner", "admin", "member"]}


class CreateTeamRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["name"]})

    name: Annotated[
        Any, WithJsonSchema({"type": "string", "minLength": 1, "maxLength": NAME_LIMIT})
    ] = None

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: Any) -> str:
        name = required_text(value, "Team name is required")
        if problem := name_problem(name):
            raise ValueError(problem)
        return name


def _role(value: Any) -> Role:
    if value not in ("owner", "admin", "member"):
        raise ValueError("Role must be 'owner', 'admin' or 'member'")
    role: Role = value
    return role


class InvitationRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["email", "role"]})

    email: Annotated[Any, WithJsonSchema(EMAIL_SCHEMA)] = None
    role: Annotated[Any, WithJsonSchema(_ROLE_SCHEMA)] = None

    @field_validator("email", mode="before")
    @classmethod
    def _email(cls, value: Any) -> str:
        return email_address(required_text(value, "Email is required"))

    @field_validator("role", mode="before")
    @classmethod
    def _check_role(cls, value: Any) -> Role:
        return _role(value)


class RoleRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["role"]})

    role: Annotated[Any, WithJsonSchema(_ROLE_SCHEMA)] = None

    @field_validator("role", mode="before")
    @classmethod
    def _check_role(cls, value: Any) -> Role:
        return _role(value)


class AcceptRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["token"]})

    token: Annotated[Any, WithJsonSchema({"type": "string", "maxLength": 200})] = None

    @field_validator("token", mode="before")
    @classmethod
    def _token(cls, value: Any) -> str:
        token = required_text(value, "Invitation token is required")
        if len(token) > 200:
            raise ValueError("Invitation token is not valid")
        return token


class SeatsRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["quantity"]})

    quantity: Annotated[
        Any, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 10_000})
    ] = None

    @field_validator("quantity", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10_000:
            raise ValueError("Quantity must be a whole number of seats from 1 to 10000")
        return value


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TeamAnswer(_Answer):
    id: str
    name: str
    role: Role


class MemberAnswer(_Answer):
    userId: str
    email: str | None
    role: Role
    hasSeat: bool


class InvitationAnswer(_Answer):
    id: str
    email: str
    role: Role
    expiresAt: datetime


class SeatsAnswer(_Answer):
    total: int
    used: int


class TeamDetailAnswer(_Answer):
    id: str
    name: str
    role: Role
    members: list[MemberAnswer]
    invitations: list[InvitationAnswer]
    seats: SeatsAnswer | None
    entitlements: list[EntitlementAnswer]


class AcceptAnswer(_Answer):
    teamId: str
    role: Role


class InviterAnswer(_Answer):
    email: str
    name: str | None


class InvitedAnswer(_Answer):
    """What an invitation's link tells its holder before accepting: what the mail said."""

    teamName: str
    role: Role
    expiresAt: datetime
    invitedBy: InviterAnswer | None  # None: the sender's account is gone


class RoleAnswer(_Answer):
    userId: str
    role: Role


def _links(c: Collaborators) -> teams.Links:
    return teams.Links(
        site_url=c.brand.site_url,
        ttl=timedelta(days=c.settings.team_invitation_ttl_days),
        daily_limit=c.settings.team_invitations_per_day,
        person_limit=c.settings.invitations_per_person_per_day,
    )


def _json(answer: BaseModel, status: int = 200) -> ResponseReturnValue:
    response = jsonify(answer.model_dump(mode="json"))
    response.headers["Cache-Control"] = "private, no-store"
    return response, status


def _invitation(row: InvitationRow) -> InvitationAnswer:
    return InvitationAnswer(
        id=row.id, email=row.email, role=_as_role(row.role), expiresAt=row.expires_at
    )


def _as_role(value: str) -> Role:
    return _role(value)


def _entitlements(held: list[Held]) -> list[EntitlementAnswer]:
    return [entitlement_answer(h) for h in held]


@bp.post("/api/teams")
@documented(
    "Create a team; the caller is its owner",
    {201: TeamAnswer, 401: ErrorAnswer, **COMMON, **LIMITED},
    CreateTeamRequest,
    signed_in=True,
)
def create_team() -> ResponseReturnValue:
    c = container()
    body = validate(CreateTeamRequest, json_object())
    user = require_user(caller())
    team = teams.create_team(user=user, name=body.name, db=c.db)
    return _json(TeamAnswer(id=team.id, name=team.name, role=_as_role(team.role)), 201)


@bp.get("/api/teams/<teamId>")
@documented(
    "A team: members, invitations, seats, grants",
    {200: TeamDetailAnswer, **TEAM},
    signed_in=True,
)
def get_team(teamId: str) -> ResponseReturnValue:
    c = container()
    user = require_user(caller())
    found = teams.view(user=user, team_id=teamId, db=c.db)
    answer = TeamDetailAnswer(
        id=found.team.id,
        name=found.team.name,
        role=_as_role(found.team.role),
        members=[
            MemberAnswer(userId=m.user_id, email=m.email, role=_as_role(m.role), hasSeat=m.has_seat)
            for m in found.members
        ],
        invitations=[_invitation(i) for i in found.invitations],
        seats=SeatsAnswer(total=found.seats.total, used=found.seats.used) if found.seats else None,
        entitlements=_entitlements(found.held),
    )
    return _json(answer)


@bp.post("/api/teams/<teamId>/invitations")
@documented(
    "Invite by e-mail (owners, admins)",
    {201: InvitationAnswer, 409: ErrorAnswer, **TEAM, **LIMITED},
    InvitationRequest,
    signed_in=True,
)
def invite(teamId: str) -> ResponseReturnValue:
    c = container()
    body = validate(InvitationRequest, json_object())
    user = require_user(caller())
    row = teams.invite(
        user=user,
        team_id=teamId,
        email=body.email,
        role=body.role,
        db=c.db,
        bus=c.bus,
        links=_links(c),
    )
    return _json(_invitation(row), 201)


@bp.delete("/api/teams/<teamId>/invitations/<invitationId>")
@documented(
    "Revoke an invitation",
    {204: None, **TEAM},
    signed_in=True,
)
def revoke_invitation(teamId: str, invitationId: str) -> ResponseReturnValue:
    c = container()
    user = require_user(caller())
    teams.revoke(user=user, team_id=teamId, invitation_id=invitationId, db=c.db)
    return "", 204


@bp.post("/api/teams/<teamId>/invitations/<invitationId>/resend")
@documented(
    "Send an invitation again with a new link (the old one stops working)",
    {200: InvitationAnswer, **TEAM, **LIMITED},
    signed_in=True,
)
def resend_invitation(teamId: str, invitationId: str) -> ResponseReturnValue:
    c = container()
    user = require_user(caller())
    row = teams.resend(
        user=user, team_id=teamId, invitation_id=invitationId, db=c.db, bus=c.bus, links=_links(c)
    )
    return _json(_invitation(row))


@bp.post("/api/invitations/lookup")
@documented(
    "What an invitation's token names: the team, the role, who sent it",
    {200: InvitedAnswer, **COMMON, **LIMITED},
    AcceptRequest,
)
def look_up_invitation() -> ResponseReturnValue:
    c = container()
    body = validate(AcceptRequest, json_object())
    found = teams.invitation(token=body.token, db=c.db)
    inviter = (
        InviterAnswer(email=found.inviter_email, name=found.inviter_name)
        if found.inviter_email
        else None
    )
    return _json(
        InvitedAnswer(
            teamName=found.team_name,
            role=_as_role(found.role),
            expiresAt=found.expires_at,
            invitedBy=inviter,
        )
    )


@bp.post("/api/invitations/accept")
@documented(
    "Join the team an invitation's token names",
    {200: AcceptAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 409: ErrorAnswer, **COMMON, **LIMITED},
    AcceptRequest,
    signed_in=True,
)
def accept_invitation() -> ResponseReturnValue:
    c = container()
    body = validate(AcceptRequest, json_object())
    user = require_user(caller())
    team_id, role = teams.accept(user=user, token=body.token, db=c.db, bus=c.bus, github=c.github)
    return _json(AcceptAnswer(teamId=team_id, role=_as_role(role)))


@bp.patch("/api/teams/<teamId>/members/<userId>")
@documented(
    "Change a member's role (owners)",
    {200: RoleAnswer, 409: ErrorAnswer, **TEAM},
    RoleRequest,
    signed_in=True,
)
def change_role(teamId: str, userId: str) -> ResponseReturnValue:
    c = container()
    body = validate(RoleRequest, json_object())
    user = require_user(caller())
    teams.change_role(
        user=user,
        team_id=teamId,
        member_id=userId,
        role=body.role,
        db=c.db,
        bus=c.bus,
        github=c.github,
    )
    return _json(RoleAnswer(userId=userId, role=body.role))


@bp.delete("/api/teams/<teamId>/members/<userId>")
@documented(
    "Remove a member, or leave (the team's access ends at once)",
    {204: None, 409: ErrorAnswer, **TEAM},
    signed_in=True,
)
def remove_member(teamId: str, userId: str) -> ResponseReturnValue:
    c = container()
    user = require_user(caller())
    teams.remove_member(
        user=user, team_id=teamId, member_id=userId, db=c.db, bus=c.bus, github=c.github
    )
    return "", 204
