"""GET /api/me: what the signed-in user has, for a frontend to show and to gate on."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from flask import Blueprint, Response, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict

from access.answers import EntitlementAnswer
from access.answers import entitlement_of as _entitlement
from accounts.service import UserSummary, account_of
from accounts.welcome import welcome_if_new
from api.deps import caller, container
from api.identity import require_user
from api.operations import LIMITED, ErrorAnswer, documented
from credits import service as credits
from teams.service import teams_of
from topups import store as top_ups

bp = Blueprint("me", __name__)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TeamOfMe(_Answer):
    id: str
    name: str
    role: Literal["owner", "admin", "member"]
    hasAccess: bool  # the user has the team's access: it has an active grant and they a seat
    hasSeat: bool  # the user holds one of its seats (and so its access)


class TopUpOfMe(_Answer):
    priceId: str  # the pack bought
    below: int  # when a consumption leaves the balance below this


class CreditsAnswer(_Answer):
    feature: str
    balance: int  # what is left to consume
    granted: int  # what the live grants gave
    used: int  # what was consumed of them
    resetsAt: datetime | None  # when the current period's credits end; None: a pack's only
    teamId: str | None  # the team whose pool it is; None: the user's own
    packs: int  # what packs hold of the balance: kept past the period's reset
    packsExpireAt: datetime | None  # when the first pack with some left ends; None: until used
    topUp: TopUpOfMe | None = None  # automatic top-up, when it is on for this pool's feature


class MeAnswer(_Answer):
    id: str
    email: str | None
    name: str | None
    hasAccess: bool
    portalAvailable: bool
    entitlements: list[EntitlementAnswer]
    features: list[str]  # sorted names of the features the user holds (docs/features.md)
    teams: list[TeamOfMe] = []
    # Read on every request, never put in the token: balances change too often for one.
    credits: list[CreditsAnswer] = []


@bp.get("/api/me")
@documented(
    "The signed-in user's access and entitlements",
    {200: MeAnswer, 401: ErrorAnswer, 503: ErrorAnswer, **LIMITED},
    signed_in=True,
)
def me() -> ResponseReturnValue:
    c = container()
    account = account_of(require_user(caller()), db=c.db)
    # Every page asks this after a sign-in, whatever its method (a password sign-up never
    # passes the sign-in callback): a new person's first answer hands their welcome on.
    if account.profile is not None:
        welcome_if_new(account.profile, db=c.db, bus=c.bus)
    return answer(account)


def _top_up(found: dict[str, Any] | None) -> TopUpOfMe | None:
    return TopUpOfMe(priceId=found["priceId"], below=found["below"]) if found else None


def answer(account: UserSummary) -> Response:
    """GET /api/me's answer for an account: only ever to that account's own signed-in user (the
    checkout completion answers it to the session's signed-in buyer, never to a guest token)."""
    teams = teams_of(user_id=account.user_id, db=container().db)
    held_credits = credits.held(container().db, account.user_id)
    topped = top_ups.of_user(container().db, account.user_id)
    body = MeAnswer(
        id=account.user_id,
        email=account.email,
        name=account.name,
        hasAccess=account.has_access,
        portalAvailable=account.portal_available,
        entitlements=[_entitlement(held, held_credits) for held in account.held],
        features=account.features,
        teams=[
            TeamOfMe(id=t.id, name=t.name, role=t.role, hasAccess=t.has_access, hasSeat=t.has_seat)
            for t in teams
        ],
        credits=[
            CreditsAnswer(
                feature=h.feature,
                balance=h.balance,
                granted=h.granted,
                used=h.used,
                resetsAt=h.resets_at,
                teamId=h.team_id,
                packs=h.packs,
                packsExpireAt=h.packs_expire_at,
                topUp=_top_up(topped.get((h.team_id, h.feature))),
            )
            for h in held_credits
        ],
    )
    response = jsonify(body.model_dump(mode="json"))
    # Per user and changing with every payment: never kept by a shared cache.
    response.headers["Cache-Control"] = "private, no-store"
    return response
