"""Domain errors: what the service refuses, in words safe to show the caller.

They carry no HTTP status: `api/errors.py` maps each class to one, in one place.
"""

from __future__ import annotations

from typing import Protocol


class ServiceError(Exception):
    """A request the service refuses, with a message safe to show the caller."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(ServiceError):
    """The request itself is wrong; sending it again will not help."""


class Unauthenticated(ServiceError):
    """No valid credentials where the operation needs them."""


class Forbidden(ServiceError):
    """Valid credentials that do not allow the operation."""


class NotFound(ServiceError):
    """What the request names does not exist, or not for this caller."""


class Conflict(ServiceError):
    """The request contradicts what is already recorded."""


class ConflictWithAnswer(Conflict):
    """A conflict whose answer carries more than its message (a fresh preview to confirm)."""

    def __init__(self, message: str, *, extra: dict[str, object]) -> None:
        super().__init__(message)
        self.extra = extra


class NotConfigured(ServiceError):
    """The operation needs a setting the operator has not given."""


class Unavailable(ServiceError):
    """A dependency is down; the same request may succeed later."""


class TooManyRequests(ServiceError):
    """The caller did this as often as it may for now; it may again after `retry_after`
    seconds."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotEnoughCredits(ServiceError):
    """A consumption beyond the balance of an account no meter bills for the overage, or whose
    overage would pass its cap for the period."""

    def __init__(self, message: str, *, balance: int) -> None:
        super().__init__(message)
        self.balance = balance


class StoredAnswer(Protocol):
    """What a route answered the first time: its status, content type and body."""

    @property
    def status(self) -> int: ...
    @property
    def content_type(self) -> str | None: ...
    @property
    def body(self) -> bytes: ...


class Replayed(Exception):  # an answer, not a failure
    """A request sent again with a key whose first request answered: that answer, given again
    (api/errors.py turns it into the response)."""

    def __init__(self, answer: StoredAnswer) -> None:
        super().__init__(f"replayed answer {answer.status}")
        self.answer = answer
