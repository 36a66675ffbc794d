"""Route guards for the founder's own routes: `@requires_feature("pro")`.

    @bp.get("/api/reports")
    @requires_feature("pro")
    def reports() -> ResponseReturnValue: ...

A guest gets 401, a user without the feature 403 naming it; a name no product grants is simply
not held. The features are read from the database on every call, so a purchase or an ended
subscription counts on the next request (a token's claims wait for its refresh).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar, cast

from flask import Response, after_this_request, make_response, request

from access import features_store as features
from api.deps import caller, container
from api.identity import require_user
from core.errors import Forbidden, InvalidRequest, Replayed, StoredAnswer
from credits import service as credits
from credits.rules import Answer, Check, kept_answer, request_digest

P = ParamSpec("P")
R = TypeVar("R")


# A client retrying a request sends the same `Idempotency-Key`: it consumes once.
IDEMPOTENCY_HEADER = "Idempotency-Key"
LONGEST_IDEMPOTENCY_KEY = 63  # with the user's id before it: within a consumption key's 100


def requires_feature(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Let the view run only for a signed-in user who holds the feature `name`."""

    def guard(view: Callable[P, R]) -> Callable[P, R]:
        @wraps(view)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            user = require_user(caller())
            if name not in features.of_user(container().db, user.id):
                raise Forbidden(f"This needs the {name} feature")
            return view(*args, **kwargs)

        return guarded

    return guard


def consumes(feature: str, amount: int = 1) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Let the view run only when the signed-in user's credits of `feature` (their own, else a
    seated team's pool) cover `amount`: reserved before the view, consumed when it answers
    below 400, given back when it fails or answers an error. Short: 402
    `{"error": "Not enough <feature> credits", "balance": n}`. A request sent again with the
    same `Idempotency-Key` header is answered what the first was answered (its status and
    body, kept with the consumption), 409 while the first still runs: the view runs once."""

    def guard(view: Callable[P, R]) -> Callable[P, R]:
        @wraps(view)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            user = require_user(caller())
            db = container().db
            key, given = _consumption_key(user.id)
            payer = credits.Payer(user_id=user.id)
            taken = credits.consume(
                db, payer, feature, amount, key, reserve=True, publish=container().bus.publish
            )
            digest = _request_digest(given)
            try:
                credits.first_time(taken, digest)
            except Replayed as replayed:
                return cast("R", as_response(replayed.answer))
            try:
                response = make_response(view(*args, **kwargs))
            except BaseException:
                credits.settle(db, key, 0)
                raise
            ok = response.status_code < 400
            credits.settle(
                db,
                key,
                amount if ok else 0,
                answer=answer_of(response, digest) if given else None,
                publish=container().bus.publish,
            )
            return cast("R", response)

        return guarded

    return guard


def credits_check(feature: str, amount: int = 1) -> Check:
    """Whether the signed-in user's pool (their own, else a seated team's) would give `amount`
    of `feature` now, and whether any of it would be overage: for a route deciding before it
    starts long work. Takes nothing: the work's own consumption decides again."""
    user = require_user(caller())
    return credits.check(container().db, credits.Payer(user_id=user.id), feature, amount)


@contextmanager
def reserved_credits(feature: str, up_to: int) -> Iterator[credits.Reservation]:
    """For work whose amount is known only once done: reserve `up_to` credits of the signed-in
    user, say what it took (`reservation.took(n)`), and the rest is given back (all of it when
    the block raises). Short of `up_to`: 402 before the work starts. A request sent again with
    the same `Idempotency-Key` header is answered what the first was answered (kept once it
    answered), 409 until then: the work runs once."""
    user = require_user(caller())
    payer = credits.Payer(user_id=user.id)
    c = container()
    key, given = _consumption_key(user.id)
    digest = _request_digest(given)
    with credits.reserved(
        c.db, payer, feature, up_to, key, request=digest, publish=c.bus.publish
    ) as r:
        yield r
    if given:

        @after_this_request
        def keep(response: Response) -> Response:
            credits.answered(c.db, key, answer_of(response, digest))
            return response


def answer_of(response: Response, request_digest: str | None) -> Answer:
    """What a request answered, as kept for a request sent again with its key: a streamed
    answer (a file sent as it is read) is not read here, nor kept (`kept_answer`)."""
    streamed = response.is_streamed or response.direct_passthrough
    body = None if streamed else response.get_data()
    return kept_answer(response.status_code, response.content_type, body, request_digest)


def _request_digest(given: bool) -> str | None:
    """The request a key was sent with (its method, path with query and body): the same key
    sent with another request is refused, never given another request's answer. Only a key the
    client gave can be sent again: without one the body is left unread (a view may stream it)."""
    if not given:
        return None
    return request_digest(request.method, request.full_path, request.get_data(cache=True))


def as_response(answer: StoredAnswer) -> Response:
    """A kept answer given again."""
    return Response(answer.body, status=answer.status, content_type=answer.content_type)


def _consumption_key(user_id: str) -> tuple[str, bool]:
    """The consumption's key, and whether the client gave it (a retry may send it again)."""
    given = request.headers.get(IDEMPOTENCY_HEADER)
    if given is None:
        return f"{user_id}:{uuid.uuid4()}", False
    if not 1 <= len(given) <= LONGEST_IDEMPOTENCY_KEY or not given.isprintable():
        raise InvalidRequest(
            f"{IDEMPOTENCY_HEADER} must be 1 to {LONGEST_IDEMPOTENCY_KEY} printable characters"
        )
    return f"{user_id}:{given}", True
