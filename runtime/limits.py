"""Per-client request limits on the routes a stranger could abuse (Flask-Limiter, in memory).

Each instance counts on its own: a client spread over N instances gets up to N times the limit.
That is the price of needing no shared store; Cloud Armor in front of the service is the global
layer (docs/security.md, "The limits are per instance").
"""

from __future__ import annotations

import math
import time
from typing import Any

from flask import Flask, request
from flask.typing import ResponseReturnValue
from flask_limiter import Limiter
from flask_limiter.errors import RateLimitExceeded

from api.errors import error
from config import Settings

# Endpoint -> the setting that holds its limit.
ROUTE_LIMITS = {
    "leads.create_lead": "rate_limit_lead",
    "leads.removal_page": "rate_limit_lead",
    "leads.remove": "rate_limit_lead",
    "auth.callback": "rate_limit_sign_in",
    "payments.create_checkout": "rate_limit_checkout",
    "payments.create_portal": "rate_limit_portal",
    "plan_changes.preview_change": "rate_limit_checkout",
    "plan_changes.change_plan": "rate_limit_checkout",
    "plan_changes.cancel": "rate_limit_checkout",
    "plan_changes.resume": "rate_limit_checkout",
    "checkout_completion.complete": "rate_limit_complete_checkout",
    "github.github_access": "rate_limit_github_access",
    "me.me": "rate_limit_me",
    "leaving.export": "rate_limit_me",
    "leaving.delete_account": "rate_limit_me",
    "top_up.turn_on": "rate_limit_me",
    "top_up.turn_off": "rate_limit_me",
    "teams.create_team": "rate_limit_teams",
    "teams.invite": "rate_limit_invitations",
    "teams.resend_invitation": "rate_limit_invitations",
    "teams.look_up_invitation": "rate_limit_teams",
    "teams.accept_invitation": "rate_limit_teams",
    "plan_changes.set_seats": "rate_limit_checkout",
    "sample_emails.send_sample_emails": "rate_limit_test_email",
}


def client_address() -> str:
    """The client as the trusted proxies saw it (ProxyFix has applied TRUSTED_PROXY_HOPS)."""
    return request.remote_addr or "unknown"


def install(app: Flask, settings: Settings) -> Limiter:
    """Wrap each limited route of `app` (call after its blueprints are registered)."""
    limiter = Limiter(
        key_func=client_address, app=app, storage_uri="memory://", strategy="moving-window"
    )
    for endpoint, setting in ROUTE_LIMITS.items():
        view = app.view_functions.get(endpoint)
        if view is not None:  # the test-email route exists only where it is enabled
            limited: Any = limiter.limit(getattr(settings, setting))(view)
            app.view_functions[endpoint] = limited

    # The limits live on their routes (the wrappers above), which check them when called. The
    # extension's own before-request check looks for default limits on every request and
    # finds none: it is taken out, a cost on every webhook for nothing (bench/README.md).
    app.before_request_funcs[None].remove(limiter._check_request_limit)

    def too_many(exc: RateLimitExceeded) -> ResponseReturnValue:
        current = limiter.current_limit
        wait = math.ceil(current.window.reset_time - time.time()) if current else 60
        response = error("Too many requests; try again later", 429)
        response.headers["Retry-After"] = str(max(1, wait))
        return response

    app.register_error_handler(RateLimitExceeded, too_many)
    return limiter
