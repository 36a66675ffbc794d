"""Sign-in completion: a PKCE code becomes session cookies in the format @supabase/ssr reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from adapters.supabase_auth import Cookie, SupabaseAuth, decode_value, session_cookies


@dataclass(frozen=True)
class CookieChanges:
    set: list[Cookie] = field(default_factory=list)
    clear: list[str] = field(default_factory=list)


def complete_sign_in(
    *, code: str | None, cookies: Mapping[str, str], auth: SupabaseAuth
) -> CookieChanges:
    """Exchange the code when there is one; a failure leaves the cookies as they are."""
    if not code:
        return CookieChanges()
    key = auth.cookie_name
    verifier_cookie = f"{key}-code-verifier"
    session = auth.exchange_code(code=code, code_verifier=_verifier(cookies.get(verifier_cookie)))
    if session is None:
        return CookieChanges()
    fresh = session_cookies(key, session)
    names = {c.name for c in fresh}
    stale = [n for n in cookies if re.fullmatch(re.escape(key) + r"(\.\d+)?", n) and n not in names]
    return CookieChanges(set=fresh, clear=[verifier_cookie, *stale])


def _verifier(value: str | None) -> str | None:
    """supabase-js stores `verifier` or `verifier/PASSWORD_RECOVERY`, JSON-encoded."""
    if not value:
        return None
    try:
        stored = decode_value(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return str(stored).partition("/")[0] if stored else None


def redirect_target(*, site_origin: str | None, request_origin: str, path: str) -> str:
    """Where sign-in lands: always our own origin plus the configured path."""
    return (site_origin or request_origin).rstrip("/") + path
