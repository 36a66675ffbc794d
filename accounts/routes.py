"""GET /api/me: what the signed-in user has, for a frontend to show and to gate on."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from flask import Blueprint, Response, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict

from access import grant_words_service as grant_words
from access.entitlements_store import Held
from accounts.identity import require_user
from accounts.service import Account, account_of
from accounts.welcome import welcome_if_new
from api.deps import caller, container
from credits import service as credits
from credits.rules import Credits
from teams.service import teams_of

bp = Blueprint("me", __name__)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EntitledProduct(_Answer):
    id: str
    name: str
    type: str
    # A `link` product's download while the entitlement is active (None otherwise), for the
    # dashboard's purchases.
    downloadUrl: str | None = None


class EntitlementAnswer(_Answer):
    product: EntitledProduct | None  # None: a price no product row is sold at any more
    priceId: str | None
    kind: Literal["subscription", "purchase", "comp"]  # comp: given by an admin, no payment
    status: str
    active: bool
    currentPeriodEnd: datetime | None
    cancelAtPeriodEnd: bool
    trialEnd: datetime | None
    endedAt: datetime | None
    teamId: str | None = None  # the team whose account holds it; None: the user's own
    # What it is and what comes next, in words a page shows as is (access/grant_words.py): a
    # comp's end, a trial's end and first charge, a pack's credits, a renewal.
    label: str
    summary: str


class TeamOfMe(_Answer):
    id: str
    name: str
    role: Literal["owner", "admin", "member"]
    hasAccess: bool  # the user has the team's access: it has an active grant and they a seat
    hasSeat: bool  # the user holds one of its seats (and so its access)


class CreditsAnswer(_Answer):
    feature: str
    balance: int  # what is left to consume
    granted: int  # what the live grants gave
    used: int  # what was consumed of them
    resetsAt: datetime | None  # when the current period's credits end; None: a pack's only
    teamId: str | None  # the team whose pool it is; None: the user's own
    packs: int  # what packs hold of the balance: kept past the period's reset
    packsExpireAt: datetime | None  # when the first pack with some left ends; None: until used


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
def me() -> ResponseReturnValue:
    c = container()
    account = account_of(require_user(caller()), db=c.db)
    # Every page asks this after a sign-in, whatever its method (a password sign-up never
    # passes the sign-in callback): a new person's first answer hands their welcome on.
    if account.profile is not None:
        welcome_if_new(account.profile, db=c.db, bus=c.bus)
    return answer(account)


def answer(account: Account) -> Response:
    """GET /api/me's answer for an account: only ever to that account's own signed-in user (the
    checkout completion answers it to the session's signed-in buyer, never to a guest token)."""
    teams = teams_of(user_id=account.user_id, db=container().db)
    held_credits = credits.held(container().db, account.user_id)
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
            )
            for h in held_credits
        ],
    )
    response = jsonify(body.model_dump(mode="json"))
    # Per user and changing with every payment: never kept by a shared cache.
    response.headers["Cache-Control"] = "private, no-store"
    return response


def _entitlement(held: Held, held_credits: Sequence[Credits] = ()) -> EntitlementAnswer:
    e = held.entitlement
    told = grant_words.of_held(held, held_credits)
    product = (
        EntitledProduct(
            id=held.product_id,
            name=held.product_name,
            type=held.product_type,
            downloadUrl=held.download_url if e.active else None,
        )
        if held.product_id and held.product_name and held.product_type
        else None
    )
    return EntitlementAnswer(
        product=product,
        priceId=e.price_id,
        kind=e.kind,
        status=e.status,
        active=e.active,
        currentPeriodEnd=e.current_period_end,
        cancelAtPeriodEnd=e.cancel_at_period_end,
        trialEnd=e.trial_end,
        endedAt=e.ended_at,
        teamId=held.team_id,
        label=told.label,
        summary=told.summary,
    )


def entitlement_answer(held: Held) -> EntitlementAnswer:
    """An entitlement as GET /api/me and GET /api/teams/{teamId} answer it."""
    return _entitlement(held)
