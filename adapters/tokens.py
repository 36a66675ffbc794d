"""Supabase access tokens verified locally: HS256 with the legacy secret, else the project JWKS."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jwt

AUDIENCE = "authenticated"


class InvalidToken(Exception):
    """The bearer token is malformed, forged or expired."""


@dataclass(frozen=True)
class User:
    id: str
    email: str | None


class TokenVerifier:
    """Verifies access tokens; the JWKS client is created on first use and caches keys."""

    def __init__(self, *, jwt_secret: str | None, supabase_url: str | None, timeout: float) -> None:
        self._timeout = timeout
        self._secret = jwt_secret
        self._jwks_url = (
            f"{supabase_url.rstrip('/')}/auth/v1/.well-known/jwks.json" if supabase_url else None
        )
        self._jwks: jwt.PyJWKClient | None = None

    def verify(self, token: str) -> User:
        """The user a token names; raises InvalidToken for anything else."""
        try:
            claims = self._decode(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from exc
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise InvalidToken("token has no subject")
        email = claims.get("email")
        return User(id=sub, email=email if isinstance(email, str) and email else None)

    def _decode(self, token: str) -> dict[str, Any]:
        options: Any = {"require": ["exp", "sub"]}
        if self._secret:
            return jwt.decode(
                token, self._secret, algorithms=["HS256"], audience=AUDIENCE, options=options
            )
        if self._jwks_url is None:
            raise InvalidToken("no SUPABASE_JWT_SECRET or SUPABASE_URL to verify tokens with")
        if self._jwks is None:
            self._jwks = jwt.PyJWKClient(
                self._jwks_url, cache_keys=True, lifespan=600, timeout=self._timeout
            )
        key = self._jwks.get_signing_key_from_jwt(token)
        return jwt.decode(
            token, key, algorithms=["ES256", "RS256"], audience=AUDIENCE, options=options
        )
