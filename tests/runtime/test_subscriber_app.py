"""The subscriber targets verify Pub/Sub's push token, and answer 401 otherwise (to every push
while PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT are unset).

Tokens are signed as Google signs them (RS256, `kid` header) by a local key whose certificate
a local endpoint serves in the format of https://www.googleapis.com/oauth2/v1/certs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from flask.testing import FlaskClient
from werkzeug.wrappers import Request, Response

from adapters.db.pool import Database
from config import Settings
from dev.local_google import certificate, id_token_claims, new_key, remove_signature, sign
from dev.processes import environment
from dev.samples.catalogue import seed_demo_products
from runtime.subscriber_app import create_app
from tests.conftest import serving
from tests.fakes.http import FakeServer, json_response
from tests.helpers import create_user
from tests.runtime.test_targets import completed_body, profile_access, push_envelope

AUDIENCE = "https://saas-access-123456789.europe-west1.run.app"
ACCOUNT = "saas-push@my-project.iam.gserviceaccount.com"


@dataclass
class GoogleCerts:
    """Google's token-signing certificates endpoint, and tokens signed with its key."""

    server: FakeServer = field(default_factory=FakeServer)
    key: rsa.RSAPrivateKey = field(default_factory=new_key)
    kid: str = "push-key-1"

    def __post_init__(self) -> None:
        self.server.route("/oauth2/v1/certs", ("GET",), self._certs)

    def _certs(self, request: Request) -> Response:
        return json_response({self.kid: certificate(self.key)})

    def token(
        self, *, key: rsa.RSAPrivateKey | None = None, removed: bool = False, **changes: Any
    ) -> str:
        """A push token; `removed`: as Cloud Run forwards it, its signature removed."""
        claims = id_token_claims(audience=AUDIENCE, email=ACCOUNT) | changes
        token = sign(claims, key or self.key, self.kid)
        return remove_signature(token) if removed else token


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


def push(
    client: FlaskClient, db: Database, token: str | None, headers: dict[str, str] | None = None
) -> tuple[int, bool]:
    seed_demo_products(db)
    user = create_user(db, f"{time.monotonic_ns()}@example.com")
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = client.post("/", json=push_envelope(completed_body(user)), headers=headers)
    return response.status_code, profile_access(db, user)


@pytest.mark.parametrize("removed", [False, True], ids=["signed", "as-cloud-run-forwards-it"])
def test_a_push_with_googles_token_is_applied(
    guarded: FlaskClient, google: GoogleCerts, db: Database, removed: bool
) -> None:
    assert push(guarded, db, google.token(removed=removed)) == (200, True)


WRONG_CLAIMS = [
    {"aud": "https://another-service.run.app"},
    {"email": "someone@evil.example"},
    {"email_verified": False},
    {"email_verified": "true"},
    {"iss": "https://evil.example"},
    {"exp": -120, "iat": -3720},  # seconds from when the test runs (see `at_run`)
    {"iat": 600, "exp": 4200},
]


def at_run(changes: dict[str, Any]) -> dict[str, Any]:
    """The claims with `iat` and `exp` made absolute now, not when the module was collected
    (the suite runs for minutes: a token "from the future" at collection is not one later)."""
    now = int(time.time())
    return {k: now + v if k in ("iat", "exp") else v for k, v in changes.items()}


@pytest.mark.parametrize("removed", [False, True], ids=["signed", "as-cloud-run-forwards-it"])
@pytest.mark.parametrize("changes", WRONG_CLAIMS)
def test_a_wrong_claim_is_401_and_changes_nothing(
    guarded: FlaskClient, google: GoogleCerts, db: Database, changes: dict[str, Any], removed: bool
) -> None:
    assert push(guarded, db, google.token(removed=removed, **at_run(changes))) == (401, False)


def test_a_foreign_signature_is_401(
    guarded: FlaskClient, google: GoogleCerts, db: Database
) -> None:
    assert push(guarded, db, google.token(key=new_key())) == (401, False)


@pytest.mark.parametrize(
    "token",
    [None, "garbage", "a.b.SIGNATURE_REMOVED_BY_GOOGLE", "e30.e30.SIGNATURE_REMOVED_BY_GOOGLE"],
)
def test_without_a_token_is_401(guarded: FlaskClient, db: Database, token: str | None) -> None:
    assert push(guarded, db, token) == (401, False)


def test_a_removed_signature_needs_the_invoker_check(
    target: Callable[..., FlaskClient], google: GoogleCerts, db: Database
) -> None:
    # With the invoker check off, nobody verified the signature before the container.
    client = target(
        push_audience=AUDIENCE,
        push_service_account=ACCOUNT,
        push_certs_url=f"{google.server.url}/oauth2/v1/certs",
        push_invoker_iam_check=False,
    )
    assert push(client, db, google.token(removed=True)) == (401, False)
    assert push(client, db, google.token()) == (200, True)


def test_a_removed_signature_beside_x_serverless_authorization_is_401(
    guarded: FlaskClient, google: GoogleCerts, db: Database
) -> None:
    # Cloud Run checked the other header then, and passed `Authorization` on as it came.
    other = {"X-Serverless-Authorization": f"Bearer {google.token(removed=True)}"}
    assert push(guarded, db, google.token(removed=True), other) == (401, False)


@pytest.mark.parametrize("configured", [False, True], ids=["open", "guarded"])
def test_health_check_answers_without_a_token(
    target: Callable[..., FlaskClient], google: GoogleCerts, configured: bool
) -> None:
    push_settings = {
        "push_audience": AUDIENCE,
        "push_service_account": ACCOUNT,
        "push_certs_url": f"{google.server.url}/oauth2/v1/certs",
    }
    client = target(**(push_settings if configured else {}))
    response = client.get("/healthz")
    assert (response.status_code, response.json) == (200, {"status": "ok"})


@pytest.mark.parametrize(("method", "path"), [("POST", "/healthz"), ("GET", "/"), ("GET", "/x")])
def test_nothing_else_answers_without_a_token(guarded: FlaskClient, method: str, path: str) -> None:
    assert guarded.open(path, method=method).status_code == 401


def test_certificates_are_fetched_once(
    guarded: FlaskClient, google: GoogleCerts, db: Database
) -> None:
    for _ in range(3):
        assert push(guarded, db, google.token())[0] == 200
    assert len(google.server.calls("GET", "/oauth2/v1/certs")) == 1


@pytest.mark.parametrize("removed", [False, True], ids=["signed", "as-cloud-run-forwards-it"])
def test_every_push_is_401_when_not_configured(
    target: Callable[..., FlaskClient], google: GoogleCerts, db: Database, removed: bool
) -> None:
    # Outside production too: a target started without its push settings grants nothing.
    client = target(push_certs_url=f"{google.server.url}/oauth2/v1/certs")
    assert push(client, db, None) == (401, False)
    assert push(client, db, google.token(removed=removed)) == (401, False)
    assert client.get("/healthz").status_code == 200


def test_audience_and_account_are_set_together() -> None:
    with pytest.raises(ValueError, match="PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT"):
        Settings(push_audience=AUDIENCE)
