"""POST /api/payments/create-checkout and /api/payments/create-portal."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from api.deps import caller, container
from api.fields import absolute_url
from api.identity import require_user
from api.operations import COMMON, LIMITED, ErrorAnswer, UrlAnswer, documented
from api.parsing import RequestModel, json_object, validate
from billing import service as payments
from billing.rules import MOST_SEATS, Mode, Offer

bp = Blueprint("payments", __name__)

# The original spec's sentences, a contract for frontends, with the fields they need named.
PRICE_MESSAGE = "Price ID is required (priceId)"
URLS_MESSAGE = "Success and cancel URLs are required (successUrl, cancelUrl)"
MODE_MESSAGE = "Mode is required (mode: either 'payment' or 'subscription')"
RETURN_URL_MESSAGE = "Return URL is required (returnUrl)"


class CheckoutRequest(RequestModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    price_id: str = Field(alias="priceId")
    success_url: str = Field(alias="successUrl")
    cancel_url: str = Field(alias="cancelUrl")
    mode: Mode
    # Buying for a team (its owners and admins), and a per-seat price's seats.
    team_id: str | None = Field(default=None, alias="teamId", max_length=64)
    quantity: int | None = Field(default=None, ge=1, le=MOST_SEATS, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _presence_in_spec_order(cls, data: Any) -> Any:
        if not _given(data, "priceId"):
            raise ValueError(PRICE_MESSAGE)
        if not (_given(data, "successUrl") and _given(data, "cancelUrl")):
            raise ValueError(URLS_MESSAGE)
        if data.get("mode") not in ("payment", "subscription"):
            raise ValueError(MODE_MESSAGE)
        return data

    @field_validator("success_url", "cancel_url")
    @classmethod
    def _urls(cls, value: str, info: ValidationInfo) -> str:
        origin = info.context.get("origin") if info.context else None
        name = cls.model_fields[str(info.field_name)].alias or str(info.field_name)
        return absolute_url(value, name, origin=origin)


class PortalRequest(RequestModel):
    return_url: str = Field(alias="returnUrl")
    team_id: str | None = Field(default=None, alias="teamId", max_length=64)

    @model_validator(mode="before")
    @classmethod
    def _presence(cls, data: Any) -> Any:
        if not _given(data, "returnUrl"):
            raise ValueError(RETURN_URL_MESSAGE)
        return data

    @field_validator("return_url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        origin = info.context.get("origin") if info.context else None
        return absolute_url(value, "returnUrl", origin=origin)


def _given(data: Any, key: str) -> bool:
    value = data.get(key) if isinstance(data, dict) else None
    return isinstance(value, str) and bool(value.strip())


@bp.post("/api/payments/create-checkout")
@documented(
    "A Stripe Checkout URL (for a team too)",
    {200: UrlAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON, **LIMITED},
    CheckoutRequest,
    signed_in=True,
)
def create_checkout() -> ResponseReturnValue:
    c = container()
    body = validate(CheckoutRequest, json_object(), context={"origin": c.settings.site_origin})
    url = payments.create_checkout(
        price_id=body.price_id.strip(),
        mode=body.mode,
        success_url=body.success_url,
        cancel_url=body.cancel_url,
        user=caller(),
        db=c.db,
        stripe=c.stripe,
        offer=Offer(
            recovery=c.settings.checkout_recovery,
            promotions_consent=c.settings.checkout_promotions_consent,
            tax=c.settings.checkout_tax,
            adaptive_pricing=_adaptive(c.settings.checkout_adaptive_pricing),
        ),
        team_id=body.team_id,
        quantity=body.quantity,
    )
    return jsonify(url=url)


def _adaptive(setting: str | None) -> bool | None:
    return None if setting is None else setting == "on"


@bp.post("/api/payments/create-portal")
@documented(
    "A Stripe customer portal URL (a team's too)",
    {200: UrlAnswer, 401: ErrorAnswer, 403: ErrorAnswer, 404: ErrorAnswer, **COMMON, **LIMITED},
    PortalRequest,
    signed_in=True,
)
def create_portal() -> ResponseReturnValue:
    c = container()
    body = validate(PortalRequest, json_object(), context={"origin": c.settings.site_origin})
    user = require_user(caller())
    url = payments.create_portal(
        return_url=body.return_url, user=user, db=c.db, stripe=c.stripe, team_id=body.team_id
    )
    return jsonify(url=url)
