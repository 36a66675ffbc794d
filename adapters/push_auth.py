"""Pub/Sub push authenticity: the OIDC token Pub/Sub signs for a push subscription's account.

Google signs these tokens; its certificates are read from PUSH_CERTS_URL and kept for a few
minutes (fetched again at once when a token names a key not seen yet, as after a rotation).

On a private Cloud Run service the token reaches the container in another form: Cloud Run's IAM
invoker check verifies it, then forwards it with its signature replaced by
`SIGNATURE_REMOVED_BY_GOOGLE` (Cloud Run's troubleshooting page, "signature removed"). Such a
token is accepted on its claims alone, and only when the caller says the invoker check is on.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
CLOCK_SKEW_SECONDS = 10
CERTS_TTL_SECONDS = 300
# What Cloud Run puts where the signature was, after its IAM check verified it.
SIGNATURE_REMOVED = "SIGNATURE_REMOVED_BY_GOOGLE"


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

    def verify(self, authorization: str | None, *, signature_removed_ok: bool = False) -> None:
        """Return if the header holds a push token of the configured account; raise otherwise.

        `signature_removed_ok`: the request came through Cloud Run's IAM invoker check, which
        verified the signature it then removed; the claims are still checked here.
        """
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise InvalidPushToken("missing bearer token")
        if token.endswith("." + SIGNATURE_REMOVED):
            if not signature_removed_ok:
                raise InvalidPushToken("signature removed, but no invoker check is trusted")
            claims = self._unsigned_claims(token)
        else:
            claims = self._decode(token)
        if claims.get("iss") not in ISSUERS:
            raise InvalidPushToken("token not issued by Google")
        if claims.get("email") != self._account or claims.get("email_verified") is not True:
            raise InvalidPushToken("token is not the push subscription's service account")

    def _unsigned_claims(self, token: str) -> Mapping[str, Any]:
        """The payload of a token Cloud Run verified, with the checks a signature cannot make."""
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidPushToken("not a JWT")
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (binascii.Error, ValueError) as exc:
            raise InvalidPushToken("unreadable token payload") from exc
        if not isinstance(claims, dict):
            raise InvalidPushToken("unreadable token payload")
        if claims.get("aud") != self._audience:
            raise InvalidPushToken("token audience is not this service")
        now = time.time()
        expires, issued = claims.get("exp"), claims.get("iat")
        if not isinstance(expires, int | float) or not isinstance(issued, int | float):
            raise InvalidPushToken("token without exp or iat")
        if expires + CLOCK_SKEW_SECONDS < now or issued - CLOCK_SKEW_SECONDS > now:
            raise InvalidPushToken("token expired or not yet valid")
        return claims

    def _decode(self, token: str) -> Mapping[str, Any]:
        # google-auth's JWT module loads `cryptography` (costly to import): only a token with its
        # signature needs it, never one that Cloud Run's invoker check verified.
        from google.auth import exceptions as google_exceptions
        from google.auth import jwt

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
