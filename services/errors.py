"""Domain errors; one error handler maps them to HTTP (`handlers/errors.py`)."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses, with a message safe to show the caller."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(ServiceError):
    status = 400


class Unauthenticated(ServiceError):
    status = 401


class Forbidden(ServiceError):
    status = 403


class NotConfigured(ServiceError):
    status = 503


class Unavailable(ServiceError):
    status = 503
