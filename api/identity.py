"""Who is calling: a Supabase access token from the Authorization header or the session cookie,
of a user who still has an account."""

from __future__ import annotations

from collections.abc import Mapping

from adapters.db import profiles
from adapters.db.pool import Database
from adapters.supabase_auth import read_session
from adapters.tokens import InvalidToken, TokenVerifier, User
from core.errors import Unauthenticated


def current_user(
    *,
    authorization: str | None,
    cookies: Mapping[str, str],
    cookie_name: str,
    tokens: TokenVerifier,
    db: Database,
    resuming_deletion: bool = False,
) -> User | None:
    """The signed-in user, None for a guest; a token that is present but bad is refused, and so
    is a good one whose user was deleted or is being deleted (`resuming_deletion`: the call that
    finishes that deletion, let through)."""
    token = _bearer(authorization) if authorization else _cookie_token(cookies, cookie_name)
    if token is None:
        return None
    try:
        user = tokens.verify(token)
    except InvalidToken as exc:
        raise Unauthenticated(f"Invalid or expired access token: {exc}") from exc
    found = profiles.standing(db, user.id)
    refusal = token_refusal(
        present=found.present, leaving=found.leaving, resuming=resuming_deletion
    )
    if refusal is not None:
        raise Unauthenticated(refusal)
    return user


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


def token_refusal(*, present: bool, leaving: bool, resuming: bool) -> str | None:
    """Why a valid access token is refused for who it names, or None. A token outlives its
    user (it is checked by its signature alone): a person whose profile is gone (it goes with
    their auth user) is refused, and so is one whose deletion is under way, from the moment it
    was asked for, so that nothing is bought or changed while its steps run. The one call let
    through then is the deletion's own, asked again (`resuming`), which finishes it."""
    if leaving:
        return None if resuming else "This account is being deleted"
    if not present:
        return "This account was deleted"
    return None
