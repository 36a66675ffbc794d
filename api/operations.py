"""A route's entry in the OpenAPI document, declared where the route is: `@documented(...)` under
its `@bp.<method>(...)` names what it answers (status -> model) and what it reads (a body, a
query, headers, who may call it). `runtime/openapi.py` walks the registered routes and reads these,
so a new route edits no central list."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

View = TypeVar("View", bound=Callable[..., object])

# Where the operations of a view function hang, keyed by the route's path (None: any of its
# paths), so one function served at two paths may be told two ways.
ATTRIBUTE = "__operations__"


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorAnswer(Answer):
    error: str


class SuccessAnswer(Answer):
    success: bool


class UrlAnswer(Answer):
    url: str | None


class EmptyAnswer(Answer):
    pass


# Statuses every route may answer: refused input, a body too large, a dependency down.
COMMON: dict[int, type[BaseModel] | None] = {
    400: ErrorAnswer,
    413: ErrorAnswer,
    415: ErrorAnswer,
    503: ErrorAnswer,
}
# Routes under a per-client limit (runtime/limits.py) answer 429 past it.
LIMITED: dict[int, type[BaseModel] | None] = {429: ErrorAnswer}


@dataclass(frozen=True)
class Operation:
    summary: str
    answers: dict[int, type[BaseModel] | None]
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    signed_in: bool = False
    headers: tuple[str, ...] = field(default=())
    usage_key: bool = False  # authorised by USAGE_API_KEY as a bearer token


def documented(
    summary: str,
    answers: dict[int, type[BaseModel] | None],
    body: type[BaseModel] | None = None,
    *,
    query: type[BaseModel] | None = None,
    signed_in: bool = False,
    headers: tuple[str, ...] = (),
    usage_key: bool = False,
    path: str | None = None,
) -> Callable[[View], View]:
    """Declare the route's operation on its view function (`path`: only for that one of its
    paths, as Flask writes it)."""
    operation = Operation(summary, answers, body, query, signed_in, headers, usage_key)

    def declare(view: View) -> View:
        declared: dict[str | None, Operation] = dict(getattr(view, ATTRIBUTE, {}))
        declared[path] = operation
        setattr(view, ATTRIBUTE, declared)
        return view

    return declare


def operation_of(view: Callable[..., object], path: str) -> Operation | None:
    """What a view function declared for one of its paths (as Flask writes it)."""
    declared: dict[str | None, Operation] = getattr(view, ATTRIBUTE, {})
    return declared.get(path, declared.get(None))
