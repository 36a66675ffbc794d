"""Request bodies: JSON objects only, validated by pydantic models into one clear message."""

from __future__ import annotations

from typing import Any, TypeVar

from flask import request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import UnsupportedMediaType

from services.errors import InvalidRequest

Model = TypeVar("Model", bound=BaseModel)


def json_object() -> dict[str, Any]:
    """The request body as a JSON object; a clear 4xx for anything else."""
    if not request.get_data(cache=True):
        return {}
    if not request.is_json:
        raise UnsupportedMediaType()
    data = request.get_json(silent=True)
    if data is None:
        raise InvalidRequest("Malformed JSON body")
    if not isinstance(data, dict):
        raise InvalidRequest("JSON body must be an object")
    return data


def validate(model: type[Model], data: Any, *, context: dict[str, Any] | None = None) -> Model:
    """Validate into `model`; the first problem becomes the 400 message."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidRequest(message) from exc
