"""Plan changes: POST /api/payments/preview-change, change-plan, cancel and resume, for the
signed-in user's own subscription or a team's (its owners and admins), named by the price it
holds now; and PATCH /api/teams/{teamId}/seats, a team's seats changed by the same rules."""

from __future__ import annotations

from typing import Any, Literal

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, model_validator

from adapters.db.pool import Database
from adapters.tokens import User
from api.deps import caller, container
from api.identity import require_user
from api.operations import COMMON, LIMITED, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate
from billing.rules import MOST_SEATS
from core.errors import InvalidRequest, NotFound
from plans import service as plans
from plans import store
from plans.seats import set_team_seats
from teams.routes import TEAM, SeatsAnswer, SeatsRequest
from teams.service import manager_of

bp = Blueprint("plan_changes", __name__)

# Stripe's `cancellation_details.feedback` values (plans/rules.py CANCEL_REASONS).
CancelReason = Literal[
    "customer_service",
    "low_quality",
    "missing_features",
    "other",
    "switched_service",
    "too_complex",
    "too_expensive",
    "unused",
]
NO_SUBSCRIPTION = "No active subscription at this price (priceId)"


class PreviewRequest(RequestModel):
    price_id: str = Field(alias="priceId", min_length=1, max_length=255)
    team_id: str | None = Field(default=None, alias="teamId", max_length=64)
    new_price_id: str | None = Field(default=None, alias="newPriceId", min_length=1, max_length=255)
    quantity: int | None = Field(default=None, ge=1, le=MOST_SEATS, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _price_given(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("priceId"), str):
            raise ValueError("Price ID is required (priceId): the price the subscription is at")
        return data


class ChangeRequest(PreviewRequest):
    proration_date: str = Field(alias="prorationDate", min_length=1, max_length=200)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LineAnswer(_Answer):
    description: str
    amount: int  # in the currency's minor unit; a credit is negative


class NextChargeAnswer(_Answer):
    amount: int
    at: int  # Unix seconds


class PreviewAnswer(_Answer):
    effective: Literal["now", "period_end"]
    effectiveAt: int  # Unix seconds
    amountDue: int  # charged now, in the currency's minor unit
    currency: str
    prorationDate: str  # hand it back to change-plan as it is
    lines: list[LineAnswer]
    nextCharge: NextChargeAnswer


class StalePreviewAnswer(_Answer):
    error: str
    preview: PreviewAnswer


def subscription_of(user: User, *, price_id: str, team_id: str | None, db: Database) -> str:
    """The subscription the request names: the user's own, or the team's (404 to a stranger,
    403 to a member who does not manage it)."""
    if team_id is not None:
        manager_of(user=user, team_id=team_id, db=db)
        found = store.team_subscription(db, team_id, price_id)
    else:
        found = store.personal_subscription(db, user.id, price_id)
    if found is None:
        raise NotFound(NO_SUBSCRIPTION)
    return found


def _wanted(body: PreviewRequest) -> plans.Wanted:
    if body.new_price_id is None and body.quantity is None:
        raise InvalidRequest("Say what to change: a new price (newPriceId) or seats (quantity)")
    return plans.Wanted(price_id=body.new_price_id, quantity=body.quantity)


@bp.post("/api/payments/preview-change")
@documented(
    "What changing the plan or seats would charge now and next; changes nothing",
    {
        200: PreviewAnswer,
        401: ErrorAnswer,
        403: ErrorAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        **COMMON,
        **LIMITED,
    },
    PreviewRequest,
    signed_in=True,
)
def preview_change() -> ResponseReturnValue:
    c = container()
    body = validate(PreviewRequest, json_object())
    user = require_user(caller())
    sid = subscription_of(user, price_id=body.price_id, team_id=body.team_id, db=c.db)
    found = plans.preview(
        sid, _wanted(body), stripe=c.stripe, secret=c.settings.webhook_secret, db=c.db
    )
    return jsonify(PreviewAnswer.model_validate(plans.answer_of(found)).model_dump())


@bp.post("/api/payments/change-plan")
@documented(
    "Apply a previewed change: an upgrade now, invoiced now; a downgrade at the period's end."
    " A preview that no longer holds: 409 with a fresh one",
    {
        200: PreviewAnswer,
        401: ErrorAnswer,
        403: ErrorAnswer,
        404: ErrorAnswer,
        409: StalePreviewAnswer,
        **COMMON,
        **LIMITED,
    },
    ChangeRequest,
    signed_in=True,
)
def change_plan() -> ResponseReturnValue:
    c = container()
    body = validate(ChangeRequest, json_object())
    user = require_user(caller())
    sid = subscription_of(user, price_id=body.price_id, team_id=body.team_id, db=c.db)
    applied = plans.change(
        sid,
        _wanted(body),
        proration_date=body.proration_date,
        stripe=c.stripe,
        secret=c.settings.webhook_secret,
        db=c.db,
    )
    return jsonify(PreviewAnswer.model_validate(plans.answer_of(applied.preview)).model_dump())


class CancelRequest(RequestModel):
    price_id: str = Field(alias="priceId", min_length=1, max_length=255)
    team_id: str | None = Field(default=None, alias="teamId", max_length=64)
    reason: CancelReason
    comment: str | None = Field(default=None, max_length=500)
    offer: Literal["accept", "decline"] | None = None


class ResumeRequest(RequestModel):
    price_id: str = Field(alias="priceId", min_length=1, max_length=255)
    team_id: str | None = Field(default=None, alias="teamId", max_length=64)


class OfferFacts(_Answer):
    coupon: str
    percentOff: float | None = None
    amountOff: int | None = None
    duration: str  # once, repeating or forever, as Stripe says
    durationInMonths: int | None


class CancelAnswer(_Answer):
    """One of: the offer alone (nothing changed); the offer accepted (`kept`, the subscription
    stays, discounted); the cancellation made (`cancelAt`, when access ends)."""

    offer: OfferFacts | None = None
    kept: bool | None = None
    cancelAt: int | None = None  # Unix seconds


class ResumeAnswer(_Answer):
    resumed: Literal["cancellation", "change"]


def _facts(offer: plans.RetentionOffer) -> OfferFacts:
    return OfferFacts(
        coupon=offer.coupon,
        percentOff=offer.percent_off,
        amountOff=offer.amount_off,
        duration=offer.duration,
        durationInMonths=offer.duration_in_months,
    )


@bp.post("/api/payments/cancel")
@documented(
    "Cancel at the period's end with a reason; with a retention coupon never applied to this"
    " customer, its offer first (changes nothing), then accept or decline",
    {
        200: CancelAnswer,
        401: ErrorAnswer,
        403: ErrorAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        **COMMON,
        **LIMITED,
    },
    CancelRequest,
    signed_in=True,
)
def cancel() -> ResponseReturnValue:
    c = container()
    body = validate(CancelRequest, json_object())
    user = require_user(caller())
    sid = subscription_of(user, price_id=body.price_id, team_id=body.team_id, db=c.db)
    done = plans.cancel(
        sid,
        reason=body.reason,
        comment=(body.comment or "").strip() or None,
        offer=body.offer,
        coupon=c.settings.retention_coupon,
        db=c.db,
        stripe=c.stripe,
    )
    said: dict[str, Any] = {}
    if done.offer is not None:
        said["offer"] = _facts(done.offer).model_dump(exclude_none=True) | {
            "durationInMonths": done.offer.duration_in_months
        }
    if done.kept:
        said["kept"] = True
    if done.cancel_at is not None:
        said["cancelAt"] = done.cancel_at
    return jsonify(CancelAnswer.model_validate(said).model_dump(exclude_unset=True))


@bp.post("/api/payments/resume")
@documented(
    "Undo a scheduled cancellation or a change still to come",
    {
        200: ResumeAnswer,
        401: ErrorAnswer,
        403: ErrorAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        **COMMON,
        **LIMITED,
    },
    ResumeRequest,
    signed_in=True,
)
def resume() -> ResponseReturnValue:
    c = container()
    body = validate(ResumeRequest, json_object())
    user = require_user(caller())
    sid = subscription_of(user, price_id=body.price_id, team_id=body.team_id, db=c.db)
    return jsonify(ResumeAnswer(resumed=plans.resume(sid, stripe=c.stripe, db=c.db)).model_dump())


@bp.patch("/api/teams/<teamId>/seats")
@documented(
    "Set the seats of a per-seat subscription (Stripe prorates)",
    {200: SeatsAnswer, 409: ErrorAnswer, **TEAM, **LIMITED},
    SeatsRequest,
    signed_in=True,
)
def set_seats(teamId: str) -> ResponseReturnValue:
    c = container()
    body = validate(SeatsRequest, json_object())
    user = require_user(caller())
    seats = set_team_seats(
        user=user,
        team_id=teamId,
        quantity=body.quantity,
        db=c.db,
        stripe=c.stripe,
        bus=c.bus,
        github=c.github,
        secret=c.settings.webhook_secret,
    )
    response = jsonify(SeatsAnswer(total=seats.total, used=seats.used).model_dump(mode="json"))
    response.headers["Cache-Control"] = "private, no-store"
    return response
