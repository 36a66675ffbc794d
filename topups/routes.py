"""PUT and DELETE /api/me/credits/top-up: a person (or a team's owner or admin, for the team's
pool) turns automatic top-up on for a feature, with the pack to buy and the balance below which
it is bought, or off."""

from __future__ import annotations

import uuid
from typing import Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.deps import caller, container
from api.identity import require_user
from api.operations import COMMON, LIMITED, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate
from catalogue.rules import FEATURE
from core.errors import InvalidRequest, NotFound
from teams import service as teams
from topups import store
from topups.rules import LARGEST_BELOW

bp = Blueprint("top_up", __name__)


def _feature(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 64 or not FEATURE.fullmatch(value):
        raise ValueError("feature must be a feature name (a lowercase slug)")
    return value


def _team(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValueError("teamId must be a team's id") from None


class TopUpOff(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["feature"]}, extra="forbid")

    feature: str = Field(default="", max_length=64)
    teamId: str | None = None

    @field_validator("feature", mode="before")
    @classmethod
    def _check_feature(cls, value: Any) -> str:
        return _feature(value)

    @field_validator("teamId", mode="before")
    @classmethod
    def _check_team(cls, value: Any) -> str | None:
        return _team(value)


class TopUpOn(TopUpOff):
    model_config = ConfigDict(
        json_schema_extra={"required": ["feature", "priceId", "below"]}, extra="forbid"
    )

    priceId: str = Field(default="", max_length=255)
    below: int = Field(default=0, ge=1, le=LARGEST_BELOW)

    @field_validator("priceId", mode="before")
    @classmethod
    def _price(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.startswith("price_") or len(value) > 255:
            raise ValueError("priceId must be a Stripe price id (price_...)")
        return value

    @field_validator("below", mode="before")
    @classmethod
    def _below(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("below must be a whole number")
        if not 1 <= value <= LARGEST_BELOW:
            raise ValueError(f"below must be 1 to {LARGEST_BELOW}")
        return value


class TopUpAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feature: str
    priceId: str  # the pack bought, a one-time price marked `top_up`
    below: int  # bought when a consumption leaves the balance below this
    teamId: str | None  # the team whose pool it tops up; None: the person's own


def _account(team_id: str | None) -> str:
    """The account the caller manages: their own, or a team's they own or administer (404 to a
    stranger, 403 to a member)."""
    c = container()
    user = require_user(caller())
    if team_id is not None:
        return teams.manager_of(user=user, team_id=team_id, db=c.db).id
    found = store.personal_account(c.db, user.id)
    if found is None:
        raise NotFound("No account for this user")
    return found


@bp.put("/api/me/credits/top-up")
@documented(
    "Turn automatic top-up on for a feature of the user's own credits or a team's (its owners"
    " and admins): the pack bought off-session when a consumption leaves the balance below"
    " `below`",
    {200: TopUpAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON, **LIMITED},
    TopUpOn,
    signed_in=True,
)
def turn_on() -> ResponseReturnValue:
    body = validate(TopUpOn, json_object())
    account = _account(body.teamId)
    db = container().db
    pack = store.pack(db, body.priceId)
    if pack is None or not pack.active:
        raise InvalidRequest(f"No price {body.priceId} is sold (priceId)")
    if not pack.one_time or pack.credits_period != "once" or not pack.top_up:
        raise InvalidRequest(
            f"The price {body.priceId} is not a pack sold for top-up (priceId): a one-time"
            " price whose product has top_up metadata"
        )
    if body.feature not in pack.credits:
        raise InvalidRequest(f"The pack {body.priceId} grants no {body.feature} credits (feature)")
    if body.below > pack.credits[body.feature]:
        # A pack that cannot lift the balance above the threshold would be bought again by the
        # next consumption after its grant: one crossing charged over and over.
        raise InvalidRequest(
            f"below must be at most the {pack.credits[body.feature]} {body.feature} credits the"
            f" pack {body.priceId} grants (below)"
        )
    store.turn_on(db, account, body.feature, body.priceId, body.below)
    answer = TopUpAnswer(
        feature=body.feature, priceId=body.priceId, below=body.below, teamId=body.teamId
    )
    return jsonify(answer.model_dump(mode="json"))


@bp.delete("/api/me/credits/top-up")
@documented(
    "Turn automatic top-up off for a feature (nothing is charged after it answers)",
    {204: None, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON, **LIMITED},
    TopUpOff,
    signed_in=True,
)
def turn_off() -> ResponseReturnValue:
    body = validate(TopUpOff, json_object())
    account = _account(body.teamId)
    store.turn_off(container().db, account, body.feature)
    return "", 204
