"""POST /api/lead."""

from __future__ import annotations

from typing import Annotated, Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from pydantic import ConfigDict, WithJsonSchema, field_validator

from adapters.db.leads import add_lead
from core.addresses import email_address
from handlers.deps import container
from handlers.fields import required_text
from handlers.parsing import EMAIL_SCHEMA, RequestModel, json_object, validate

bp = Blueprint("leads", __name__)


class LeadRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["email"]})

    email: Annotated[Any, WithJsonSchema(EMAIL_SCHEMA)] = None

    @field_validator("email", mode="before")
    @classmethod
    def _email(cls, value: Any) -> str:
        return email_address(required_text(value, "Email is required"))


@bp.post("/api/lead")
def create_lead() -> ResponseReturnValue:
    lead = validate(LeadRequest, json_object())
    add_lead(container().db, lead.email)
    return jsonify(success=True)
