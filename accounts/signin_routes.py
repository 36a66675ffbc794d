"""GET /api/auth/callback."""

from __future__ import annotations

from flask import Blueprint, redirect, request
from flask.typing import ResponseReturnValue

from accounts.signin import complete_sign_in, redirect_target
from adapters.supabase_auth import COOKIE_MAX_AGE
from api.deps import container
from api.operations import LIMITED, documented

bp = Blueprint("auth", __name__)


@bp.get("/api/auth/callback")
@documented(
    "Complete sign-in: code -> session cookies -> 302",
    {302: None, **LIMITED},
)
def callback() -> ResponseReturnValue:
    c = container()
    changes = complete_sign_in(
        code=request.args.get("code"), cookies=request.cookies, auth=c.supabase_auth, bus=c.bus
    )
    target = redirect_target(site_origin=c.settings.site_origin, path=c.settings.auth_callback_url)
    response = redirect(target, code=302)
    secure = request.scheme == "https"
    # COOKIE_DOMAIN: the parent domain a frontend on a sibling host shares with the API.
    domain = c.settings.cookie_domain
    for cookie in changes.set:
        response.set_cookie(
            cookie.name,
            cookie.value,
            max_age=COOKIE_MAX_AGE,
            path="/",
            secure=secure,
            httponly=False,
            samesite="Lax",
            domain=domain,
        )
    for name in changes.clear:
        response.delete_cookie(name, path="/", secure=secure, samesite="Lax", domain=domain)
    response.headers["Cache-Control"] = "no-store"
    return response
