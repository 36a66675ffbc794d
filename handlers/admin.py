"""The support API, /api/admin/...: a founder finds a customer and fixes what went wrong.

Guarded as a whole by `admin_only` (installed before every request of the app, so it runs
before routing answers 404 or 405): a caller who is not an admin (a guest, a bad token, a
user whose profile is not `is_admin`, or, while ADMIN_MFA is `required`, an admin whose token
lacks a second factor) gets the app's own 404 for every path under /api/admin, as for a route
that does not exist. An admin's every call is appended to the audit log before it runs.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from flask import Blueprint, g, jsonify, request
from flask.blueprints import BlueprintSetupState
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException
from werkzeug.exceptions import NotFound as RouteNotFound

from adapters.db.audit import Entry
from adapters.tokens import User
from handlers.caching import depends_on_caller
from handlers.deps import container
from handlers.parsing import RequestModel, json_object, validate
from services import support
from services.errors import InvalidRequest, ServiceError, Unauthenticated
from services.identity import current_user

log = logging.getLogger(__name__)

bp = Blueprint("admin", __name__)

PREFIX = "/api/admin"
# Request details kept in the audit log, beside who, what, whom and why.
_HEADERS = ("User-Agent",)


def admin_only() -> None:
    """Let a request under /api/admin through only for an admin (see the module's docstring);
    record it in the audit log once let through."""
    if not (request.path == PREFIX or request.path.startswith(PREFIX + "/")):
        return
    c = container()
    try:
        user = current_user(
            authorization=request.headers.get("Authorization"),
            cookies=request.cookies,
            cookie_name=c.supabase_auth.cookie_name,
            tokens=c.tokens,
        )
    except Unauthenticated:
        user = None
    if (
        not support.is_admin(user, db=c.db, mfa_required=c.settings.admin_mfa == "required")
        or user is None
    ):
        raise RouteNotFound()
    depends_on_caller()
    g.admin = user
    support.record_call(c.db, _entry(user))


def _entry(user: User) -> Entry:
    args = dict(request.view_args or {})
    subject_user = args.pop("user_id", None)
    subject = next(iter(args.values()), None) or request.args.get("q")
    return Entry(
        admin_id=user.id,
        admin_email=user.email,
        action=request.endpoint or "unknown",
        subject_user_id=str(subject_user) if subject_user else None,
        subject=str(subject) if subject else None,
        reason=_reason(),
        request={
            "method": request.method,
            "path": request.path,
            "query": request.query_string.decode("utf-8", "replace"),
            "client": request.remote_addr,
            **{h.lower(): request.headers.get(h) for h in _HEADERS if h in request.headers},
        },
    )


def _reason() -> str | None:
    """The body's reason, as given, for the log (a bad body is refused by the route itself)."""
    if request.method not in ("POST", "DELETE", "PATCH", "PUT"):
        return None
    try:
        reason = json_object().get("reason")
    except (HTTPException, ServiceError):
        return None
    return reason[:1000] if isinstance(reason, str) else None


def _admin() -> User:
    found: User = g.admin
    return found


@bp.record_once
def _install(state: BlueprintSetupState) -> None:
    state.app.before_request(admin_only)
    if state.app.extensions["container"].settings.admin_mfa != "required":
        # Never silently: a development setting, refused in production (config/supabase.py).
        log.warning("ADMIN_MFA=off: the support API lets admins in without a second factor")


def _int_arg(name: str) -> int | None:
    value = request.args.get(name)
    if value is None:
        return None
    if not value.isdigit():
        raise InvalidRequest(f"{name} must be a whole number ({name})")
    return int(value)


def _page(page: support.Page) -> ResponseReturnValue:
    return jsonify(items=page.items, nextCursor=page.next_cursor)


@bp.get(f"{PREFIX}/customers")
def customers() -> ResponseReturnValue:
    c = container()
    found = support.search(
        c.db,
        q=request.args.get("q", ""),
        limit=_int_arg("limit"),
        cursor=request.args.get("cursor"),
    )
    return _page(found)


@bp.get(f"{PREFIX}/customers/<uuid:user_id>")
def customer(user_id: Any) -> ResponseReturnValue:
    c = container()
    dead = support.held_dead_letters(c.settings, c.bus)
    return jsonify(support.customer(c.db, str(user_id), dead_letters=dead))


class CompRequest(RequestModel):
    priceId: str
    until: datetime | None
    reason: str


@bp.post(f"{PREFIX}/customers/<uuid:user_id>/grants")
def give_comp(user_id: Any) -> ResponseReturnValue:
    c = container()
    data = json_object()
    reason = support.require_reason(data.get("reason"))
    body = validate(CompRequest, data)
    made = support.give_comp(
        c.db,
        user_id=str(user_id),
        price_id=body.priceId,
        until=body.until,
        reason=reason,
        admin=_admin(),
    )
    return jsonify(made), 201


class ReasonRequest(RequestModel):
    reason: str


def _reason_body() -> str:
    data = json_object()
    reason = support.require_reason(data.get("reason"))
    validate(ReasonRequest, data)
    return reason


@bp.delete(f"{PREFIX}/grants/<grant_id>")
def end_grant(grant_id: str) -> ResponseReturnValue:
    c = container()
    _reason_body()
    return jsonify(support.end_grant(c.db, grant_id))


@bp.post(f"{PREFIX}/events/<event_id>/replay")
def replay(event_id: str) -> ResponseReturnValue:
    c = container()
    _reason_body()
    return jsonify(
        support.replay(
            event_id=event_id,
            stripe=c.stripe,
            db=c.db,
            access=c.checkout_completion,
            bus=c.bus,
        )
    )


@bp.get(f"{PREFIX}/metrics")
def metrics() -> ResponseReturnValue:
    return jsonify(support.metrics(container().db))


@bp.get(f"{PREFIX}/audit")
def audit() -> ResponseReturnValue:
    c = container()
    return _page(
        support.audit_page(c.db, limit=_int_arg("limit"), cursor=request.args.get("cursor"))
    )
