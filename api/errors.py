"""Every error as `{"error": ...}`, mapped in one place; causes go to the log, not the caller."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException

from adapters.db.pool import DatabaseUnavailable
from core.errors import (
    Conflict,
    ConflictWithAnswer,
    Forbidden,
    InvalidRequest,
    NotConfigured,
    NotEnoughCredits,
    NotFound,
    Replayed,
    ServiceError,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
)

log = logging.getLogger(__name__)

MESSAGES = {
    400: "Bad request",
    404: "Not found",
    405: "Method not allowed",
    413: "Request body too large",
    415: "Content-Type must be application/json",
}


# Each domain error's status; a subclass takes its nearest listed ancestor's.
STATUS: dict[type[ServiceError], int] = {
    InvalidRequest: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    NotEnoughCredits: 402,
    Conflict: 409,
    TooManyRequests: 429,
    NotConfigured: 503,
    Unavailable: 503,
}
# Seconds a client should wait before retrying a 503.
RETRY_AFTER = "5"


def status_of(exc: ServiceError) -> int:
    """The HTTP status for a domain error (400 for one not listed)."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400


def error(message: str, status: int) -> Response:
    """A JSON error answer."""
    response = jsonify(error=message)
    response.status_code = status
    return response


def register(app: Flask) -> None:
    """Install the error handlers on the app."""

    @app.errorhandler(ServiceError)
    def _service(exc: ServiceError) -> ResponseReturnValue:
        status = status_of(exc)
        response = error(exc.message, status)
        if isinstance(exc, NotEnoughCredits):
            response = jsonify(error=exc.message, balance=exc.balance)
            response.status_code = status
        if isinstance(exc, ConflictWithAnswer):
            response = jsonify({**exc.extra, "error": exc.message})
            response.status_code = status
        if status == 503:
            response.headers["Retry-After"] = RETRY_AFTER
        if isinstance(exc, TooManyRequests):
            response.headers["Retry-After"] = str(max(1, exc.retry_after))
        return response

    @app.errorhandler(Replayed)
    def _replayed(exc: Replayed) -> ResponseReturnValue:
        # A consumption key's first answer, given again (access/guards.py).
        answer = exc.answer
        return Response(answer.body, status=answer.status, content_type=answer.content_type)

    @app.errorhandler(DatabaseUnavailable)
    def _database(exc: DatabaseUnavailable) -> ResponseReturnValue:
        log.error("database unavailable: %s", exc.__cause__ or exc)
        response = error("Service temporarily unavailable; please retry shortly", 503)
        response.headers["Retry-After"] = RETRY_AFTER
        return response

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> ResponseReturnValue:
        status = exc.code or 500
        response = exc.get_response()
        message = MESSAGES.get(status) or exc.name
        body = error(message, status)
        for header in ("Allow", "Retry-After"):
            if header in response.headers:
                body.headers[header] = response.headers[header]
        return body

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error: %s", exc)
        return error("Internal server error", 500)
