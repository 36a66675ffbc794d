"""Google's side of a push, played locally: a key acting as Google's, its certificates, and the
OIDC token Pub/Sub attaches to each push of a subscription that has one.

The Pub/Sub emulator cannot mint OIDC tokens (its push subscriptions send none), so the
emulator pushes here instead, to `/push/<name>`; this attaches the token Pub/Sub would attach
(`pushConfig.oidcToken`: signed by Google for the push service account, `aud` the configured
audience) and forwards the push to where Pub/Sub would send it: the service's Cloud Run front
(dev/cloudrun_front.py). The certificates are served at `/oauth2/v1/certs`, in the format of
https://www.googleapis.com/oauth2/v1/certs (key id -> PEM X.509 certificate).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt
from werkzeug.wrappers import Request, Response

from adapters.push_auth import SIGNATURE_REMOVED
from dev import loopback

PUSH_ACCOUNT = "push@local-project.iam.gserviceaccount.com"
ISSUER = "https://accounts.google.com"
# Pub/Sub waits for a push up to the subscription's ack deadline; the front's timeout is shorter.
PUSH_WAIT_SECONDS = 600


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def certificate(key: rsa.RSAPrivateKey) -> str:
    """A self-signed PEM certificate of `key`'s public half, as Google publishes its keys."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "local-google")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def sign(claims: Mapping[str, Any], key: rsa.RSAPrivateKey, kid: str) -> str:
    """A JWT signed RS256 with a `kid` header, as Google signs its ID tokens."""
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    signer = crypt.RSASigner.from_string(pem, key_id=kid)  # type: ignore[no-untyped-call]
    token: bytes = jwt.encode(signer, dict(claims))  # type: ignore[no-untyped-call]
    return token.decode()


def id_token_claims(*, audience: str, email: str, lifetime: int = 3600) -> dict[str, Any]:
    """The claims of the ID token Google signs for a service account (Pub/Sub's push token)."""
    now = int(time.time())
    return {
        "iss": ISSUER,
        "aud": audience,
        "azp": "100000000000000000001",
        "email": email,
        "email_verified": True,
        "sub": "100000000000000000001",
        "iat": now,
        "exp": now + lifetime,
    }


def remove_signature(token: str) -> str:
    """The token as Cloud Run forwards it after its IAM invoker check verified it."""
    header, payload, _ = token.split(".")
    return f"{header}.{payload}.{SIGNATURE_REMOVED}"


@dataclass
class LocalGoogle:
    """A WSGI app: Google's certificates, and Pub/Sub's push token on the way to each front."""

    key: rsa.RSAPrivateKey = field(default_factory=new_key)
    kid: str = "local-google-1"
    url: str = ""
    # name -> (the front's URL the push goes to, the audience of its token, the account)
    _routes: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # (audience, account) -> (token, when it expires): pushes reuse a token while it has ten
    # minutes left, rather than signing one each (an RSA signature in the pushing process).
    _push_tokens: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def certs_url(self) -> str:
        return f"{self.url}/oauth2/v1/certs"

    @functools.cached_property
    def _certs(self) -> dict[str, str]:
        return {self.kid: certificate(self.key)}

    def certs(self) -> dict[str, str]:
        """Key id -> PEM certificate, as Google's certs endpoint lists its keys."""
        return self._certs

    def token(self, *, audience: str, email: str = PUSH_ACCOUNT) -> str:
        return sign(id_token_claims(audience=audience, email=email), self.key, self.kid)

    def push_token(self, *, audience: str, account: str) -> str:
        """The token a push of `account` for `audience` carries."""
        with self._lock:
            token, expires = self._push_tokens.get((audience, account), ("", 0.0))
            if expires - time.time() < 600:
                claims = id_token_claims(audience=audience, email=account)
                token, expires = sign(claims, self.key, self.kid), float(claims["exp"])
                self._push_tokens[(audience, account)] = (token, expires)
            return token

    def push_endpoint(
        self, name: str, *, to: str, audience: str, account: str = PUSH_ACCOUNT
    ) -> str:
        """Where the emulator pushes for `name`: on to `to`, with `account`'s token for
        `audience` (a subscription's `--push-auth-service-account` and its audience)."""
        self._routes[name] = (to, audience, account)
        return f"{self.url}/push/{name}"

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        if request.method == "GET" and request.path == "/oauth2/v1/certs":
            body = json.dumps(self.certs())
            response = Response(body, content_type="application/json")
        elif request.path.startswith("/push/") and request.method == "POST":
            response = self._push(request)
        else:
            response = Response("not found", status=404)
        return response(environ, start_response)

    def _push(self, request: Request) -> Response:
        name, _, rest = request.path.removeprefix("/push/").partition("/")
        if name not in self._routes:
            return Response(f"no push subscription for {name!r}", status=404)
        to, audience, account = self._routes[name]
        target = urllib.parse.urlsplit(to)
        headers = {
            "Content-Type": request.headers.get("Content-Type", "application/json"),
            "Authorization": f"Bearer {self.push_token(audience=audience, account=account)}",
        }
        connection = http.client.HTTPConnection(
            target.hostname or "127.0.0.1", target.port, timeout=PUSH_WAIT_SECONDS
        )
        try:
            path = (target.path.rstrip("/") + "/" + rest) or "/"
            connection.request("POST", path, body=request.get_data(), headers=headers)
            answer = connection.getresponse()
            return Response(answer.read(), status=answer.status)
        except OSError as exc:
            return Response(f"push failed: {exc}", status=503)
        finally:
            connection.close()


@contextlib.contextmanager
def running() -> Iterator[LocalGoogle]:
    """Local Google on a free loopback port, for the duration of the block."""
    app = LocalGoogle()
    with loopback.serving(app, name="local-google") as app.url:
        yield app
