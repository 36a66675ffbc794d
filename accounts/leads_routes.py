"""POST /api/lead, and a lead's removal by the signed link in the mails a lead gets."""

from __future__ import annotations

import html
from typing import Annotated, Any

from flask import Blueprint, Response, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import ConfigDict, WithJsonSchema, field_validator

from accounts.leads import token_matches
from accounts.leads_store import add_lead, has_lead, remove_lead
from api.deps import container
from api.fields import required_text
from api.operations import COMMON, LIMITED, ErrorAnswer, SuccessAnswer, documented
from api.parsing import EMAIL_SCHEMA, RequestModel, json_object, validate, whole_body
from core.addresses import email_address
from core.errors import InvalidRequest, NotConfigured

bp = Blueprint("leads", __name__)


class LeadRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["email"]})

    email: Annotated[Any, WithJsonSchema(EMAIL_SCHEMA)] = None

    @field_validator("email", mode="before")
    @classmethod
    def _email(cls, value: Any) -> str:
        return email_address(required_text(value, "Email is required"))


@bp.post("/api/lead")
@documented(
    "Store a lead",
    {200: SuccessAnswer, **COMMON, **LIMITED},
    LeadRequest,
)
def create_lead() -> ResponseReturnValue:
    lead = validate(LeadRequest, json_object())
    add_lead(container().db, lead.email)
    return jsonify(success=True)


class RemovalQuery(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["email", "token"]})

    email: Annotated[Any, WithJsonSchema(EMAIL_SCHEMA)] = None
    token: Annotated[Any, WithJsonSchema({"type": "string", "maxLength": 64})] = None

    @field_validator("email", mode="before")
    @classmethod
    def _email(cls, value: Any) -> str:
        return email_address(required_text(value, "Email is required"))

    @field_validator("token", mode="before")
    @classmethod
    def _token(cls, value: Any) -> str:
        token = required_text(value, "The link's token is required")
        if len(token) > 64:
            raise ValueError("This removal link is not valid")
        return token


def _removal() -> RemovalQuery:
    """The link's address and token (in its query, as the mail carries them), checked."""
    found = validate(RemovalQuery, request.args.to_dict())
    key = container().settings.lead_link_key
    if key is None:
        raise NotConfigured("Lead removal links are not configured: set LEAD_LINK_SECRET")
    if not token_matches(key, found.email, found.token):
        raise InvalidRequest("This removal link is not valid (token)")
    return found


@bp.get("/api/leads/remove")
@documented(
    "A lead's removal link (signed): an HTML page asking to confirm; removes nothing",
    {200: None, 400: ErrorAnswer, 503: ErrorAnswer, **LIMITED},
    query=RemovalQuery,
)
def removal_page() -> ResponseReturnValue:
    """The page a removal link opens: it asks to confirm, and removes nothing (a link scanner or
    a prefetch GETs it too)."""
    found = _removal()
    address = html.escape(found.email)
    if not has_lead(container().db, found.email):
        return _page("Not on our list", f"<p>{address} is not on our list.</p>")
    form = (
        f'<form method="post"><p>Remove {address} from our list? We will not write to it'
        ' again.</p><button type="submit">Remove me</button></form>'
    )
    return _page("Remove your address", form)


@bp.post("/api/leads/remove")
@documented(
    "Remove the lead the signed link names (the page's form, or RFC 8058 one-click); an HTML page",
    {200: None, **COMMON, **LIMITED},
    query=RemovalQuery,
)
def remove() -> ResponseReturnValue:
    """The confirming POST of the page's form, or a mail client's one-click unsubscribe
    (RFC 8058: `List-Unsubscribe=One-Click`): the lead goes."""
    whole_body()  # held to the size limit; the address and token are in the link
    found = _removal()
    remove_lead(container().db, found.email)
    address = html.escape(found.email)
    return _page("Removed", f"<p>{address} is off our list: we will not write to it again.</p>")


def _page(title: str, body: str) -> Response:
    name = html.escape(container().brand.product_name)
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{name}: {html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    response = Response(page, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Security-Policy"] = "default-src 'none'; form-action 'self'"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
