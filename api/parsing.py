"""Request bodies: JSON objects only, validated by pydantic models into one clear message."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from flask import request
from pydantic import BaseModel, ConfigDict, ValidationError
from werkzeug.exceptions import RequestEntityTooLarge, UnsupportedMediaType

from core.errors import InvalidRequest

Model = TypeVar("Model", bound=BaseModel)


# How an e-mail field looks in the OpenAPI document (its rule: core.addresses.email_address).
EMAIL_SCHEMA = {"type": "string", "format": "email", "maxLength": 254}


class RequestModel(BaseModel):
    """A request body or query: the contract is small, so an unknown field is refused."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def whole_body(*, cache: bool = True) -> bytes:
    """The request body, whole: a body past the size limit is a 413 however it was sent.

    Werkzeug refuses a declared Content-Length past `max_content_length`, but reads a chunked
    body only up to the limit and returns what it read as if it were all: whether more follows
    is asked of the server's own stream.
    """
    data = request.get_data(cache=cache)
    limit = request.max_content_length
    chunked = request.content_length is None
    if (
        chunked
        and limit is not None
        and len(data) >= limit
        and request.environ["wsgi.input"].read(1)
    ):
        raise RequestEntityTooLarge()
    return data


def json_object() -> dict[str, Any]:
    """The request body as a JSON object; a clear 4xx for anything else."""
    body = whole_body()
    if not body:
        return {}
    if not request.is_json:
        raise UnsupportedMediaType()
    try:
        # orjson refuses bad UTF-8 and nesting past its limit as malformed, where `json` would
        # overflow the stack.
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
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
        # A field's own problem names the field as the client sends it, unless it already does.
        field = str(first["loc"][-1]) if first["loc"] else None
        if field and not (message.startswith(f"{field} ") or f"({field}" in message):
            message = f"{message} ({field})"
        raise InvalidRequest(message) from exc
