"""What handlers receive from the composition root."""

from __future__ import annotations

from flask import current_app, request

from adapters.tokens import User
from runtime.container import Container
from services.identity import current_user


def container() -> Container:
    """The app's container, installed by `create_app`."""
    found: Container = current_app.extensions["container"]
    return found


def caller() -> User | None:
    """The signed-in user of this request; None for a guest, 401 for a bad token."""
    c = container()
    return current_user(
        authorization=request.headers.get("Authorization"),
        cookies=request.cookies,
        cookie_name=c.supabase_auth.cookie_name,
        tokens=c.tokens,
    )
