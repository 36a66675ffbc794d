"""POST /api/usage: the founder's other services consume credits with the usage secret;
POST /api/usage/check: whether a consumption would be taken now, taking nothing."""

from __future__ import annotations

import hmac
import uuid
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.deps import container
from api.operations import COMMON, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate
from catalogue.rules import FEATURE
from core.errors import NotFound, Unauthenticated
from credits import service as credits
from credits.rules import LONGEST_KEY

bp = Blueprint("usage", __name__)

LARGEST_AMOUNT = 1_000_000


class CheckRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["feature", "amount"]}, extra="forbid")

    userId: str | None = None
    teamId: str | None = None
    feature: str = Field(default="", max_length=64)
    amount: Any = None

    @field_validator("userId", "teamId", mode="before")
    @classmethod
    def _uuid(cls, value: Any) -> str | None:
        if value is None:
            return None
        try:
            return str(uuid.UUID(str(value)))
        except ValueError:
            raise ValueError("must be an id") from None

    @field_validator("feature", mode="before")
    @classmethod
    def _feature(cls, value: Any) -> str:
        if not isinstance(value, str) or not FEATURE.fullmatch(value):
            raise ValueError("feature must be a feature name (a lowercase slug)")
        return value

    @field_validator("amount", mode="before")
    @classmethod
    def _amount(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("amount must be a whole number")
        if not 1 <= value <= LARGEST_AMOUNT:
            raise ValueError(f"amount must be 1 to {LARGEST_AMOUNT}")
        return value

    @model_validator(mode="after")
    def _one_payer(self) -> CheckRequest:
        if (self.userId is None) == (self.teamId is None):
            raise ValueError("Give userId or teamId, one of them (userId)")
        return self


class UsageRequest(CheckRequest):
    model_config = ConfigDict(
        json_schema_extra={"required": ["feature", "amount", "key"]}, extra="forbid"
    )

    key: str = Field(default="", max_length=LONGEST_KEY)

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, value: Any) -> str:
        if not isinstance(value, str) or not 1 <= len(value) <= LONGEST_KEY:
            raise ValueError(f"key must be 1 to {LONGEST_KEY} characters")
        if not value.isprintable() or not value.isascii():
            raise ValueError("key must be printable ASCII")
        return value


class UsageAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feature: str
    balance: int  # what is left after it
    used: int  # the units this consumption took (beyond the credits: billed on the meter)


class CheckAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feature: str
    allowed: bool  # whether the amount would be taken now
    balance: int  # what is left now (nothing is taken by asking)
    overage: bool  # whether any of it would be billed as overage


class NotEnoughAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: str
    balance: int


def _usage_key() -> None:
    """The usage secret, checked before the body is read: 404 while it is unset (not sold over
    HTTP: the routes do not exist), 401 when the caller does not send it."""
    expected = container().settings.usage_api_key
    if expected is None:
        raise NotFound("Not found")
    given = request.headers.get("Authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), expected.get_secret_value().encode()
    ):
        raise Unauthenticated("A valid usage key is required")


@bp.post("/api/usage/check")
@documented(
    "Whether a consumption would be taken now for a user or a team, and whether any"
    " of it would be overage; takes nothing; 404 while USAGE_API_KEY is unset",
    {200: CheckAnswer, 401: ErrorAnswer, 404: ErrorAnswer, **COMMON},
    CheckRequest,
    usage_key=True,
)
def check() -> ResponseReturnValue:
    _usage_key()
    body = validate(CheckRequest, json_object())
    payer = credits.Payer(user_id=body.userId, team_id=body.teamId)
    found = credits.check(container().db, payer, body.feature, body.amount)
    answer = CheckAnswer(
        feature=found.feature, allowed=found.allowed, balance=found.balance, overage=found.overage
    )
    return jsonify(answer.model_dump(mode="json"))


@bp.post("/api/usage")
@documented(
    "Consume credits for a user or a team, once per key (the first answer again);"
    " 404 while USAGE_API_KEY is unset",
    {
        200: UsageAnswer,
        401: ErrorAnswer,
        402: NotEnoughAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        **COMMON,
    },
    UsageRequest,
    usage_key=True,
)
def consume() -> ResponseReturnValue:
    _usage_key()
    c = container()
    body = validate(UsageRequest, json_object())
    payer = credits.Payer(user_id=body.userId, team_id=body.teamId)
    taken = credits.consume(
        c.db,
        payer,
        body.feature,
        body.amount,
        body.key,
        publish=c.bus.publish,
        alerts=c.settings.credits_alert_thresholds,
    )
    answer = UsageAnswer(feature=taken.feature, balance=taken.balance, used=body.amount)
    return jsonify(answer.model_dump(mode="json"))
