"""Request bodies: JSON objects only, validated by pydantic models into one clear message."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from flask import request
from pydantic import BaseModel, ConfigDict, ValidationError
from werkzeug.exceptions import UnsupportedMediaType

from services.errors import InvalidRequest

Model = TypeVar("Model", bound=BaseModel)


# How an e-mail field looks in the OpenAPI document (its rule: core.addresses.email_address).
EMAIL_SCHEMA = {"type": "string", "format": "email", "maxLength": 254}


class RequestModel(BaseModel):
    """A request body or query: the contract is small, so an unknown field is refused."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def json_object() -> dict[str, Any]:
    """The request body as a JSON object; a clear 4xx for anything else."""
    if not request.get_data(cache=True):
        return {}
    if not request.is_json:
        raise UnsupportedMediaType()
    try:
        data = json.loads(request.get_data(cache=True))
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting past Python's limit
        raise InvalidRequest("Malformed JSON body") from exc
    if not isinstance(data, dict):
        raise InvalidRequest("JSON body must be an object")
    return data


def validate(model: type[Model], data: Any, *, context: dict[str, Any] | None = None) -> Model:
    """Validate into `model`; the first problem becomes the 400 message."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "extra_forbidden":
            raise InvalidRequest(f"Unknown field '{first['loc'][-1]}'") from exc
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidRequest(message) from exc
