"""What tests say to Supabase Auth (dev/auth_stand_in.py, the one stand-in, serves it): a
project's keys as the dashboard shows them today, and legacy HS256 tokens."""

from __future__ import annotations

import time
from typing import Any

import jwt

from dev.auth_stand_in import JWT_SECRET

__all__ = ["JWT_SECRET", "PUBLISHABLE_KEY", "SECRET_KEY", "hs256_token"]

SECRET_KEY = "sb_secret_test_9b2f4c1e0d7a6b5c4d3e2f1a"
PUBLISHABLE_KEY = "sb_publishable_test_1a2b3c4d5e6f7a8b9c0d"


def hs256_token(
    *, sub: str, email: str, issuer: str, exp_in: int = 3600, secret: str = JWT_SECRET
) -> str:
    """An access token as Supabase signs it with the legacy JWT secret."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "sub": sub,
        "email": email,
        "aud": "authenticated",
        "role": "authenticated",
        "iat": now,
        "exp": now + exp_in,
    }
    return jwt.encode(claims, secret, algorithm="HS256")
