"""POST /api/payments/complete-checkout: the success page's checkout, applied at once."""

from __future__ import annotations

import re
from typing import Any, Protocol, cast

from flask import Blueprint, Response, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from access import grant_words_service as grant_words
from access.entitlements import GrantKind
from access.subscriber import AccessSubscriber
from accounts.routes import MeAnswer, answer
from api.deps import Collaborators, caller, container
from api.operations import COMMON, LIMITED, ErrorAnswer, documented
from api.parsing import RequestModel, json_object, validate
from billing.completion import SessionAnswer, complete_checkout


class _Collaborators(Collaborators, Protocol):
    """What these routes use of the container beyond every domain's `Collaborators`."""

    @property
    def checkout_completion(self) -> AccessSubscriber: ...


def _container() -> _Collaborators:
    return cast("_Collaborators", container())


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


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PurchasedProduct(_Answer):
    name: str | None  # None: a price no product row is sold at
    priceId: str | None
    kind: GrantKind  # purchase: a one-time payment


class SessionGrantAnswer(_Answer):
    """A guest token's answer: what the session bought, nothing of the account it landed on
    (an e-mail typed on Stripe's page chose that account, and nobody verified it)."""

    sessionId: str
    applied: bool  # the session's grant is recorded
    hasAccess: bool  # that grant gives access now (not: whether the account has any)
    product: PurchasedProduct | None  # None while not applied
    features: list[str]  # sorted: the features the product grants
    # What it is and what comes next, in words a page shows as is (access/grant_words.py): a
    # trial's end and first charge, a pack's credits; None while not applied.
    label: str | None = None
    summary: str | None = None


class CompletionAnswer(RootModel[MeAnswer | SessionGrantAnswer]):
    """GET /api/me's answer to the session's signed-in buyer; the session's grant to a guest
    token's holder."""


@bp.post("/api/payments/complete-checkout")
@documented(
    "The success page's paid checkout applied at once: GET /api/me's answer to its"
    " signed-in buyer, only the session's grant to a guest token",
    {
        200: CompletionAnswer,
        401: ErrorAnswer,
        404: ErrorAnswer,
        409: ErrorAnswer,
        **COMMON,
        **LIMITED,
    },
    CompletionRequest,
    signed_in=True,
)
def complete() -> ResponseReturnValue:
    c = _container()
    body = validate(CompletionRequest, json_object())
    completed = complete_checkout(
        session_id=body.session_id,
        token=body.token,
        user=caller(),
        db=c.db,
        stripe=c.stripe,
        apply=c.checkout_completion,
    )
    if isinstance(completed, SessionAnswer):
        return _session_answer(completed)
    return answer(completed)


def _session_answer(completed: SessionAnswer) -> Response:
    grant = completed.grant
    told = grant_words.of_held(grant.held) if grant is not None and grant.held else None
    body = SessionGrantAnswer(
        sessionId=completed.session_id,
        applied=grant is not None,
        hasAccess=grant is not None and grant.active,
        product=(
            PurchasedProduct(name=grant.product_name, priceId=grant.price_id, kind=grant.kind)
            if grant is not None
            else None
        ),
        features=grant.features if grant is not None else [],
        label=told.label if told else None,
        summary=told.summary if told else None,
    )
    response = jsonify(body.model_dump(mode="json"))
    # The token is a bearer secret of one buyer: no shared cache keeps what it opens.
    response.headers["Cache-Control"] = "private, no-store"
    return response
