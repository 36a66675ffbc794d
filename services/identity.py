"""Who is calling: a Supabase access token from the Authorization header or the session cookie."""

from __future__ import annotations

from collections.abc import Mapping

from adapters.supabase_auth import read_session
from adapters.tokens import InvalidToken, TokenVerifier, User
from services.errors import Unauthenticated


def current_user(
    *,
    authorization: str | None,
    cookies: Mapping[str, str],
    cookie_name: str,
    tokens: TokenVerifier,
) -> User | None:
    """The signed-in user, None for a guest; a token that is present but bad is refused."""
    token = _bearer(authorization) if authorization else _cookie_token(cookies, cookie_name)
    if token is None:
        return None
    try:
        return tokens.verify(token)
    except InvalidToken as exc:
        raise Unauthenticated(f"Invalid or expired access token: {exc}") from exc


def _bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("Authorization header must be 'Bearer <access token>'")
    return token.strip()


def _cookie_token(cookies: Mapping[str, str], cookie_name: str) -> str | None:
    session = read_session(cookie_name, cookies)
    if session is None:
        return None
    token = session.get("access_token")
    return token if isinstance(token, str) and token else None


def require_user(user: User | None) -> User:
    """The user, or a 401 for a guest."""
    if user is None:
        raise Unauthenticated("Sign in required")
    return user
