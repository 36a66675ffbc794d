"""The subscriber targets verify Pub/Sub's push token when configured, and answer 401 otherwise.

Tokens are signed as Google signs them (RS256, `kid` header) by a local key whose certificate
a local endpoint serves in the format of https://www.googleapis.com/oauth2/v1/certs.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from flask.testing import FlaskClient
from google.auth import crypt, jwt
from werkzeug.wrappers import Request, Response

from adapters.db.pool import Database
from adapters.db.products import seed_demo_products
from config import Settings
from dev.processes import environment
from runtime.subscriber_app import create_app
from tests.conftest import serving
from tests.fakes.http import FakeServer, json_response
from tests.helpers import create_user
from tests.subscribers.test_targets import completed_body, profile_access, push_envelope

AUDIENCE = "https://saas-access-123456789.europe-west1.run.app"
ACCOUNT = "saas-push@my-project.iam.gserviceaccount.com"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _certificate(key: rsa.RSAPrivateKey) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-signer")])
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


@dataclass
class GoogleCerts:
    """Google's token-signing certificates endpoint, and tokens signed with its key."""

    server: FakeServer = field(default_factory=FakeServer)
    key: rsa.RSAPrivateKey = field(default_factory=_key)
    kid: str = "push-key-1"

    def __post_init__(self) -> None:
        self.server.route("/oauth2/v1/certs", ("GET",), self._certs)

    def _certs(self, request: Request) -> Response:
        return json_response({self.kid: _certificate(self.key)})

    def token(self, *, key: rsa.RSAPrivateKey | None = None, **changes: Any) -> str:
        now = int(time.time())
        claims = {
            "iss": "https://accounts.google.com",
            "aud": AUDIENCE,
            "azp": "1234567890",
            "email": ACCOUNT,
            "email_verified": True,
            "sub": "1234567890",
            "iat": now,
            "exp": now + 3600,
            **changes,
        }
        pem = (key or self.key).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        signer = crypt.RSASigner.from_string(pem, key_id=self.kid)  # type: ignore[no-untyped-call]
        token: bytes = jwt.encode(signer, claims)  # type: ignore[no-untyped-call]
        return token.decode()


@pytest.fixture
def google() -> Iterator[GoogleCerts]:
    yield from serving(GoogleCerts())


@pytest.fixture
def target(
    settings_factory: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    google: GoogleCerts,
    db: Database,
) -> Callable[..., FlaskClient]:
    """The `access` target as `bin/serve` builds it, with settings overrides."""

    def build(**overrides: Any) -> FlaskClient:
        for name, value in environment(settings_factory(**overrides)).items():
            monkeypatch.setenv(name, value)
        client: FlaskClient = create_app("access").test_client()
        return client

    return build


@pytest.fixture
def guarded(target: Callable[..., FlaskClient], google: GoogleCerts) -> FlaskClient:
    return target(
        push_audience=AUDIENCE,
        push_service_account=ACCOUNT,
        push_certs_url=f"{google.server.url}/oauth2/v1/certs",
    )


def push(client: FlaskClient, db: Database, token: str | None) -> tuple[int, bool]:
    seed_demo_products(db)
    user = create_user(db, f"{time.monotonic_ns()}@example.com")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.post("/", json=push_envelope(completed_body(user)), headers=headers)
    return response.status_code, profile_access(db, user)


def test_a_push_with_googles_token_is_applied(
    guarded: FlaskClient, google: GoogleCerts, db: Database
) -> None:
    assert push(guarded, db, google.token()) == (200, True)


@pytest.mark.parametrize(
    "changes",
    [
        {"aud": "https://another-service.run.app"},
        {"email": "someone@evil.example"},
        {"email_verified": False},
        {"iss": "https://evil.example"},
        {"exp": int(time.time()) - 120, "iat": int(time.time()) - 3720},
        {"key": _key()},
    ],
)
def test_anything_else_is_401_and_changes_nothing(
    guarded: FlaskClient, google: GoogleCerts, db: Database, changes: dict[str, Any]
) -> None:
    assert push(guarded, db, google.token(**changes)) == (401, False)


@pytest.mark.parametrize("token", [None, "garbage"])
def test_without_a_token_is_401(guarded: FlaskClient, db: Database, token: str | None) -> None:
    assert push(guarded, db, token) == (401, False)


def test_certificates_are_fetched_once(
    guarded: FlaskClient, google: GoogleCerts, db: Database
) -> None:
    for _ in range(3):
        assert push(guarded, db, google.token())[0] == 200
    assert len(google.server.calls("GET", "/oauth2/v1/certs")) == 1


def test_off_when_not_configured(target: Callable[..., FlaskClient], db: Database) -> None:
    # Locally, the emulator pushes without a token.
    assert push(target(), db, None) == (200, True)


def test_audience_and_account_are_set_together() -> None:
    with pytest.raises(ValueError, match="PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT"):
        Settings(push_audience=AUDIENCE)
