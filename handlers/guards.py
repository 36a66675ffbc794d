"""Route guards for the founder's own routes: `@requires_feature("pro")`.

    @bp.get("/api/reports")
    @requires_feature("pro")
    def reports() -> ResponseReturnValue: ...

A guest gets 401, a user without the feature 403 naming it; a name no product grants is simply
not held. The features are read from the database on every call, so a purchase or an ended
subscription counts on the next request (a token's claims wait for its refresh).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from adapters.db import features
from handlers.deps import caller, container
from services.errors import Forbidden
from services.identity import require_user

P = ParamSpec("P")
R = TypeVar("R")


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
