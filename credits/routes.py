"""POST /api/usage: the founder's other services consume credits with the usage secret."""

from __future__ import annotations

import hmac
import uuid
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.deps import container
from api.parsing import RequestModel, json_object, validate
from catalogue.rules import FEATURE
from core.errors import NotFound, Unauthenticated
from credits import service as credits
from credits.rules import LONGEST_KEY

bp = Blueprint("usage", __name__)

LARGEST_AMOUNT = 1_000_000


class UsageRequest(RequestModel):
    model_config = ConfigDict(
        json_schema_extra={"required": ["feature", "amount", "key"]}, extra="forbid"
    )

    userId: str | None = None
    teamId: str | None = None
    feature: str = Field(default="", max_length=64)
    amount: Any = None
    key: str = Field(default="", max_length=LONGEST_KEY)

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

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, value: Any) -> str:
        if not isinstance(value, str) or not 1 <= len(value) <= LONGEST_KEY:
            raise ValueError(f"key must be 1 to {LONGEST_KEY} characters")
        if not value.isprintable() or not value.isascii():
            raise ValueError("key must be printable ASCII")
        return value

    @model_validator(mode="after")
    def _one_payer(self) -> UsageRequest:
        if (self.userId is None) == (self.teamId is None):
            raise ValueError("Give userId or teamId, one of them (userId)")
        return self


class UsageAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feature: str
    balance: int  # what is left after it
    used: int  # the units this consumption took (beyond the credits: billed on the meter)


class NotEnoughAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: str
    balance: int


@bp.post("/api/usage")
def consume() -> ResponseReturnValue:
    c = container()
    expected = c.settings.usage_api_key
    if expected is None:  # not sold over HTTP: the route does not exist
        raise NotFound("Not found")
    given = request.headers.get("Authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), expected.get_secret_value().encode()
    ):
        raise Unauthenticated("A valid usage key is required")
    body = validate(UsageRequest, json_object())
    payer = credits.Payer(user_id=body.userId, team_id=body.teamId)
    taken = credits.consume(c.db, payer, body.feature, body.amount, body.key, publish=c.bus.publish)
    answer = UsageAnswer(feature=taken.feature, balance=taken.balance, used=body.amount)
    return jsonify(answer.model_dump(mode="json"))
