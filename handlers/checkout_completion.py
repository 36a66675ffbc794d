"""POST /api/payments/complete-checkout: the success page's checkout, applied at once."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint
from flask.typing import ResponseReturnValue
from pydantic import ConfigDict, Field, model_validator

from handlers.deps import caller, container
from handlers.me import answer
from handlers.parsing import RequestModel, json_object, validate
from services.checkout_completion import complete_checkout

bp = Blueprint("checkout_completion", __name__)

# A Checkout Session's id as Stripe makes them (`cs_test_...`, `cs_live_...`).
SESSION_ID = re.compile(r"cs_[A-Za-z0-9_]{1,250}")
TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")


class CompletionRequest(RequestModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    session_id: str = Field(alias="sessionId", pattern=f"^{SESSION_ID.pattern}$")
    token: str | None = Field(default=None, pattern=f"^{TOKEN.pattern}$")

    @model_validator(mode="before")
    @classmethod
    def _fields(cls, data: Any) -> Any:
        session = data.get("sessionId") if isinstance(data, dict) else None
        if not isinstance(session, str) or not SESSION_ID.fullmatch(session):
            raise ValueError("sessionId must be a Stripe Checkout Session id (cs_...)")
        token = data.get("token")
        if token is not None and not (isinstance(token, str) and TOKEN.fullmatch(token)):
            raise ValueError("token must be the checkout_token of the success URL")
        return data


@bp.post("/api/payments/complete-checkout")
def complete() -> ResponseReturnValue:
    c = container()
    body = validate(CompletionRequest, json_object())
    account = complete_checkout(
        session_id=body.session_id,
        token=body.token,
        user=caller(),
        db=c.db,
        stripe=c.stripe,
        apply=c.checkout_completion,
    )
    return answer(account)
