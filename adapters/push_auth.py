"""Pub/Sub push authenticity: the OIDC token Pub/Sub signs for a push subscription's account.

Google signs these tokens; its certificates are read from PUSH_CERTS_URL and kept for a few
minutes (fetched again at once when a token names a key not seen yet, as after a rotation).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

from google.auth import exceptions as google_exceptions
from google.auth import jwt

ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
CLOCK_SKEW_SECONDS = 10
CERTS_TTL_SECONDS = 300


class InvalidPushToken(Exception):
    """The request does not carry a valid push token for this subscriber."""


class PushVerifier:
    """Checks signature, issuer, audience, expiry, `email` and `email_verified`."""

    def __init__(self, *, audience: str, service_account: str, certs_url: str) -> None:
        self._audience = audience
        self._account = service_account
        self._certs_url = certs_url
        self._certs: Mapping[str, str] = {}
        self._fetched_at = 0.0
        self._lock = threading.Lock()

    def verify(self, authorization: str | None) -> None:
        """Return if the header holds a push token of the configured account; raise otherwise."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise InvalidPushToken("missing bearer token")
        claims = self._decode(token.strip())
        if claims.get("iss") not in ISSUERS:
            raise InvalidPushToken("token not issued by Google")
        if claims.get("email") != self._account or claims.get("email_verified") is not True:
            raise InvalidPushToken("token is not the push subscription's service account")

    def _decode(self, token: str) -> Mapping[str, Any]:
        for refresh in (False, True):
            try:
                claims: Mapping[str, Any] = jwt.decode(  # type: ignore[no-untyped-call]
                    token,
                    certs=self._current_certs(refresh=refresh),
                    audience=self._audience,
                    clock_skew_in_seconds=CLOCK_SKEW_SECONDS,
                )
                return claims
            except (ValueError, google_exceptions.GoogleAuthError) as exc:
                if refresh or "Certificate for key id" not in str(exc):
                    raise InvalidPushToken(str(exc)) from exc
        raise AssertionError("unreachable")

    def _current_certs(self, *, refresh: bool) -> Mapping[str, str]:
        with self._lock:
            stale = time.monotonic() - self._fetched_at > CERTS_TTL_SECONDS
            if refresh or stale or not self._certs:
                with urllib.request.urlopen(self._certs_url, timeout=5) as response:  # noqa: S310
                    self._certs = json.loads(response.read())
                self._fetched_at = time.monotonic()
            return self._certs
