"""Supabase access tokens verified locally, by what each token is.

A project signs its users' tokens with its legacy JWT secret (HS256) or, since it moved to
signing keys, with an asymmetric key (ES256, or RS256) it publishes at
`/auth/v1/.well-known/jwks.json` beside a standby key for the next rotation. During the move
both kinds are live at once, so each token is checked by its own `alg`: HS256 with
SUPABASE_JWT_SECRET (refused once the secret is removed), ES256/RS256 against the JWKS. The
JWKS is cached; a token naming a key not in it fetches it again, at most once per
`refetch_seconds`, so a rotated key is accepted within that time without a restart and a flood
of made-up key ids costs one fetch, not one per request.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# PyJWT loads `cryptography` (costly to import: bench/coldstart.py): imported by the first
# token verified or issued, so that a process's start-up and its anonymous requests do not wait
# for it.
if TYPE_CHECKING:
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
    # The token's authenticator assurance level: `aal2` once the session passed a second
    # factor (Supabase MFA), `aal1` otherwise; None when the token says nothing.
    aal: str | None = None


class SigningKeys:
    """The project's JWKS, fetched on first use, kept `max_age` seconds, fetched again for an
    unknown key id no more often than every `refetch_seconds`."""

    def __init__(
        self, url: str, *, timeout: float, max_age: float = 600, refetch_seconds: float = 10
    ) -> None:
        self._url = url
        self._timeout = timeout
        self._max_age = max_age
        self._refetch = refetch_seconds
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()

    def key(self, kid: str) -> jwt.PyJWK:
        with self._lock:
            now = time.monotonic()
            stale = self._fetched_at is None or now - self._fetched_at > self._max_age
            unknown = kid not in self._keys
            may_refetch = self._fetched_at is None or now - self._fetched_at >= self._refetch
            if stale or (unknown and may_refetch):
                self._keys = self._fetch()
                self._fetched_at = now
            found = self._keys.get(kid)
        if found is None:
            raise InvalidToken(f"token signed with an unknown key ({kid!r})")
        return found

    def _fetch(self) -> dict[str, jwt.PyJWK]:
        import jwt

        try:
            with urllib.request.urlopen(self._url, timeout=self._timeout) as response:  # noqa: S310
                document = json.load(response)
            keys = jwt.PyJWKSet.from_dict(document).keys
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise InvalidToken(f"the project's signing keys could not be read: {exc}") from exc
        return {str(k.key_id): k for k in keys if k.key_id}


class TokenVerifier:
    """Verifies access tokens: HS256 with the legacy secret, ES256/RS256 with the JWKS."""

    def __init__(
        self,
        *,
        jwt_secret: str | None,
        supabase_url: str | None,
        timeout: float,
        refetch_seconds: float = 10,
    ) -> None:
        self._secret = jwt_secret
        # Locally, without a project, the tokens `users token` issues name the CLI's local stack.
        self._issuer = issuer(supabase_url)
        self._keys = (
            SigningKeys(
                f"{supabase_url.rstrip('/')}/auth/v1/.well-known/jwks.json",
                timeout=timeout,
                refetch_seconds=refetch_seconds,
            )
            if supabase_url
            else None
        )

    def verify(self, token: str) -> User:
        """The user a token names; raises InvalidToken for anything else."""
        import jwt

        try:
            claims = self._decode(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from exc
        email = claims.get("email")
        aal = claims.get("aal")
        return User(
            id=_user_id(claims.get("sub")),
            email=email if isinstance(email, str) and email else None,
            aal=aal if isinstance(aal, str) else None,
        )

    def _decode(self, token: str) -> dict[str, Any]:
        import jwt

        header = jwt.get_unverified_header(token)
        algorithm = header.get("alg")
        if algorithm in HMAC_ALGORITHMS:
            if not self._secret:
                raise InvalidToken("HS256 tokens are not accepted: no SUPABASE_JWT_SECRET is set")
            return self._checked(token, self._secret, HMAC_ALGORITHMS)
        if algorithm in KEY_ALGORITHMS:
            if self._keys is None:
                raise InvalidToken("no SUPABASE_URL to read the project's signing keys from")
            kid = header.get("kid")
            if not isinstance(kid, str) or not kid:
                raise InvalidToken("token names no signing key")
            key = self._keys.key(kid)
            # The key's own algorithm, not the token's: a key is used only as what it is.
            return self._checked(token, key, [str(key.algorithm_name)])
        raise InvalidToken(f"tokens signed with {algorithm!r} are not accepted")

    def _checked(self, token: str, key: Any, algorithms: list[str]) -> dict[str, Any]:
        """Signature, then `exp`, `aud` and `iss`."""
        import jwt

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
    return sign_claims(
        access_claims(user_id=user_id, email=email, supabase_url=supabase_url, ttl=ttl), secret
    )


def sign_claims(claims: dict[str, Any], secret: str) -> str:
    """Claims signed HS256 with the project's JWT secret, as Supabase Auth signs them."""
    import jwt

    return jwt.encode(claims, secret, algorithm="HS256")


def access_claims(
    *, user_id: str, email: str, supabase_url: str | None, ttl: int = 3600
) -> dict[str, Any]:
    """The claims Supabase Auth writes into an access token before any hook adds to them."""
    now = int(time.time())
    claims: dict[str, Any] = {
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
    return claims


def _user_id(sub: Any) -> str:
    """Supabase's subjects are user UUIDs; anything else would reach the database as a 500."""
    try:
        return str(uuid.UUID(str(sub)))
    except ValueError as exc:
        raise InvalidToken("token subject is not a user id") from exc
