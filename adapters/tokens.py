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
# Clocks drift a little between Supabase Auth and Cloud Run; a minute's grace would be lax.
LEEWAY_SECONDS = 10
# Only what Supabase signs with: never `none`, and no HMAC with a public key as its secret.
HMAC_ALGORITHMS = ["HS256"]
KEY_ALGORITHMS = ["ES256", "RS256"]


class InvalidToken(Exception):
    """The bearer token is malformed, forged or expired."""


@dataclass(frozen=True)
class User:
    id: str
    email: str | None


class TokenVerifier:
    """Verifies access tokens; the JWKS client is created on first use and caches keys."""

    def __init__(
        self,
        *,
        jwt_secret: str | None,
        supabase_url: str | None,
        timeout: float,
    ) -> None:
        self._timeout = timeout
        self._secret = jwt_secret
        # Locally, without a project, the tokens `users token` issues name the CLI's local stack.
        self._issuer = issuer(supabase_url)
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
        email = claims.get("email")
        return User(
            id=_user_id(claims.get("sub")),
            email=email if isinstance(email, str) and email else None,
        )

    def _decode(self, token: str) -> dict[str, Any]:
        if self._secret:
            return self._checked(token, self._secret, HMAC_ALGORITHMS)
        if self._jwks_url is None:
            raise InvalidToken("no SUPABASE_JWT_SECRET or SUPABASE_URL to verify tokens with")
        if self._jwks is None:
            self._jwks = jwt.PyJWKClient(
                self._jwks_url, cache_keys=True, lifespan=600, timeout=self._timeout
            )
        key = self._jwks.get_signing_key_from_jwt(token)
        return self._checked(token, key, KEY_ALGORITHMS)

    def _checked(self, token: str, key: Any, algorithms: list[str]) -> dict[str, Any]:
        """Signature, then `exp`, `aud` and `iss`."""
        required = ["exp", "sub", "aud", "iss"]
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=algorithms,
            audience=AUDIENCE,
            issuer=self._issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": required},
        )
        return claims


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


def _user_id(sub: Any) -> str:
    """Supabase's subjects are user UUIDs; anything else would reach the database as a 500."""
    try:
        return str(uuid.UUID(str(sub)))
    except ValueError as exc:
        raise InvalidToken("token subject is not a user id") from exc
