"""Sign-in completion: a PKCE code becomes session cookies in the format @supabase/ssr reads."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from accounts import welcome_rules as welcome
from adapters.bus import EventBus, publish_or_log
from adapters.supabase_auth import Cookie, SupabaseAuth, decode_value, session_cookies

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CookieChanges:
    set: list[Cookie] = field(default_factory=list)
    clear: list[str] = field(default_factory=list)


def complete_sign_in(
    *, code: str | None, cookies: Mapping[str, str], auth: SupabaseAuth, bus: EventBus
) -> CookieChanges:
    """Exchange the code when there is one; a failure leaves the cookies as they are."""
    if not code:
        return CookieChanges()
    key = auth.cookie_name
    verifier_cookie = f"{key}-code-verifier"
    session = auth.exchange_code(code=code, code_verifier=_verifier(cookies.get(verifier_cookie)))
    if session is None:
        return CookieChanges()
    _publish_new_account(session.get("user"), bus)
    fresh = session_cookies(key, session)
    names = {c.name for c in fresh}
    stale = [n for n in cookies if re.fullmatch(re.escape(key) + r"(\.\d+)?", n) and n not in names]
    return CookieChanges(set=fresh, clear=[verifier_cookie, *stale])


def _publish_new_account(user: Any, bus: EventBus) -> None:
    """Publish `app.account.created` for a recently created user (the welcome e-mail's trigger).

    A magic link, OAuth or an e-mail confirmation completes here: the session's user is the
    first sight of a new account. A password sign-up does not pass here: its first `GET /api/me`
    welcomes it (accounts/welcome_rules.py). The event id is the user's, so the welcome mail goes
    out once however often, and by whichever way, they sign in; a failed publish must not fail the
    sign-in.
    """
    if not isinstance(user, Mapping) or not user.get("id") or not user.get("email"):
        return
    now = datetime.now(UTC)
    created = _parse_time(user.get("created_at"))
    if not welcome.due(created_at=created, welcomed_at=None, email=user["email"], now=now):
        return
    meta = user.get("user_metadata")
    name = meta.get("full_name") if isinstance(meta, Mapping) else None
    event, data = welcome.welcome(user_id=str(user["id"]), email=user["email"], name=name, now=now)
    publish_or_log(bus, event, data, what=f"the new account {user['id']}")


def _parse_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _verifier(value: str | None) -> str | None:
    """supabase-js stores `verifier` or `verifier/PASSWORD_RECOVERY`, JSON-encoded."""
    if not value:
        return None
    try:
        stored = decode_value(value)
    except ValueError:
        return None
    # Only a string is a verifier (str() of a stranger's deep list would overflow the stack).
    return (stored.partition("/")[0] or None) if isinstance(stored, str) else None


def redirect_target(*, site_origin: str | None, path: str) -> str:
    """Where sign-in lands: SITE_URL's origin plus the configured path, else the path alone.

    A bare path resolves against the URL the browser asked for, so neither a forged `Host` nor
    an `X-Forwarded-Proto` of `javascript` can send the user elsewhere.
    """
    return (site_origin or "").rstrip("/") + path
