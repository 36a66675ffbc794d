"""Supabase access tokens verified locally: HS256 with the legacy secret, else the project JWKS."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt

AUDIENCE = "authenticated"
# Where a local token says it comes from when no Supabase project is configured: the address
# of the Supabase CLI's local stack, whose tokens look the same.
LOCAL_SUPABASE_URL = "http://127.0.0.1:54321"


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


def issuer(supabase_url: str | None) -> str:
    """The `iss` Supabase Auth writes into its access tokens: the project URL + `/auth/v1`."""
    return (supabase_url or LOCAL_SUPABASE_URL).rstrip("/") + "/auth/v1"


def issue_token(
    *, secret: str, user_id: str, email: str, supabase_url: str | None, ttl: int = 3600
) -> str:
    """An HS256 access token with the claims Supabase Auth writes (for local development)."""
    now = int(time.time())
    claims = {
        "iss": issuer(supabase_url),
        "sub": user_id,
        "aud": AUDIENCE,
        "exp": now + ttl,
        "iat": now,
        "email": email,
        "phone": "",
        "app_metadata": {"provider": "email", "providers": ["email"]},
        "user_metadata": {},
        "role": "authenticated",
        "aal": "aal1",
        "amr": [{"method": "password", "timestamp": now}],
        "session_id": str(uuid.uuid4()),
        "is_anonymous": False,
    }
    return jwt.encode(claims, secret, algorithm="HS256")
